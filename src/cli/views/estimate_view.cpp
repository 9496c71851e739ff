#include "cli/views/estimate_view.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common/json_read.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;

// Reading the answer defensively (cli/common/json_read.h): a newer daemon may add or drop fields.
std::optional<MiB> mib(const json& object, const char* key) { return integer_of(object, key); }

// A string field as shown: through printable() (core/text.h), as every command shows the
// daemon's text.
std::string text(const json& object, const char* key) {
    const json* v = member(object, key);
    return v != nullptr && v->is_string() ? printable(v->get<std::string>()) : std::string();
}

std::string mib_cell(std::optional<MiB> v) { return v ? format_mib(*v) : "-"; }

// 45s, 3m05s, 1h02m, as `carma queue` writes times.
std::string duration_text(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e11) {
        return "-";
    }
    const auto s = static_cast<long long>(seconds);
    if (s < 60) {
        return fmt::format("{}s", s);
    }
    if (s < 3600) {
        return fmt::format("{}m{:02}s", s / 60, s % 60);
    }
    return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

// "3 run(s): 2 succeeded, 1 out of memory (held 6,048 MiB); spread 56 MiB; median run 10m00s;
// activity 0.71; newest task 12 attempt 1 succeeded"
std::string history_detail(const json& h, const std::string& none) {
    const std::optional<double> runs = number_of(h, "runs");
    if (!runs || *runs == 0) {
        return none;
    }
    std::string out = fmt::format("{} run(s): {} succeeded", *runs,
                                  number_of(h, "succeeded").value_or(0));
    if (const double oom = number_of(h, "out_of_memory").value_or(0); oom > 0) {
        out += fmt::format(", {} out of memory (held {})", oom, mib_cell(mib(h, "oom_held_mib")));
    }
    if (const double failed = number_of(h, "failed").value_or(0); failed > 0) {
        out += fmt::format(", {} failed", failed);
    }
    if (const double unseen = number_of(h, "unobserved").value_or(0); unseen > 0) {
        out += fmt::format(", {} unobserved (not counted)", unseen);
    }
    if (auto spread = mib(h, "spread_mib")) {
        out += fmt::format("; spread {}", format_mib(*spread));
    }
    if (auto median = number_of(h, "median_run_s")) {
        out += fmt::format("; median run {}", duration_text(*median));
    }
    if (auto activity = number_of(h, "activity")) {
        out += fmt::format("; activity {:.2f}", *activity);
    }
    const json& newest = object_of(h, "newest");
    if (!newest.empty()) {
        out += fmt::format("; newest task {} attempt {} {}", newest.value("task", json()).dump(),
                           newest.value("attempt", json()).dump(), text(newest, "outcome"));
    }
    return out;
}

std::string command_text(const json& argv) {
    std::vector<std::string> parts;
    for (const json& a : argv.is_array() ? argv : json::array()) {
        parts.push_back(printable(a.is_string() ? a.get<std::string>() : a.dump()));
    }
    return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace

std::string format_estimate(const json& e) {
    const json& family = object_of(e, "family");
    const json& estimates = object_of(e, "estimates");
    const json& learned = object_of(e, "learned");
    const std::string script = text(family, "script");
    const std::string family_name =
        text(family, "program") + (script.empty() ? std::string() : " " + script);
    const double gpus = number_of(e, "gpus").value_or(1);
    std::string out = fmt::format("estimate for {}: {} ({} GPU{})\n", text(e, "user"),
                                  command_text(e.value("command", json())), gpus,
                                  gpus == 1 ? "" : "s");
    out += fmt::format("fingerprint {}, family {} ({})\n\n", text(e, "fingerprint"),
                       text(family, "id"), family_name);

    const json& mine = object_of(e, "history");
    const json& kin = object_of(e, "family_history");
    struct Row {
        std::string source, memory, detail;
    };
    const std::vector<Row> rows = {
        {"history", mib_cell(mib(mine, "peak_mib")),
         history_detail(mine, "no earlier run of this command")},
        {"family", mib_cell(mib(kin, "peak_mib")),
         history_detail(kin, "no run of other commands of " + family_name)},
        {"declared", mib_cell(mib(e, "declared_mib")), ""},
        {"horus", mib_cell(mib(estimates, "horus_mib")), ""},
        {"faketensor", mib_cell(mib(estimates, "faketensor_mib")), ""},
        {"gpumemnet", mib_cell(mib(estimates, "gpumemnet_mib")), ""},
        {"profiled", mib_cell(mib(e, "profiled_mib")),
         mib(e, "profiled_mib") ? "the oracle's value: shown, never used" : ""},
    };
    std::size_t memory_width = std::string("MEMORY/GPU").size();
    for (const Row& r : rows) {
        memory_width = std::max(memory_width, r.memory.size());
    }
    out += fmt::format("{:<12}{:<{}}  {}\n", "SOURCE", "MEMORY/GPU", memory_width, "DETAIL");
    for (const Row& r : rows) {
        out += r.detail.empty()
                   ? fmt::format("{:<12}{}\n", r.source, r.memory)
                   : fmt::format("{:<12}{:<{}}  {}\n", r.source, r.memory, memory_width, r.detail);
    }

    out += "\n";
    if (auto need = mib(learned, "need_mib")) {
        out += fmt::format("{:<12}{} + {} margin\n", "CARMA plans", format_mib(*need),
                           mib_cell(mib(learned, "margin_mib")));
    } else {
        out += fmt::format("{:<12}{}\n", "CARMA plans",
                           "memory unknown: no run, declaration or estimate to go by");
    }
    if (const MiB bound = mib(learned, "lower_bound_mib").value_or(0); bound > 0) {
        out += fmt::format("{:<12}{} (held when it ran out of memory)\n", "lower bound",
                           format_mib(bound));
    }
    const std::optional<double> duration = number_of(learned, "duration_s");
    out += fmt::format("{:<12}{}\n", "run time", duration ? duration_text(*duration) : "unknown");
    const std::optional<double> activity = number_of(learned, "activity");
    out += fmt::format("{:<12}{}\n", "activity",
                       activity ? fmt::format("{:.2f}", *activity) : "unknown");
    out += fmt::format("{:<12}{}\n", "why", text(learned, "basis"));
    // What sharing costs it beyond the predictor's word (core/speed_correction.h).
    if (auto sc = e.find("speed_correction"); sc != e.end() && sc->is_object()) {
        std::string figures;
        if (auto classes = sc->find("classes"); classes != sc->end() && classes->is_array()) {
            for (const json& c : *classes) {
                if (text(c, "basis") == "none") {
                    continue;
                }
                // One class a line: a family can have figures in all nine classes.
                figures += fmt::format("{}K {:.2f} {} ({}, {} observation(s))",
                                       figures.empty() ? "" : "\n" + std::string(12, ' '),
                                       number_of(c, "k").value_or(1),
                                       text(c, "sharing_class"), text(c, "basis"),
                                       number_of(c, "samples").value_or(0));
            }
        }
        out += fmt::format("{:<12}{}\n{:<12}this family: {} observation(s)\n", "correction",
                           figures.empty() ? "none (K 1)" : figures, "",
                           number_of(*sc, "observations").value_or(0));
    }
    // Runs it never saw teach nothing: say why that may be, once per history that has them.
    for (const json* h : {&mine, &kin}) {
        if (const std::string why = text(*h, "unobserved_why"); !why.empty()) {
            out += fmt::format("{:<12}{} {} run(s): {}\n", "unobserved",
                               h == &mine ? "this command's" : "its family's",
                               number_of(*h, "unobserved").value_or(0), why);
        }
    }
    return out;
}

}  // namespace carma::cli

// `carma gpus [--json] [--wide]`: the GPUs with their memory, activity, risk and tasks
// (GET /v1/gpus).

#include "cli/commands.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/views/cells.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;

// On a terminal the RISK column's reason is cut to this many characters, so a row fits a line;
// --wide, a pipe or a file get it whole.
constexpr std::size_t kGpuReasonWidth = 48;

std::string memory_cell(const json& gpu) {
    const std::optional<std::int64_t> total = integer_of(gpu, "total_mib");
    const std::optional<std::int64_t> free = integer_of(gpu, "free_mib");
    std::optional<std::int64_t> used = integer_of(gpu, "used_mib");
    if (!used && total && free) {
        used = *total - *free;
    }
    if (!total || !used) {
        return "-";
    }
    return fmt::format("{}/{}", format_mib(*used), format_mib(*total));
}

std::string risk_cell(const json& window, const char* metric) {
    const json* stats = member(window, metric);
    return stats != nullptr ? format_ratio(number_of(*stats, "risk")) : "-";
}

std::string verdict_cell(const json& gpu, std::size_t reason_width) {
    const json* risk = member(gpu, "risk");
    if (risk == nullptr) {
        return "-";
    }
    if (!flag_of(*risk, "high")) {
        return "ok";
    }
    const std::string reason = text_of(*risk, "reason", "");
    const std::string verdict = reason.empty() ? "high" : "high: " + reason;
    return reason_width == 0 ? verdict : truncate(verdict, reason_width);
}

// As every view writes ids (the daemon's task_labels: 12, 138_2); a daemon without them gives
// the plain ids.
std::string tasks_cell(const json& gpu) {
    std::vector<std::string> ids;
    const json& labels = array_of(gpu, "task_labels");
    for (const json& id : labels.empty() ? array_of(gpu, "tasks") : labels) {
        ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
    }
    if (ids.empty()) {
        return "-";
    }
    // --gpu-share tasks: what they reserve of the GPU together (core/gpu_share.h).
    if (const std::optional<double> shares = number_of(gpu, "share_reserved")) {
        return fmt::format("{} (shares {:g}/1)", fmt::join(ids, ","), *shares);
    }
    return fmt::format("{}", fmt::join(ids, ","));
}

// "SMACT dcgm, SMOCC dcgm, DRAMA dcgm, util dcgm" from a GPU's "sources".
std::string sources_line(const json& gpu) {
    const json* sources = member(gpu, "sources");
    if (sources == nullptr) {
        return "unknown (no sample yet)";
    }
    return fmt::format("SMACT {}, SMOCC {}, DRAMA {}, util {}, power {}, memory {}",
                       text_of(*sources, "smact"), text_of(*sources, "smocc"),
                       text_of(*sources, "drama"), text_of(*sources, "util"),
                       text_of(*sources, "power"), text_of(*sources, "memory"));
}

std::string health_cell(const json& gpu) {
    const json* health = member(gpu, "health");
    if (health == nullptr) {
        return "-";
    }
    return text_of(*health, "state", "-");
}

void print_gpus(const json& answer, std::size_t reason_width) {
    const std::string backend = text_of(answer, "backend");
    print_line(stdout, "backend: {}", backend);
    if (backend.starts_with("emulated")) {
        fmt::print("EMULATED GPUs: not real hardware; only carma-fakejob processes use them\n");
    }
    // The server beside its GPUs: how tasks are fenced, and what they hold of it.
    if (const json* host = member(answer, "host"); host != nullptr) {
        if (const json* fences = member(*host, "fences"); fences != nullptr) {
            print_line(stdout, "fences: {}", text_of(*fences, "text"));
        }
        if (const auto total = integer_of(*host, "cpus_total")) {
            print_line(stdout, "host: {} of {} cores free, {} of {} memory free (tasks' share)",
                       integer_of(*host, "cpus_free").value_or(0), *total,
                       format_mib_or_dash(integer_of(*host, "memory_free_mib")),
                       format_mib_or_dash(integer_of(*host, "memory_total_mib")));
        }
    }
    TextTable table({"GPU", "NAME", "HEALTH", "MEMORY USED/TOTAL", "AVAILABLE", "UTIL", "SAMPLES",
                     "SMACT", "SMOCC", "DRAMA", "LOCKED", "TASKS", "RISK"});
    for (const json& g : array_of(answer, "gpus")) {
        const json empty = json::object();
        const json* window = member(g, "window");
        const json& w = window != nullptr ? *window : empty;
        table.add({text_of(g, "index"), text_of(g, "name"), health_cell(g), memory_cell(g),
                   format_mib_or_dash(integer_of(g, "available_mib")),
                   format_ratio(number_of(g, "util")), text_of(w, "samples"), risk_cell(w, "smact"),
                   risk_cell(w, "smocc"), risk_cell(w, "drama"),
                   flag_of(g, "locked") ? "warm-up" : "-", tasks_cell(g),
                   verdict_cell(g, reason_width)});
    }
    table.print();
    fmt::print(
        "SMACT/SMOCC/DRAMA: each one's risk statistic over the window, which the risk "
        "filter compares; '-' = unknown\n");
    // Where each metric comes from and the risk rule that follows, per GPU: nothing silent.
    for (const json& g : array_of(answer, "gpus")) {
        const json* risk = member(g, "risk");
        const json* health = member(g, "health");
        print_line(stdout, "GPU {}: {}", text_of(g, "index"), sources_line(g));
        print_line(stdout, "  risk rule: {}",
                   risk != nullptr ? text_of(*risk, "rule_text", "-") : "-");
        if (health != nullptr && !text_of(*health, "reason", "").empty()) {
            print_line(stdout, "  {}: {}", text_of(*health, "state"), text_of(*health, "reason"));
        }
        // Processes CARMA did not start: their memory is taken and never planned into.
        for (const json& f : array_of(g, "foreign")) {
            print_line(stdout, "  foreign: pid {} user {} holds {} (not a CARMA task; never "
                               "planned into)",
                       text_of(f, "pid"), text_of(f, "user", "?"),
                       format_mib_or_dash(integer_of(f, "used_mib")));
        }
    }
}

struct GpusOptions {
    std::string socket;
    bool json = false;
    bool wide = false;
};

int run_gpus(const GpusOptions& o) {
    api::ApiClient client = connect(o.socket);
    const json answer = or_die(client.gpus());
    if (o.json) {
        print_json(answer);
    } else {
        print_gpus(answer, o.wide || terminal_width() == 0 ? 0 : kGpuReasonWidth);
    }
    return 0;
}

}  // namespace

Action add_gpus_command(CLI::App& app) {
    auto o = std::make_shared<GpusOptions>();
    CLI::App* cmd = app.add_subcommand("gpus", "Show the GPUs: memory, activity, risk, tasks");
    cmd->add_flag("--json", o->json, "Print the daemon's answer as JSON");
    cmd->add_flag("--wide", o->wide,
                  "Print the RISK column's reason whole (a pipe or a file always gets it whole)");
    add_socket_option(cmd, o->socket);
    return [o] { return run_gpus(*o); };
}

}  // namespace carma::cli

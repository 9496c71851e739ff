#include "model/catalog.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/csv.h"
#include "data/embedded.h"
#include "model/constants.h"

namespace carma::model {

WorkloadProfile profile_from_class(std::string name, std::string_view task_class, int gpus,
                                   double t_solo_s, MiB m_peak_mib) {
    WorkloadProfile p;
    p.name = std::move(name);
    p.model = "unknown";
    p.gpus = gpus;
    p.t_solo_s = t_solo_s;
    p.t_start_s = std::min(kDefaultStartSeconds, 0.5 * t_solo_s);
    p.m_peak_mib = m_peak_mib;
    // Typical A100-40GB solo activity per class (medians of the AEGIS profiles of that class).
    if (task_class == "light") {
        p.util = 0.35, p.smact = 0.19, p.smocc = 0.08, p.drama = 0.05;
    } else if (task_class == "heavy") {
        p.util = 0.95, p.smact = 0.91, p.smocc = 0.29, p.drama = 0.16;
    } else {
        p.util = 0.80, p.smact = 0.70, p.smocc = 0.36, p.drama = 0.40;
    }
    p.source = fmt::format("class default ({})", task_class.empty() ? "medium" : task_class);
    return p;
}

TaskSpec task_spec_for(const WorkloadProfile& p) {
    TaskSpec spec;
    spec.name = p.name;
    spec.workload = p.name;
    spec.gpus = p.gpus;
    spec.memory.profiled_mib = p.m_peak_mib;
    spec.memory.horus_mib = p.horus_mib;
    spec.memory.faketensor_mib = p.faketensor_mib;
    spec.memory.gpumemnet_mib = p.gpumemnet_mib;
    spec.memory.model = p.descriptor;
    return spec;
}

Result<Catalog> Catalog::parse(std::string_view csv_text, std::string_view source) {
    auto table = parse_csv(csv_text, source);
    if (!table) {
        return tl::unexpected(table.error());
    }
    const char* required[] = {"task_name", "gpus",  "t_solo_s", "m_peak_mib",
                              "gpu_util",  "smact", "smocc",    "drama"};
    for (const char* col : required) {
        if (table->column(col) < 0) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{}: missing column '{}'", source, col));
        }
    }
    Catalog catalog;
    for (std::size_t r = 0; r < table->rows.size(); ++r) {
        const auto& row = table->rows[r];
        auto text = [&](const char* col) -> std::string {
            int c = table->column(col);
            return c < 0 ? std::string() : row[static_cast<std::size_t>(c)];
        };
        auto number = [&](const char* col) -> Result<double> {
            return csv_number(*table, r, table->column(col), source);
        };
        auto optional_number = [&](const char* col) -> Result<std::optional<double>> {
            int c = table->column(col);
            if (c < 0 || row[static_cast<std::size_t>(c)].empty()) {
                return std::optional<double>();
            }
            auto v = csv_number(*table, r, c, source);
            if (!v) {
                return tl::unexpected(v.error());
            }
            return std::optional<double>(*v);
        };
        WorkloadProfile p;
        p.name = text("task_name");
        p.model = text("model");
        p.source = text("profile_source");
        auto gpus = number("gpus");
        auto t_solo = number("t_solo_s");
        auto m_peak = number("m_peak_mib");
        auto util = number("gpu_util");
        auto smact = number("smact");
        auto smocc = number("smocc");
        auto drama = number("drama");
        auto t_start = optional_number("t_start_s");
        auto power = optional_number("power_w");
        auto horus = optional_number("horus_mib");
        auto fake = optional_number("faketensor_mib");
        auto gmn = optional_number("gpumemnet_mib");
        auto params = optional_number("parameters");
        auto acts = optional_number("activations_per_sample");
        auto batch = optional_number("batch_size");
        for (const auto* v : {&gpus, &t_solo, &m_peak, &util, &smact, &smocc, &drama}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        for (const auto* v : {&t_start, &power, &horus, &fake, &gmn, &params, &acts, &batch}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        p.gpus = static_cast<int>(*gpus);
        p.t_solo_s = *t_solo;
        p.m_peak_mib = static_cast<MiB>(*m_peak);
        p.util = *util;
        p.smact = *smact;
        p.smocc = *smocc;
        p.drama = *drama;
        p.t_start_s = std::min(t_start->value_or(kDefaultStartSeconds), 0.5 * p.t_solo_s);
        p.power_w = power->value_or(0);
        if (*horus) {
            p.horus_mib = static_cast<MiB>(**horus);
        }
        if (*fake) {
            p.faketensor_mib = static_cast<MiB>(**fake);
        }
        if (*gmn) {
            p.gpumemnet_mib = static_cast<MiB>(**gmn);
        }
        if (*params && *acts && *batch) {
            p.descriptor = ModelDescriptor{**params, **acts, static_cast<int>(**batch)};
        }
        if (p.name.empty() || p.gpus < 1 || p.t_solo_s <= 0 || p.m_peak_mib < 0) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: a profile needs a name, gpus >= 1, t_solo_s > 0 "
                                    "and m_peak_mib >= 0",
                                    source, table->line_numbers[r]));
        }
        if (catalog.by_name_.contains(p.name)) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: duplicate profile '{}'", source,
                                    table->line_numbers[r], p.name));
        }
        catalog.by_name_.emplace(p.name, catalog.profiles_.size());
        catalog.profiles_.push_back(std::move(p));
    }
    return catalog;
}

const Catalog& Catalog::embedded() {
    static const Catalog catalog = [] {
        auto text = data::embedded("workloads");
        if (!text) {
            throw std::logic_error("the workload catalog was not embedded at build time");
        }
        auto parsed = Catalog::parse(*text, "data/workloads.csv");
        if (!parsed) {
            throw std::logic_error(parsed.error().message);
        }
        return std::move(*parsed);
    }();
    return catalog;
}

const WorkloadProfile* Catalog::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &profiles_[it->second];
}

}  // namespace carma::model

#include "core/memory_need.h"

#include <cmath>

#include "core/metric_window.h"
#include "core/risk_filter.h"
#include "core/text.h"

#include <fmt/format.h>

namespace carma {

std::string_view to_string(MemoryKnowledge k) {
    switch (k) {
        case MemoryKnowledge::Oracle: return "oracle";
        case MemoryKnowledge::None: return "none";
        case MemoryKnowledge::Estimate: return "estimate";
        case MemoryKnowledge::Learned: return "learned";
    }
    return "?";
}

std::string_view to_string(Estimator e) {
    switch (e) {
        case Estimator::Horus: return "horus";
        case Estimator::FakeTensor: return "faketensor";
        case Estimator::GpuMemNet: return "gpumemnet";
    }
    return "?";
}

Result<Estimator> parse_estimator(std::string_view name) {
    const std::string n = to_lower(name);
    if (n == "horus") {
        return Estimator::Horus;
    }
    if (n == "faketensor") {
        return Estimator::FakeTensor;
    }
    if (n == "gpumemnet") {
        return Estimator::GpuMemNet;
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("unknown estimator '{}'; use horus, faketensor or gpumemnet", name));
}

MiB horus_estimate_mib(const ModelDescriptor& m) {
    const double b = m.batch_size;
    const double bytes = 4.0 * (b * m.activations_per_sample + m.parameters + b * m.parameters);
    return static_cast<MiB>(std::llround(bytes / (1024.0 * 1024.0) + 800.0));
}

std::optional<MiB> known_need_mib(const TaskSpec& task, MemoryKnowledge knowledge,
                                  Estimator estimator) {
    const MemoryInfo& mem = task.memory;
    switch (knowledge) {
        case MemoryKnowledge::None:
            return std::nullopt;
        case MemoryKnowledge::Learned:
            return task.learned.need_mib;
        case MemoryKnowledge::Oracle:
            if (mem.profiled_mib) {
                return mem.profiled_mib;
            }
            return mem.declared_mib;
        case MemoryKnowledge::Estimate: {
            std::optional<MiB> est;
            switch (estimator) {
                case Estimator::Horus:
                    if (mem.model && mem.model->batch_size > 0) {
                        est = horus_estimate_mib(*mem.model);
                    } else {
                        est = mem.horus_mib;
                    }
                    break;
                case Estimator::FakeTensor: est = mem.faketensor_mib; break;
                case Estimator::GpuMemNet: est = mem.gpumemnet_mib; break;
            }
            if (est) {
                return est;
            }
            return mem.declared_mib;
        }
    }
    return std::nullopt;
}

MemoryRequirement memory_requirement(const TaskSpec& task, MemoryKnowledge knowledge,
                                     const MemoryNeedConfig& config) {
    if (knowledge == MemoryKnowledge::Learned && task.learned.need_mib) {
        // The margin is the one knowledge gave this figure (it shrinks as history agrees).
        return {*task.learned.need_mib + task.learned.margin_mib,
                fmt::format("learned {} + {} margin", format_mib(*task.learned.need_mib),
                            format_mib(task.learned.margin_mib))};
    }
    std::optional<MiB> need = known_need_mib(task, knowledge, config.estimator);
    if (!need) {
        return {config.no_info_min_free_mib,
                fmt::format("no memory information: {} free required",
                            format_mib(config.no_info_min_free_mib))};
    }
    std::string source = knowledge == MemoryKnowledge::Estimate
                             ? std::string(to_string(config.estimator)) + " estimate"
                             : std::string("need");
    return {*need + config.margin_mib,
            fmt::format("{} {} + {} margin", source, format_mib(*need),
                        format_mib(config.margin_mib))};
}

}  // namespace carma

#pragma once
// How much free memory a policy demands of a GPU before collocating a task on it (spec §2.2,
// §3.6). The three kinds of knowledge are the paper's: the profiled peak ("oracle"), none at all
// ("OR", only recovery), and an estimate ("EST"). A fourth, `Learned`, is CARMA's own: what
// core/knowledge derived from history, declarations and estimators (TaskSpec::learned).

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/task.h"

namespace carma {

enum class MemoryKnowledge { Oracle, None, Estimate, Learned };
enum class Estimator { Horus, FakeTensor, GpuMemNet };

std::string_view to_string(MemoryKnowledge k);
std::string_view to_string(Estimator e);
Result<Estimator> parse_estimator(std::string_view name);

struct MemoryNeedConfig {
    MiB margin_mib = 2048;           // added to a known need (oracle, EST)
    MiB no_info_min_free_mib = 5120; // required available memory when nothing is known (OR)
    Estimator estimator = Estimator::Horus;
};

// The Horus-style analytic estimate (spec §3.2):
//   4 bytes x (B*A + P + B*P) / 2^20 + 800 MiB   (gradients G = P, 800 MiB context allowance)
MiB horus_estimate_mib(const ModelDescriptor& model);

// What is known about the task's peak memory per GPU under the given knowledge, or nothing.
// Oracle: profiled, else declared. Estimate: the configured estimator (Horus computed from the
// model descriptor when present), else declared. Learned: task.learned.need_mib.
std::optional<MiB> known_need_mib(const TaskSpec& task, MemoryKnowledge knowledge,
                                  Estimator estimator);

struct MemoryRequirement {
    MiB min_available_mib = 0;  // compared with WindowStats::available_mib (last free - 512)
    std::string basis;          // "oracle 13,236 MiB + 2,048 MiB margin" etc., for messages
};

MemoryRequirement memory_requirement(const TaskSpec& task, MemoryKnowledge knowledge,
                                     const MemoryNeedConfig& config);

}  // namespace carma

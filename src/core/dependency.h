#pragma once
// Dependencies between tasks, in sbatch's words: `--dependency=afterok:12:13,afterany:14_2`,
// and CARMA's `--after 12:13` (afterok). What a dependency waits for, and what the ends of the
// tasks it names mean for it. Pure: the daemon looks the tasks up.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/task_ref.h"

namespace carma {

enum class DependencyType {
    AfterOk,     // every task it names succeeded
    AfterAny,    // every task it names ended, however
    AfterNotOk,  // every task it names ended and one of them did not succeed
    // Slurm's singleton: no earlier unfinished task of the same user and name. Names no task;
    // the daemon turns it into afterany on each such task at submit, so it is never judged.
    Singleton,
};

// "afterok", "afterany", "afternotok", "singleton"
std::string_view to_string(DependencyType type);
std::optional<DependencyType> parse_dependency_type(std::string_view word);

// A task, an array member or a whole array (the daemon makes a plain array id whole at submit,
// as Slurm reads `afterok:ARRAY_ID`).
struct Dependency {
    DependencyType type = DependencyType::AfterOk;
    TaskRef on;
    bool operator==(const Dependency&) const = default;
};

// sbatch's --dependency: "TYPE:ID[:ID...]" or "singleton" joined by ',' (all must hold), each ID
// as parse_task_ref reads it. Slurm's other types (after, aftercorr, ...) and '?' (any one of
// them) are refused with what CARMA does take.
Result<std::vector<Dependency>> parse_dependency_spec(std::string_view text);
// `--after 12:13` or `12,13`: afterok on each.
Result<std::vector<Dependency>> parse_after_list(std::string_view text);
// "afterok:12_3" or "singleton", as parse_dependency_spec reads it back.
std::string format_dependency(const Dependency& dependency);

// How one task a dependency names has ended, as far as any dependency cares.
enum class TargetEnd { NotYet, Succeeded, Unsuccessful };

enum class DependencyVerdict { Waiting, Satisfied, Never };

// What the ends of the tasks a dependency names (one, or every member of an array) mean for it.
// `decided_by` is the task that made it Never (an unsuccessful one for afterok; for afternotok,
// every task succeeded and it is none).
struct DependencyJudgement {
    DependencyVerdict verdict = DependencyVerdict::Waiting;
    std::optional<std::size_t> decided_by;
};
DependencyJudgement judge_dependency(DependencyType type, std::span<const TargetEnd> targets);

// "waits for task(s) 12, 13_2 to succeed; 14 to end": the message of a task whose dependencies
// do not hold yet.
std::string describe_waiting(std::span<const Dependency> dependencies);

}  // namespace carma

#pragma once
// sbatch's `--array=0-9%2`: at most N members of an array run at once (Slurm's
// ArrayTaskThrottle). The daemon keeps the members beyond N out of the scheduler, as it keeps
// tasks whose dependencies are unmet, so no policy needs to know; this is the decision of which
// members to let in, pure so it is tested without a daemon.
//
// A member counts against N from the moment it is let into the queue until it ends: waiting in
// the scheduler, starting, running, or waiting to be relaunched after running out of memory.
// Counting the waiting ones too means N are never exceeded even when several start in one round.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/task_id.h"

namespace carma {

struct HeldMember {
    TaskId id = 0;
    int index = 0;
};

// The members to let in now, lowest index first (Slurm starts an array in index order):
// `max_running` less the `active` members, from those `held` back. max_running 0: all of them.
std::vector<TaskId> members_to_admit(int max_running, std::size_t active,
                                     std::span<const HeldMember> held);

// What a held member's queue line says while it waits for a slot.
std::string throttle_reason(int max_running);

}  // namespace carma

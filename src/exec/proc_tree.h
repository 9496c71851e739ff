#pragma once
// Which processes belong to a task. A task's leader runs in its own session and process group,
// but a task may start processes elsewhere: ranks that call setsid (a new session and group),
// daemonised helpers. So a task's processes are its leader's process group and session plus
// every descendant of the leader, found through /proc. The GPU backends list processes by pid;
// this is how the daemon knows which of them are the task's on each GPU.

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <span>
#include <vector>

namespace carma::exec {

struct ProcEntry {
    pid_t pid = 0;
    pid_t ppid = 0;
    pid_t pgrp = 0;
    pid_t session = 0;
    bool zombie = false;  // exited, not yet reaped: runs no more
};

// A snapshot of /proc/<pid>/stat for every process this user can see (all of them on Linux).
// Processes that vanish while it is read are skipped.
std::vector<ProcEntry> read_process_table();

// Pure: the leader's group, its session, and all descendants of the leader.
std::set<pid_t> task_processes(std::span<const ProcEntry> table, pid_t leader);

// Pure: every process below `root` in the tree (not `root` itself). The supervisor is a child
// subreaper, so a task's orphans (a double-forked daemon, a setsid'd rank whose parent exited)
// are re-parented to it and stay findable here.
std::set<pid_t> descendants(std::span<const ProcEntry> table, pid_t root);

// Whether the process's environment says it belongs to this attempt (CARMA_TASK_ID and
// CARMA_ATTEMPT, which the daemon sets for every task). A process group or pid remembered from
// earlier may have been reused by then: only processes that carry the mark are signalled.
bool carries_attempt(pid_t pid, std::int64_t task, int attempt);

}  // namespace carma::exec

#include "exec/proc_tree.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace carma::exec {
namespace {

// This test verifies the pure membership rule: the leader's group and session, and every
// descendant of any member, also one that moved to a session of its own; strangers are out.
TEST(ProcTreeTest, GroupSessionAndDescendants) {
    const std::vector<ProcEntry> table = {
        {100, 1, 100, 100},  // the task leader (its own session and group)
        {101, 100, 100, 100},  // a child in the group
        {102, 100, 102, 102},  // a rank that called setsid
        {103, 102, 103, 102},  // its child, in yet another group
        {104, 1, 100, 100},  // reparented to init but still in the group
        {200, 1, 200, 200},  // someone else
        {201, 200, 200, 200},
    };
    EXPECT_EQ(task_processes(table, 100), (std::set<pid_t>{100, 101, 102, 103, 104}));
    EXPECT_TRUE(task_processes(table, 1).empty());  // never everything under init
}

// This test verifies the /proc reading end to end: a child that calls setsid (new session and
// process group) is still found as the task's through the process tree.
TEST(ProcTreeTest, FindsASetsidChildThroughProc) {
    const pid_t leader = ::fork();
    ASSERT_GE(leader, 0);
    if (leader == 0) {
        ::setsid();
        const pid_t rank = ::fork();
        if (rank == 0) {
            ::setsid();
            ::pause();
            ::_exit(0);
        }
        ::pause();
        ::_exit(0);
    }
    std::set<pid_t> found;
    for (int i = 0; i < 200 && found.size() < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        found = task_processes(read_process_table(), leader);
    }
    EXPECT_EQ(found.size(), 2u);
    EXPECT_TRUE(found.contains(leader));
    for (pid_t p : found) {
        ::kill(p, SIGKILL);
    }
    ::waitpid(leader, nullptr, 0);
}

// This test verifies the attempt mark: a process whose environment carries this task and
// attempt belongs to it; another attempt, another task, or an unmarked process does not (a
// remembered pid or group may have been reused by a stranger).
TEST(ProcTreeTest, OnlyMarkedProcessesBelongToAnAttempt) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
        char* const envp[] = {const_cast<char*>("CARMA_TASK_ID=7"),
                              const_cast<char*>("CARMA_ATTEMPT=2"), nullptr};
        ::execve("/bin/sleep", argv, envp);
        ::_exit(127);
    }
    bool marked = false;
    for (int i = 0; i < 200 && !marked; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        marked = carries_attempt(child, 7, 2);
    }
    EXPECT_TRUE(marked);
    EXPECT_FALSE(carries_attempt(child, 7, 3));
    EXPECT_FALSE(carries_attempt(child, 8, 2));
    EXPECT_FALSE(carries_attempt(::getpid(), 7, 2));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    EXPECT_FALSE(carries_attempt(child, 7, 2));  // gone
}

}  // namespace
}  // namespace carma::exec

#include "exec/proc_tree.h"

#include <dirent.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace carma::exec {

namespace {

// /proc/<pid>/stat is "pid (comm) state ppid pgrp session ..."; comm may hold spaces and
// parentheses, so the fields are read after the last ')'.
bool parse_stat(const std::string& text, ProcEntry& out) {
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
        return false;
    }
    std::istringstream head(text.substr(0, text.find(' ')));
    std::istringstream rest(text.substr(close + 1));
    char state = 0;
    long pid = 0, ppid = 0, pgrp = 0, session = 0;
    if (!(head >> pid) || !(rest >> state >> ppid >> pgrp >> session)) {
        return false;
    }
    out = ProcEntry{static_cast<pid_t>(pid), static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp),
                    static_cast<pid_t>(session), state == 'Z'};
    return true;
}

}  // namespace

std::vector<ProcEntry> read_process_table() {
    std::vector<ProcEntry> out;
    DIR* dir = ::opendir("/proc");
    if (dir == nullptr) {
        return out;
    }
    while (const dirent* e = ::readdir(dir)) {
        if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) {
            continue;
        }
        std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
        std::string text;
        if (!std::getline(in, text)) {
            continue;  // exited meanwhile
        }
        ProcEntry entry;
        if (parse_stat(text, entry)) {
            out.push_back(entry);
        }
    }
    ::closedir(dir);
    return out;
}

namespace {

// Adds to `out` every descendant of the processes already in it.
void add_descendants(std::span<const ProcEntry> table, std::set<pid_t>& out) {
    std::multimap<pid_t, pid_t> children;
    for (const ProcEntry& p : table) {
        children.emplace(p.ppid, p.pid);
    }
    std::vector<pid_t> frontier(out.begin(), out.end());
    while (!frontier.empty()) {
        const pid_t parent = frontier.back();
        frontier.pop_back();
        auto [lo, hi] = children.equal_range(parent);
        for (auto it = lo; it != hi; ++it) {
            if (out.insert(it->second).second) {
                frontier.push_back(it->second);
            }
        }
    }
}

}  // namespace

std::set<pid_t> task_processes(std::span<const ProcEntry> table, pid_t leader) {
    std::set<pid_t> out;
    if (leader <= 1) {
        return out;
    }
    for (const ProcEntry& p : table) {
        if (p.pid == leader || p.pgrp == leader || p.session == leader) {
            out.insert(p.pid);
        }
    }
    // Descendants of every member found so far: a setsid'd rank's own children included.
    add_descendants(table, out);
    return out;
}

bool carries_attempt(pid_t pid, std::int64_t task, int attempt) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    if (!in) {
        return false;
    }
    const std::string want_task = "CARMA_TASK_ID=" + std::to_string(task);
    const std::string want_attempt = "CARMA_ATTEMPT=" + std::to_string(attempt);
    bool task_ok = false;
    bool attempt_ok = false;
    std::string entry;
    while (std::getline(in, entry, '\0')) {
        task_ok = task_ok || entry == want_task;
        attempt_ok = attempt_ok || entry == want_attempt;
    }
    return task_ok && attempt_ok;
}

std::set<pid_t> descendants(std::span<const ProcEntry> table, pid_t root) {
    std::set<pid_t> out = {root};
    if (root <= 1) {
        return {};
    }
    add_descendants(table, out);
    out.erase(root);
    return out;
}

}  // namespace carma::exec

#include "daemon/foreign.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/metric_window.h"  // kFreeMemoryReserveMiB

namespace carma::daemon {

std::vector<ForeignProcess> foreign_processes(const device::GpuSample& sample,
                                              const std::set<pid_t>& ours) {
    std::vector<ForeignProcess> out;
    for (const device::GpuProcess& p : sample.processes) {
        if (p.mps_server || ours.contains(static_cast<pid_t>(p.pid))) {
            continue;
        }
        out.push_back(ForeignProcess{p.pid, {}, p.used_mib, p.activity});
    }
    std::sort(out.begin(), out.end(),
              [](const ForeignProcess& a, const ForeignProcess& b) { return a.pid < b.pid; });
    return out;
}

std::string user_of_uid(uid_t uid) {
    passwd entry{};
    passwd* found = nullptr;
    std::array<char, 4096> buffer{};
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
        found != nullptr) {
        return found->pw_name;
    }
    return fmt::format("uid {}", uid);
}

std::string process_user(int pid) {
    struct stat st {};
    if (::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0) {
        return {};
    }
    return user_of_uid(st.st_uid);
}

MiB foreign_mib(const std::vector<ForeignProcess>& processes) {
    MiB sum = 0;
    for (const ForeignProcess& p : processes) {
        sum += p.used_mib;
    }
    return sum;
}

std::optional<double> foreign_activity(const std::vector<ForeignProcess>& processes) {
    double sum = 0;
    for (const ForeignProcess& p : processes) {
        if (!p.activity) {
            return std::nullopt;
        }
        sum += *p.activity;
    }
    return std::min(1.0, sum);
}

std::optional<std::string> foreign_overlap(int gpu, MiB total_mib,
                                           const std::vector<ForeignProcess>& foreign,
                                           const std::vector<PlannedOnGpu>& planned) {
    if (planned.empty() || foreign.empty()) {
        return std::nullopt;
    }
    const MiB usable = std::max<MiB>(0, total_mib - kFreeMemoryReserveMiB);
    MiB committed = 0;
    std::vector<std::string> tasks;
    for (const PlannedOnGpu& p : planned) {
        committed += p.planned_mib.value_or(usable);
        tasks.push_back(p.planned_mib ? fmt::format("task {} ({})", p.task,
                                                    format_mib(*p.planned_mib))
                                      : fmt::format("task {} (need unknown: the whole GPU)",
                                                    p.task));
    }
    const MiB held = foreign_mib(foreign);
    // A plan that was over the GPU already is not the foreign processes' doing.
    if (held == 0 || committed > usable || held + committed <= usable) {
        return std::nullopt;
    }
    std::vector<std::string> who;
    for (const ForeignProcess& p : foreign) {
        who.push_back(fmt::format("pid {} ({}) {}", p.pid, p.user.empty() ? "user unknown" : p.user,
                                  format_mib(p.used_mib)));
    }
    return fmt::format("GPU {}: processes CARMA did not start now hold {} ({}), into memory "
                       "planned for {}: {} planned + {} foreign > {} usable; the task(s) may run "
                       "out of memory. Ask the process's owner, or leave the GPU out "
                       "(exclude_gpus)",
                       gpu, format_mib(held), fmt::join(who, ", "), fmt::join(tasks, ", "),
                       format_mib(committed), format_mib(held), format_mib(usable));
}

nlohmann::json foreign_json(const std::vector<ForeignProcess>& processes) {
    nlohmann::json list = nlohmann::json::array();
    for (const ForeignProcess& p : processes) {
        list.push_back({{"pid", p.pid},
                        {"user", p.user.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.user)},
                        {"used_mib", p.used_mib},
                        {"activity", p.activity ? nlohmann::json(*p.activity)
                                                : nlohmann::json(nullptr)},
                        {"owner", "foreign"}});
    }
    return list;
}

void label_foreign(nlohmann::json& processes, const std::vector<ForeignProcess>& foreign) {
    for (nlohmann::json& p : processes) {
        const int pid = p.value("pid", 0);
        const auto it = std::find_if(foreign.begin(), foreign.end(),
                                     [&](const ForeignProcess& f) { return f.pid == pid; });
        if (it != foreign.end()) {
            p["owner"] = "foreign";
            p["user"] = it->user.empty() ? nlohmann::json(nullptr) : nlohmann::json(it->user);
        } else {
            p["owner"] = p.value("mps_server", false) ? "mps-server" : "task";
        }
    }
}

}  // namespace carma::daemon

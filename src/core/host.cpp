#include "core/host.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

std::string cores(int n) { return fmt::format("{} core{}", n, n == 1 ? "" : "s"); }

}  // namespace

std::string host_shortfall(const TaskSpec& task, const HostView& host) {
    const std::string on = host.node.empty() ? "" : " on " + host.node;
    if (task.cpus > host.cpus_free) {
        return fmt::format("{}: {} of {} free{}", cores(task.cpus), std::max(host.cpus_free, 0),
                           host.cpus_total, on);
    }
    if (task.host_mem_mib > host.mem_free_mib) {
        return fmt::format("{} of host memory: {} of {} free{}", format_mib(task.host_mem_mib),
                           format_mib(std::max<MiB>(host.mem_free_mib, 0)),
                           format_mib(host.mem_total_mib), on);
    }
    return {};
}

void take_host(HostView& host, const TaskSpec& task, int sign) {
    host.cpus_free -= sign * task.cpus;
    host.mem_free_mib -= sign * task.host_mem_mib;
}

HostSummary summarize_hosts(std::span<const HostView> hosts) {
    HostSummary s;
    s.any = !hosts.empty();
    s.several = hosts.size() > 1;
    for (const HostView& h : hosts) {
        s.most_cpus = std::max(s.most_cpus, h.cpus_total);
        s.most_mem_mib = std::max(s.most_mem_mib, h.mem_total_mib);
    }
    return s;
}

Result<void> check_host_feasible(const TaskSpec& task, const HostSummary& hosts) {
    if (!hosts.any) {
        return {};
    }
    const char* where = hosts.several ? "the largest node has" : "this server has";
    if (task.cpus > hosts.most_cpus) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' asks for {} but {} {} for tasks; ask for at most "
                                "{} (-c {})",
                                task.name, cores(task.cpus), where, hosts.most_cpus,
                                hosts.most_cpus, hosts.most_cpus));
    }
    if (task.host_mem_mib > hosts.most_mem_mib) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' asks for {} of host memory but {} {} for tasks; ask "
                                "for at most that (--mem {}MiB)",
                                task.name, format_mib(task.host_mem_mib), where,
                                format_mib(hosts.most_mem_mib), hosts.most_mem_mib));
    }
    return {};
}

std::vector<int> pick_cores(std::span<const int> usable, const std::set<int>& held, int n) {
    std::vector<int> picked;
    for (const int c : usable) {
        if (static_cast<int>(picked.size()) >= n) {
            break;
        }
        if (!held.contains(c)) {
            picked.push_back(c);
        }
    }
    return picked;
}

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
    std::vector<int> cpus;
    auto number = [](std::string_view s, int& out) {
        s = trim(s);
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        return !s.empty() && ec == std::errc() && end == s.data() + s.size() && out >= 0 &&
               out < 65536;
    };
    const std::string_view all = trim(text);
    if (all.empty()) {
        return cpus;
    }
    for (const std::string& part : split_list(all, ',')) {
        const std::size_t dash = part.find('-');
        int lo = 0;
        int hi = 0;
        const bool ok = dash == std::string::npos
                            ? number(part, lo) && number(part, hi)
                            : number(std::string_view(part).substr(0, dash), lo) &&
                                  number(std::string_view(part).substr(dash + 1), hi);
        if (!ok || hi < lo) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("cpu list '{}': '{}' is not a core number or a range such as "
                                    "0-3",
                                    printable(all), printable(part)));
        }
        for (int c = lo; c <= hi; ++c) {
            cpus.push_back(c);
        }
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::string format_cpu_list(std::span<const int> cpus) {
    std::string out;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
            ++j;
        }
        out += out.empty() ? "" : ",";
        out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace carma

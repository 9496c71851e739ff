// Taking one node's report into the node table: its GPUs and samples, its attempts (expected,
// stray, missing, vanished), launch replies, and the remote logs it carries.

#include "cluster/hub.h"
#include "cluster/hub_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>


namespace carma::cluster {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Opens `name` in `dir` (created by the server) for appending, never through a link.
int open_log_for_append(const fs::path& dir, std::string_view name) {
    return ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
                  0600);
}

}  // namespace

void Hub::Impl::take_logs(Node& node, const AttemptReport& a) {
    RemoteLogs& held = node.logs[a.name];
    for (const LogChunk& c : a.logs) {
        std::uint64_t& bytes = c.stderr_stream ? held.stderr_bytes : held.stdout_bytes;
        bool& done = c.stderr_stream ? held.stderr_done : held.stdout_done;
        if (c.offset != bytes || done) {
            continue;
        }
        if (!c.data.empty()) {
            const fs::path dir = log_dir(node.name, a.name);
            std::error_code ec;
            fs::create_directories(dir, ec);
            const int fd = open_log_for_append(
                dir, c.stderr_stream ? exec::kStderrFile : exec::kStdoutFile);
            if (fd < 0) {
                spdlog::warn("node {}: cannot keep the logs of attempt {} in {}: {}",
                             node.name, a.name, dir.string(), std::strerror(errno));
                continue;
            }
            const ssize_t n = ::write(fd, c.data.data(), c.data.size());
            ::close(fd);
            if (n != static_cast<ssize_t>(c.data.size())) {
                continue;  // asked again from the same offset
            }
            bytes += c.data.size();
        }
        done = c.eof;
    }
}

Result<json> Hub::Impl::take_report(AgentReport report, const std::string& identity) {
    if (!identity.empty() && identity != report.node) {
        return fail(ErrorCode::Forbidden,
                    fmt::format("the report names node {} but its credentials are node {}'s: "
                                "one node cannot report for another",
                                report.node, identity));
    }
    auto [it, added] = nodes.try_emplace(report.node);
    Node& node = it->second;
    if (added) {
        node.name = report.node;
    }
    if (!node.instance.empty() && !report.instance.empty() &&
        node.instance != report.instance && reporting(node)) {
        return fail(ErrorCode::Conflict,
                    fmt::format("node {} already has a live agent (on host {}); stop it, or "
                                "give this agent another --node name",
                                node.name, node.host.empty() ? "unknown" : node.host));
    }
    if (node.instance != report.instance && !node.instance.empty()) {
        spdlog::info("node {}: a new agent (host {}) reports in place of the one on {}",
                     node.name, report.host, node.host);
    }
    node.host = report.host;
    node.instance = report.instance;
    bool new_slots = false;
    for (const device::GpuInfo& g : report.gpus) {
        const auto local = static_cast<std::size_t>(g.index);
        while (node.slots.size() <= local) {
            device::GpuInfo slot;
            slot.index = static_cast<int>(slots.size());
            slot.node = node.name;
            slot.node_index = static_cast<int>(node.slots.size());
            node.slots.push_back(slot.index);
            slots.push_back(slot);
            new_slots = true;
        }
        device::GpuInfo& slot = slots[static_cast<std::size_t>(node.slots[local])];
        if (slot.uuid != g.uuid || slot.name != g.name || slot.total_mib != g.total_mib) {
            new_slots = new_slots || slot.uuid != g.uuid;
            slot.uuid = g.uuid;
            slot.name = g.name;
            slot.total_mib = g.total_mib;
            slot.mig_enabled = g.mig_enabled;
        }
    }
    if (new_slots) {
        save_slots();
    }
    if (node.last_seen_steady == 0 || !fresh(node)) {
        spdlog::info("node {} reports: {} GPU(s) ({}), server GPUs {}{}", node.name,
                     report.gpus.size(), report.backend, fmt::join(node.slots, ","),
                     report.slurm_job.empty() ? "" : ", Slurm job " + report.slurm_job);
    }
    if (node.lost) {
        spdlog::info("node {} reports again after it was lost", node.name);
        node.lost = false;
        node.draining = false;
    }
    if (node.last_seen_steady > 0 && node.slurm_job != report.slurm_job) {
        // A new allocation on the same node: what was said of the old one is over.
        spdlog::info("node {} now reports from Slurm job {} (was {})", node.name,
                     report.slurm_job.empty() ? "none" : report.slurm_job,
                     node.slurm_job.empty() ? "none" : node.slurm_job);
        node.draining = false;
    }
    const double now = exec::unix_now();
    if (node.first_seen_unix == 0) {
        node.first_seen_unix = now;
    }
    node.last_seen_unix = now;
    node.last_seen_steady = exec::steady_now();
    node.slurm_job = report.slurm_job;
    node.backend = report.backend;
    node.uid = report.uid;
    node.ending = report.ending;
    node.samples = std::move(report.samples);
    for (const LaunchReply& r : report.replies) {
        auto w = waiting.find(r.id);
        if (w != waiting.end()) {
            w->second = r;
            if (r.ok) {
                node.expected.insert(attempt_name_of(r.dir));
            }
        }
    }
    replied.notify_all();
    if (report.scan_error != node.scan_error) {
        if (!report.scan_error.empty()) {
            spdlog::warn("node {}: {}; its attempts are taken as they were until it reads "
                         "again",
                         node.name, report.scan_error);
        } else {
            spdlog::info("node {} lists its attempts again", node.name);
        }
        node.scan_error = report.scan_error;
    }
    const bool listed = report.scan_error.empty();
    if (listed) {
        node.attempts.clear();
    }
    for (AttemptReport& a : report.attempts) {
        const bool launching = std::any_of(
            node.pending.begin(), node.pending.end(),
            [&](const Command& c) { return c.name == a.name; });
        const bool known = node.expected.contains(a.name);
        if (a.state == AttemptReport::State::Running && !known && !launching &&
            node.stop_sent.insert(a.name).second) {
            // Started by a launch whose answer never came back (the server timed out), or
            // left from before the store lost it: CARMA does not know this task here.
            spdlog::warn("node {}: attempt {} runs there but CARMA does not know it; "
                         "stopping it",
                         node.name, a.name);
            node.pending.push_back(Command{Command::Kind::Stop, 0, a.name, {}, {}});
        }
        if (a.state != AttemptReport::State::Running && !known && !launching) {
            // A stray that ended: nothing here will store it, so the agent may let it go.
            if (node.forget_sent.insert(a.name).second) {
                node.pending.push_back(Command{Command::Kind::Forget, 0, a.name, {}, {}});
            }
            continue;
        }
        if (known) {
            take_logs(node, a);
            node.missing.erase(a.name);
            node.vanished.erase(a.name);
        }
        node.attempts[a.name] = std::move(a);
    }
    const std::set<std::string> absent(report.absent.begin(), report.absent.end());
    for (const std::string& name : node.expected) {
        if (node.attempts.contains(name) || node.vanished.contains(name)) {
            continue;
        }
        const bool launching = std::any_of(node.pending.begin(), node.pending.end(),
                                           [&](const Command& c) { return c.name == name; });
        if (launching) {
            continue;
        }
        if (absent.contains(name)) {
            spdlog::warn("node {}: the agent confirms attempt {}'s directory is gone",
                         node.name, name);
            node.vanished.insert(name);
            node.missing.erase(name);
            continue;
        }
        if (!listed) {
            continue;  // says nothing of it
        }
        if (++node.missing[name] >= kMissingReports) {
            spdlog::warn("node {}: attempt {} has been missing from {} reports in a row; "
                         "taken as gone",
                         node.name, name, kMissingReports);
            node.vanished.insert(name);
            node.missing.erase(name);
            continue;
        }
        node.pending.push_back(Command{Command::Kind::Check, 0, name, {}, {}});
    }
    // Logs still to come, and ends whose logs are now in.
    const double t = exec::steady_now();
    for (auto f = node.forget_after_logs.begin(); f != node.forget_after_logs.end();) {
        auto held = node.logs.find(f->first);
        const bool in = held == node.logs.end() || held->second.complete() ||
                        !node.attempts.contains(f->first) || t - f->second > kForgetWaitS;
        if (!in) {
            ++f;
            continue;
        }
        forget_now(node, f->first);
        f = node.forget_after_logs.erase(f);
    }
    for (const auto& [name, a] : node.attempts) {
        const RemoteLogs& held = node.logs[name];
        if (!held.complete()) {
            Command c{Command::Kind::Logs, 0, name, {}, {}};
            c.stdout_offset = held.stdout_bytes;
            c.stderr_offset = held.stderr_bytes;
            node.pending.push_back(std::move(c));
        }
    }
    std::vector<Command> out;
    out.swap(node.pending);
    json answer = to_json(out);
    answer["period_s"] = options.report_period_s;
    return answer;
}

void Hub::Impl::forget_now(Node& node, const std::string& name) {
    node.expected.erase(name);
    node.attempts.erase(name);
    node.missing.erase(name);
    node.vanished.erase(name);
    node.logs.erase(name);
    node.pending.push_back(Command{Command::Kind::Forget, 0, name, {}, {}});
}

}  // namespace carma::cluster

// The hub's side the daemon calls (cluster/hub.h): the nodes' GPUs and samples as one backend,
// launches sent to nodes and their replies awaited, the state of remote attempts, stops and
// forgets, nodes drained or declared lost. The node table is hub_impl.h's.

#include "cluster/hub.h"
#include "cluster/hub_impl.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "exec/clock.h"

namespace carma::cluster {

using nlohmann::json;

Hub::Hub(HubOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}

Hub::~Hub() {
    {
        std::lock_guard lock(impl_->mu);
        impl_->stopping = true;
    }
    impl_->monitor_wake.notify_all();
    impl_->replied.notify_all();
    if (impl_->http) {
        impl_->http->stop();
    }
    if (impl_->http_thread.joinable()) {
        impl_->http_thread.join();
    }
    if (impl_->monitor_thread.joinable()) {
        impl_->monitor_thread.join();
    }
}

Result<std::unique_ptr<Hub>> Hub::create(HubOptions options) {
    if (!options.auth) {
        if (options.token.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        "agents need a way to prove who they are: give --agent-token-file (a "
                        "file of mode 600 with a token of at least 16 characters) or "
                        "--agent-auth munge");
        }
        auto server = auth::token_server(auth::keys_from_master(options.token));
        if (!server) {
            return tl::unexpected(server.error());
        }
        options.auth = std::move(*server);
    }
    // The nonces of the reports taken before a restart are gone with that process: a report
    // signed before this start is refused instead (ReplayGuard).
    options.auth->refuse_signed_before(exec::unix_now());
    std::unique_ptr<Hub> hub(new Hub(std::move(options)));
    if (auto r = hub->impl_->load_slots(); !r) {
        return tl::unexpected(r.error());
    }
    return hub;
}


auth::Mode Hub::auth_mode() const {
    return impl_->options.auth->mode();
}

std::string Hub::address() const {
    return fmt::format("{}:{}", impl_->options.host, impl_->options.port);
}

Result<json> Hub::handle_report(const json& body, const std::string& identity) {
    auto report = report_from_json(body);
    if (!report) {
        return tl::unexpected(report.error());
    }
    std::lock_guard lock(impl_->mu);
    return impl_->take_report(std::move(*report), identity);
}

std::vector<device::GpuInfo> Hub::gpus() const {
    std::lock_guard lock(impl_->mu);
    return impl_->slots;
}

std::vector<device::GpuSample> Hub::samples() const {
    std::lock_guard lock(impl_->mu);
    const Impl& m = *impl_;
    std::vector<device::GpuSample> out;
    out.reserve(m.slots.size());
    const double now = exec::steady_now();
    for (const device::GpuInfo& slot : m.slots) {
        device::GpuSample s;
        s.index = slot.index;
        const Node& node = m.nodes.at(slot.node);
        const auto found = std::find_if(node.samples.begin(), node.samples.end(),
                                        [&](const device::GpuSample& x) {
                                            return x.index == slot.node_index;
                                        });
        if (node.lost) {
            s.error = fmt::format("node {} is lost: its agent is gone and its Slurm allocation "
                                  "ended",
                                  node.name);
        } else if (!m.reporting(node)) {
            s.error = node.last_seen_steady == 0
                          ? fmt::format("node {} has not reported since the server started",
                                        node.name)
                          : fmt::format("node {}'s agent has not reported for {:.0f} s",
                                        node.name, now - node.last_seen_steady);
        } else if (found == node.samples.end()) {
            s.error = fmt::format("node {} reports no sample of its GPU {}", node.name,
                                  slot.node_index);
        } else {
            // Its own age only: a report takes a network hop, so the daemon's few periods of
            // staleness (50 ms at --time-scale 60) would flag every remote GPU; a node that
            // stops reporting is caught by reporting() above instead.
            s = *found;
            s.index = slot.index;
        }
        out.push_back(std::move(s));
    }
    return out;
}

Result<exec::LaunchHandle> Hub::launch(const std::string& node_name, exec::LaunchRequest request) {
    Impl& m = *impl_;
    // A node that missed its last few reports is not sent work: its agent may be dead, and
    // waiting out the timeout would stall every other launch of the tick.
    auto reporting = [&](const Node& n) { return m.reporting(n); };
    std::unique_lock lock(m.mu);
    auto it = m.nodes.find(node_name);
    if (it == m.nodes.end() || !reporting(it->second) || it->second.ending || it->second.lost) {
        return fail(ErrorCode::Io, fmt::format("node {}'s agent is not reporting; the task waits "
                                               "for another placement",
                                               node_name));
    }
    auto text = exec::request_to_json(request);
    if (!text) {
        return tl::unexpected(text.error());
    }
    const std::uint64_t id = ++m.next_launch;
    const std::string name = request.attempt_dir;
    it->second.pending.push_back(
        Command{Command::Kind::Launch, id, name, std::move(*text), std::move(request)});
    m.waiting[id] = std::nullopt;
    const double deadline = exec::steady_now() + m.options.launch_timeout_s;
    bool answered = false;
    while (!m.stopping && exec::steady_now() < deadline) {
        if (m.replied.wait_for(lock, std::chrono::milliseconds(100),
                               [&] { return m.stopping || m.waiting[id].has_value(); })) {
            answered = m.waiting[id].has_value();
            break;
        }
        if (!reporting(m.nodes.at(node_name))) {
            break;  // its agent went silent while we waited
        }
    }
    std::optional<LaunchReply> reply = m.waiting[id];
    m.waiting.erase(id);
    if (!answered || !reply) {
        // Taken back if not yet delivered; if it was, the attempt is a stray the node's next
        // report shows, and it is stopped.
        Node& node = m.nodes.at(node_name);
        std::erase_if(node.pending, [&](const Command& c) { return c.id == id; });
        return fail(ErrorCode::Io,
                    fmt::format("node {} did not answer the launch (its agent went silent or "
                                "took over {:.0f} s); if it started it anyway, CARMA stops it "
                                "when the node reports it",
                                node_name, m.options.launch_timeout_s));
    }
    if (!reply->ok) {
        return fail(reply->invalid ? ErrorCode::InvalidArgument : ErrorCode::Io,
                    fmt::format("node {}: {}", node_name, reply->error));
    }
    return exec::LaunchHandle{reply->shim_pid, reply->dir, node_name};
}

void Hub::expect(const std::string& node, const std::string& name) {
    std::lock_guard lock(impl_->mu);
    auto [it, added] = impl_->nodes.try_emplace(node);
    if (added) {
        it->second.name = node;
    }
    it->second.expected.insert(name);
}

RemoteAttempt Hub::attempt(const std::string& node_name, const std::string& name) const {
    std::lock_guard lock(impl_->mu);
    RemoteAttempt out;
    auto it = impl_->nodes.find(node_name);
    if (it == impl_->nodes.end() || !impl_->fresh(it->second)) {
        return out;  // Unknown
    }
    const Node& node = it->second;
    auto a = node.attempts.find(name);
    if (a == node.attempts.end()) {
        // Missing from the reports is not gone yet: its directory may be unreadable a moment.
        if (node.vanished.contains(name) || !node.expected.contains(name)) {
            out.state = RemoteAttempt::State::Vanished;
        }
        return out;
    }
    out.members = a->second.members;
    out.stderr_tail = a->second.stderr_tail;
    out.exit = a->second.exit;
    switch (a->second.state) {
        case AttemptReport::State::Running: out.state = RemoteAttempt::State::Running; break;
        case AttemptReport::State::Ended: out.state = RemoteAttempt::State::Ended; break;
        case AttemptReport::State::Vanished: out.state = RemoteAttempt::State::Vanished; break;
    }
    return out;
}

void Hub::stop(const std::string& node, const std::string& name) {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    if (it != impl_->nodes.end()) {
        it->second.pending.push_back(Command{Command::Kind::Stop, 0, name, {}, {}});
    }
}

void Hub::forget(const std::string& node, const std::string& name) {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    if (it == impl_->nodes.end()) {
        return;
    }
    Node& n = it->second;
    auto held = n.logs.find(name);
    if (held != n.logs.end() && !held->second.complete() && n.attempts.contains(name) &&
        impl_->fresh(n)) {
        n.forget_after_logs.emplace(name, exec::steady_now());  // its last log bytes are on the way
        return;
    }
    impl_->forget_now(n, name);
}

std::string Hub::log_file(const std::string& node, const std::string& name,
                          bool stderr_stream) const {
    if (node.empty() || node.find('/') != std::string::npos || node.starts_with(".") ||
        !parse_attempt_name(name)) {
        return "";
    }
    return (impl_->log_dir(node, name) / (stderr_stream ? exec::kStderrFile : exec::kStdoutFile))
        .string();
}

Result<void> Hub::declare_lost(const std::string& node_name) {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node_name);
    if (it == impl_->nodes.end()) {
        return fail(ErrorCode::NotFound,
                    fmt::format("no node {} has reported to this server; see `carma nodes`",
                                node_name));
    }
    Node& node = it->second;
    if (impl_->reporting(node)) {
        return fail(ErrorCode::Conflict,
                    fmt::format("node {}'s agent is reporting: its tasks are not lost; drain it "
                                "(carma slurm down --node {}) or stop them instead",
                                node_name, node_name));
    }
    if (!node.lost) {
        spdlog::warn("node {} declared lost by an administrator: its attempts end as lost and "
                     "their tasks are queued again",
                     node_name);
    }
    node.lost = true;
    return {};
}

std::vector<NodeInfo> Hub::nodes() const {
    std::lock_guard lock(impl_->mu);
    std::vector<NodeInfo> out;
    for (const auto& [name, node] : impl_->nodes) {
        NodeInfo info;
        info.node = name;
        info.state = node.lost                 ? "lost"
                     : !impl_->fresh(node)     ? (node.slurm_job.empty() ? "unreachable" : "gone")
                     : node.ending             ? "ending"
                     : node.draining           ? "draining"
                                               : "up";
        info.slurm_job = node.slurm_job;
        info.host = node.host;
        info.backend = node.backend;
        info.uid = node.uid;
        info.gpus = node.slots;
        info.first_seen = node.first_seen_unix;
        info.last_seen = node.last_seen_unix;
        info.attempts = static_cast<int>(node.attempts.size());
        out.push_back(std::move(info));
    }
    return out;
}

std::vector<std::string> Hub::drain(const std::string& node, const std::string& slurm_job) {
    std::lock_guard lock(impl_->mu);
    std::vector<std::string> out;
    for (auto& [name, n] : impl_->nodes) {
        if ((!node.empty() && name == node) ||
            (!slurm_job.empty() && n.slurm_job == slurm_job)) {
            n.draining = true;
            out.push_back(name);
        }
    }
    return out;
}

std::string Hub::unschedulable_reason(const std::string& node_name) const {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node_name);
    if (it == impl_->nodes.end()) {
        return fmt::format("node {} is not known", node_name);
    }
    const Node& node = it->second;
    if (node.lost) {
        return fmt::format("node {} is lost (its allocation ended, or an administrator said so)",
                           node_name);
    }
    if (node.slurm_job.empty() && node.last_seen_steady > 0 && !impl_->fresh(node)) {
        return fmt::format("node {} is unreachable: its agent has not reported for {:.0f} s; "
                           "`carma nodes lost {}` gives its tasks up",
                           node_name, exec::steady_now() - node.last_seen_steady, node_name);
    }
    if (node.ending) {
        return fmt::format("node {}'s allocation is ending", node_name);
    }
    if (node.draining) {
        return fmt::format("node {} is draining (carma slurm down)", node_name);
    }
    return "";
}

bool Hub::lost(const std::string& node) const {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    return it != impl_->nodes.end() && it->second.lost;
}

bool Hub::ending(const std::string& node) const {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    return it != impl_->nodes.end() && it->second.ending;
}

std::string Hub::slurm_job(const std::string& node) const {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    return it == impl_->nodes.end() ? std::string() : it->second.slurm_job;
}

std::optional<uid_t> Hub::agent_uid(const std::string& node) const {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->nodes.find(node);
    return it == impl_->nodes.end() ? std::nullopt : std::optional<uid_t>(it->second.uid);
}

bool HubBackend::refresh() {
    std::vector<device::GpuInfo> now = hub_->gpus();
    const bool grew = now.size() != gpus_.size();
    gpus_ = std::move(now);
    return grew;
}

}  // namespace carma::cluster

#include "cluster/hub.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

namespace carma::cluster {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double unix_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

double steady_now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

bool same_token(const std::string& a, const std::string& b) {
    // Constant time in the length of the expected token: no early exit on the first mismatch.
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < b.size(); ++i) {
        diff |= static_cast<unsigned char>(b[i] ^ (i < a.size() ? a[i] : 0));
    }
    return diff == 0 && !b.empty();
}

// Runs argv without a shell; its stdout, or nullopt when it could not run or failed.
std::optional<std::string> run_capture(const std::vector<std::string>& argv) {
    int out[2];
    if (::pipe(out) != 0) {
        return std::nullopt;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(out[0]);
        ::close(out[1]);
        return std::nullopt;
    }
    if (pid == 0) {
        ::dup2(out[1], 1);
        ::close(out[0]);
        ::close(out[1]);
        std::vector<char*> args;
        for (const std::string& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string text;
    std::array<char, 4096> buf{};
    for (ssize_t n; (n = ::read(out[0], buf.data(), buf.size())) != 0;) {
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        text.append(buf.data(), static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return std::nullopt;
    }
    return text;
}

}  // namespace

AllocationState squeue_allocation_state(const std::string& job) {
    // squeue of a job Slurm has forgotten fails ("Invalid job id specified") or prints nothing.
    auto out = run_capture({"squeue", "-h", "-j", job, "-o", "%T"});
    if (!out) {
        auto any = run_capture({"squeue", "-h", "-o", "%i"});
        return any ? AllocationState::Gone : AllocationState::Unknown;
    }
    const std::string state = std::string(out->substr(0, out->find('\n')));
    if (state == "RUNNING" || state == "COMPLETING" || state == "PENDING" ||
        state == "CONFIGURING" || state == "SUSPENDED") {
        return AllocationState::Running;
    }
    return AllocationState::Gone;
}

struct Hub::Node {
    std::string name;
    std::string slurm_job;
    std::string backend;
    uid_t uid = 0;
    std::vector<int> slots;  // by the node's own GPU index
    std::vector<device::GpuSample> samples;  // node-local indices
    std::map<std::string, AttemptReport> attempts;
    std::vector<Command> pending;
    std::set<std::string> expected;   // attempts the daemon knows run here
    std::set<std::string> stop_sent;  // strays already told to stop
    double first_seen_unix = 0;
    double last_seen_unix = 0;
    double last_seen_steady = 0;  // 0: not since the server started
    bool draining = false;
    bool ending = false;
    bool lost = false;
};

struct Hub::Impl {
    HubOptions options;
    mutable std::mutex mu;
    std::condition_variable replied;
    std::map<std::string, Node> nodes;
    std::vector<device::GpuInfo> slots;  // by the server's index
    std::map<std::uint64_t, std::optional<LaunchReply>> waiting;  // launches awaiting replies
    std::uint64_t next_launch = 0;
    httplib::Server http;
    std::thread http_thread;
    std::thread monitor_thread;
    bool stopping = false;
    std::condition_variable monitor_wake;

    std::string nodes_file() const { return options.state_dir + "/nodes.json"; }

    Result<void> load_slots() {
        std::ifstream in(nodes_file());
        if (!in) {
            return {};  // no node seen yet
        }
        json j;
        try {
            in >> j;
            for (const json& n : j.at("nodes")) {
                Node node;
                node.name = n.at("node").get<std::string>();
                int local = 0;
                for (const json& g : n.at("gpus")) {
                    device::GpuInfo info;
                    info.index = static_cast<int>(slots.size());
                    info.node = node.name;
                    info.node_index = local++;
                    info.uuid = g.at("uuid").get<std::string>();
                    info.name = g.at("name").get<std::string>();
                    info.total_mib = g.at("total_mib").get<MiB>();
                    node.slots.push_back(info.index);
                    slots.push_back(info);
                }
                nodes[node.name] = std::move(node);
            }
        } catch (const std::exception& e) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} is damaged ({}); it numbers the nodes' GPUs for the "
                                    "store's attempts: restore it from a backup, or remove it "
                                    "only if no task is running on any node",
                                    nodes_file(), e.what()));
        }
        return {};
    }

    void save_slots() const {
        json list = json::array();
        std::vector<const Node*> ordered;
        for (const auto& [name, node] : nodes) {
            ordered.push_back(&node);
        }
        std::sort(ordered.begin(), ordered.end(), [](const Node* a, const Node* b) {
            return a->slots.empty() || (!b->slots.empty() && a->slots[0] < b->slots[0]);
        });
        for (const Node* node : ordered) {
            json gpus = json::array();
            for (int s : node->slots) {
                const device::GpuInfo& g = slots[static_cast<std::size_t>(s)];
                gpus.push_back({{"uuid", g.uuid}, {"name", g.name}, {"total_mib", g.total_mib}});
            }
            list.push_back({{"node", node->name}, {"gpus", gpus}});
        }
        const std::string tmp = nodes_file() + ".tmp";
        {
            std::ofstream out(tmp, std::ios::trunc);
            out << json{{"nodes", list}}.dump(2) << "\n";
            if (!out) {
                spdlog::error("cannot write {}: the nodes' GPU numbering is not saved", tmp);
                return;
            }
        }
        std::error_code ec;
        fs::rename(tmp, nodes_file(), ec);
        if (ec) {
            spdlog::error("cannot replace {}: {}", nodes_file(), ec.message());
        }
    }

    // Reported within a few of its periods (and 2 s of network slack): its samples are current
    // and it can be sent work.
    bool reporting(const Node& n) const {
        return n.last_seen_steady > 0 &&
               steady_now() - n.last_seen_steady <= 3 * options.report_period_s + 2;
    }

    bool fresh(const Node& n) const {
        return n.last_seen_steady > 0 && steady_now() - n.last_seen_steady <= options.node_timeout_s;
    }

    // Under mu.
    json take_report(AgentReport report) {
        auto [it, added] = nodes.try_emplace(report.node);
        Node& node = it->second;
        if (added) {
            node.name = report.node;
        }
        bool new_slots = false;
        for (const device::GpuInfo& g : report.gpus) {
            if (g.index < 0) {
                continue;
            }
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
        const double now = unix_now();
        if (node.first_seen_unix == 0) {
            node.first_seen_unix = now;
        }
        node.last_seen_unix = now;
        node.last_seen_steady = steady_now();
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
        node.attempts.clear();
        for (AttemptReport& a : report.attempts) {
            const bool launching = std::any_of(
                node.pending.begin(), node.pending.end(),
                [&](const Command& c) { return c.name == a.name; });
            if (a.state == AttemptReport::State::Running && !node.expected.contains(a.name) &&
                !launching && node.stop_sent.insert(a.name).second) {
                // Started by a launch whose answer never came back (the server timed out), or
                // left from before the store lost it: CARMA does not know this task here.
                spdlog::warn("node {}: attempt {} runs there but CARMA does not know it; "
                             "stopping it",
                             node.name, a.name);
                node.pending.push_back(Command{Command::Kind::Stop, 0, a.name, {}, {}});
            }
            node.attempts[a.name] = std::move(a);
        }
        std::vector<Command> out;
        out.swap(node.pending);
        json answer = to_json(out);
        answer["period_s"] = options.report_period_s;
        return answer;
    }

    void monitor() {
        std::unique_lock lock(mu);
        while (!stopping) {
            monitor_wake.wait_for(lock, std::chrono::seconds(2));
            if (stopping) {
                break;
            }
            std::vector<std::pair<std::string, std::string>> to_ask;
            for (const auto& [name, node] : nodes) {
                if (!node.lost && !node.slurm_job.empty() && node.last_seen_steady > 0 &&
                    (!fresh(node) || node.ending)) {
                    to_ask.emplace_back(name, node.slurm_job);
                }
            }
            if (to_ask.empty()) {
                continue;
            }
            lock.unlock();
            std::vector<AllocationState> answers;
            for (const auto& [name, job] : to_ask) {
                answers.push_back(options.allocation_state ? options.allocation_state(job)
                                                           : squeue_allocation_state(job));
            }
            lock.lock();
            for (std::size_t i = 0; i < to_ask.size(); ++i) {
                auto it = nodes.find(to_ask[i].first);
                if (it == nodes.end() || answers[i] != AllocationState::Gone ||
                    it->second.slurm_job != to_ask[i].second || fresh(it->second)) {
                    continue;
                }
                it->second.lost = true;
                spdlog::warn("node {}: its agent is gone and Slurm job {} no longer holds the "
                             "node; its GPUs are out of placement and its attempts are lost",
                             it->first, it->second.slurm_job);
            }
        }
    }
};

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
    impl_->http.stop();
    if (impl_->http_thread.joinable()) {
        impl_->http_thread.join();
    }
    if (impl_->monitor_thread.joinable()) {
        impl_->monitor_thread.join();
    }
}

Result<std::unique_ptr<Hub>> Hub::create(HubOptions options) {
    if (options.token.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "agents need a token: give --agent-token-file (a file of mode 600 with a "
                    "token of at least 16 characters, the same one the agents read)");
    }
    std::unique_ptr<Hub> hub(new Hub(std::move(options)));
    if (auto r = hub->impl_->load_slots(); !r) {
        return tl::unexpected(r.error());
    }
    return hub;
}

Result<void> Hub::listen() {
    Impl& m = *impl_;
    m.http.Post("/agent/v1/report", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string auth = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        if (!auth.starts_with(prefix) ||
            !same_token(auth.substr(prefix.size()), impl_->options.token)) {
            res.status = 401;
            res.set_content(json{{"error", "the agent's token does not match the server's "
                                           "(--token-file on the agent, --agent-token-file on "
                                           "the server)"}}.dump(),
                            "application/json");
            return;
        }
        json body;
        try {
            body = json::parse(req.body);
        } catch (const std::exception& e) {
            res.status = 400;
            res.set_content(json{{"error", std::string("the report is not JSON: ") + e.what()}}.dump(),
                            "application/json");
            return;
        }
        auto answer = handle_report(body);
        if (!answer) {
            res.status = 400;
            res.set_content(json{{"error", answer.error().message}}.dump(), "application/json");
            return;
        }
        res.set_content(answer->dump(), "application/json");
    });
    if (m.options.port == 0) {
        const int port = m.http.bind_to_any_port(m.options.host);
        if (port <= 0) {
            return fail(ErrorCode::Io, fmt::format("cannot listen for agents on {}: no free port",
                                                   m.options.host));
        }
        m.options.port = port;
    } else if (!m.http.bind_to_port(m.options.host, m.options.port)) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot listen for agents on {}:{}: the address is in use or not "
                                "this machine's; pick another with --agents HOST:PORT",
                                m.options.host, m.options.port));
    }
    m.http_thread = std::thread([this] { impl_->http.listen_after_bind(); });
    m.monitor_thread = std::thread([this] { impl_->monitor(); });
    spdlog::info("listening for node agents on {}", address());
    return {};
}

std::string Hub::address() const {
    return fmt::format("{}:{}", impl_->options.host, impl_->options.port);
}

Result<json> Hub::handle_report(const json& body) {
    auto report = report_from_json(body);
    if (!report) {
        return tl::unexpected(report.error());
    }
    std::lock_guard lock(impl_->mu);
    return impl_->take_report(std::move(*report));
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
    const double now = steady_now();
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
    const double deadline = steady_now() + m.options.launch_timeout_s;
    bool answered = false;
    while (!m.stopping && steady_now() < deadline) {
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
        out.state = RemoteAttempt::State::Vanished;
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
    if (it != impl_->nodes.end()) {
        it->second.expected.erase(name);
        it->second.attempts.erase(name);
        it->second.pending.push_back(Command{Command::Kind::Forget, 0, name, {}, {}});
    }
}

std::vector<NodeInfo> Hub::nodes() const {
    std::lock_guard lock(impl_->mu);
    std::vector<NodeInfo> out;
    for (const auto& [name, node] : impl_->nodes) {
        NodeInfo info;
        info.node = name;
        info.state = node.lost                 ? "lost"
                     : !impl_->fresh(node)     ? "gone"
                     : node.ending             ? "ending"
                     : node.draining           ? "draining"
                                               : "up";
        info.slurm_job = node.slurm_job;
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
        return fmt::format("node {} is lost (its allocation ended)", node_name);
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

bool HubBackend::refresh() {
    std::vector<device::GpuInfo> now = hub_->gpus();
    const bool grew = now.size() != gpus_.size();
    gpus_ = std::move(now);
    return grew;
}

}  // namespace carma::cluster

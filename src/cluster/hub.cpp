#include "cluster/hub.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <variant>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/rate_limit.h"
#include "core/text.h"
#include "exec/clock.h"
#include "exec/run_program.h"
#include "http/json_reply.h"
#include "http/listener.h"

namespace carma::cluster {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The head the pre-routing check admitted, for the handler that runs next on the same thread
// (the listener serves a connection's requests on one thread, one at a time).
thread_local std::optional<auth::RequestHead> t_admitted;

// Runs argv without a shell; its stdout, or nullopt when it could not run, failed or took longer
// than a Slurm controller that answers ever does.
std::optional<std::string> run_capture(const std::vector<std::string>& argv) {
    exec::ProgramOptions o;
    o.timeout_s = 30;
    auto run = exec::run_program(argv, o);
    if (!run || !run->succeeded()) {
        return std::nullopt;
    }
    return std::move(run->out);
}

// Opens `name` in `dir` (created by the server) for appending, never through a link.
int open_log_for_append(const fs::path& dir, std::string_view name) {
    return ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
                  0600);
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

// What the server holds of one remote attempt's logs (<state_dir>/remote-logs/NODE/NAME/).
struct RemoteLogs {
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    bool stdout_done = false;
    bool stderr_done = false;
    bool complete() const { return stdout_done && stderr_done; }
};

std::optional<std::set<std::string>> squeue_allocation_nodes(const std::string& job) {
    auto list = run_capture({"squeue", "-h", "-j", job, "-o", "%N"});
    if (!list) {
        return std::nullopt;
    }
    const std::string node_list = list->substr(0, list->find('\n'));
    std::set<std::string> out;
    if (node_list.empty()) {
        return out;
    }
    auto names = run_capture({"scontrol", "show", "hostnames", node_list});
    if (!names) {
        return std::nullopt;
    }
    std::size_t at = 0;
    while (at < names->size()) {
        const std::size_t end = std::min(names->find('\n', at), names->size());
        if (end > at) {
            out.insert(names->substr(at, end - at));
        }
        at = end + 1;
    }
    return out;
}

struct Hub::Node {
    std::string name;
    std::string host;      // of the agent now reporting as this node
    std::string instance;  // likewise: another live instance is a second agent of the same name
    std::string slurm_job;
    std::string backend;
    uid_t uid = 0;
    std::vector<int> slots;  // by the node's own GPU index
    std::vector<device::GpuSample> samples;  // node-local indices
    std::map<std::string, AttemptReport> attempts;
    std::vector<Command> pending;
    std::set<std::string> expected;   // attempts the daemon knows run here
    std::set<std::string> stop_sent;  // strays already told to stop
    std::set<std::string> forget_sent;  // strays that ended, told to forget
    // Expected attempts missing from its reports: consecutive reports (without a scan error)
    // each was missing from; gone once the agent confirms it or after kMissingReports.
    std::map<std::string, int> missing;
    std::set<std::string> vanished;
    std::map<std::string, RemoteLogs> logs;
    // Ends the daemon stored while logs were still coming: forgotten once they are in (or
    // after kForgetWaitS).
    std::map<std::string, double> forget_after_logs;  // name -> steady time of the request
    std::string scan_error;
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
    std::unique_ptr<http::Listener> http;  // made by listen()
    std::mutex limiter_mu;
    std::optional<RateLimiter> report_limiter;
    std::thread http_thread;
    std::thread monitor_thread;
    bool stopping = false;
    std::condition_variable monitor_wake;

    // Whether the node may send another report now (a token bucket per node: HubOptions::
    // report_burst, then report_rate_per_s); else false with the seconds until it may.
    bool allow_report(const std::string& node, double* retry_after_s) {
        std::lock_guard lock(limiter_mu);
        if (!report_limiter) {
            const double rate =
                options.report_rate_per_s > 0
                    ? options.report_rate_per_s
                    : std::max(10.0, 20.0 / std::max(options.report_period_s, 1e-3));
            report_limiter.emplace(rate, options.report_burst);
        }
        return report_limiter->allow(node, exec::steady_now(), retry_after_s);
    }

    std::string nodes_file() const { return options.state_dir + "/nodes.json"; }

    // Slurm's word on which nodes a job holds, asked at most every kAllocationCacheS per job.
    static constexpr double kAllocationCacheS = 10;
    std::mutex allocation_mu;
    std::map<std::string, std::pair<double, std::set<std::string>>> allocations;

    // MUNGE mode: munged vouched for the sender's uid; the node it names must be in the Slurm
    // job it names. Not under mu (squeue may take a while).
    Result<void> node_in_allocation(const AgentReport& report) {
        if (report.slurm_job.empty()) {
            return fail(ErrorCode::Forbidden,
                        fmt::format("node {} names no Slurm job: with MUNGE the server takes "
                                    "reports only from nodes of a Slurm allocation (start the "
                                    "agent inside one, e.g. `carma slurm up`)",
                                    report.node));
        }
        const double t = exec::steady_now();
        {
            std::lock_guard lock(allocation_mu);
            auto it = allocations.find(report.slurm_job);
            if (it != allocations.end() && t - it->second.first < kAllocationCacheS &&
                it->second.second.contains(report.node)) {
                return {};
            }
        }
        auto held = options.allocation_nodes ? options.allocation_nodes(report.slurm_job)
                                              : squeue_allocation_nodes(report.slurm_job);
        if (!held) {
            return fail(ErrorCode::Io,
                        fmt::format("cannot ask Slurm which nodes job {} holds (squeue, "
                                    "scontrol); node {}'s report waits",
                                    report.slurm_job, report.node));
        }
        const bool in = held->contains(report.node);
        {
            std::lock_guard lock(allocation_mu);
            if (allocations.size() > 1024) {
                allocations.clear();
            }
            allocations[report.slurm_job] = {t, std::move(*held)};
        }
        if (!in) {
            return fail(ErrorCode::Forbidden,
                        fmt::format("node {} is not in Slurm job {}'s allocation: its report is "
                                    "refused",
                                    report.node, report.slurm_job));
        }
        return {};
    }

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
        // The cluster's own record: for the server's user alone, from the first byte.
        if (const int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
            fd >= 0) {
            ::fchmod(fd, 0600);
            ::close(fd);
        }
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
               exec::steady_now() - n.last_seen_steady <= 3 * options.report_period_s + 2;
    }

    bool fresh(const Node& n) const {
        return n.last_seen_steady > 0 && exec::steady_now() - n.last_seen_steady <= options.node_timeout_s;
    }

    fs::path log_dir(const std::string& node, const std::string& name) const {
        return fs::path(options.state_dir) / "remote-logs" / node / name;
    }

    // Appends the chunks that continue what the server holds; a chunk from another offset (a
    // repeat after a lost answer) is dropped, and the next answer says where to go on from.
    void take_logs(Node& node, const AttemptReport& a) {
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

    // Under mu. `identity`: the node the report's credentials belong to ("" when the sender
    // proved only that it holds the shared secret).
    Result<json> take_report(AgentReport report, const std::string& identity) {
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

    // A request's authentication header, before its body is read: who sent it (its nonce is
    // taken, so the same header never passes twice), or why it is refused (401; 503 when
    // munged cannot be asked).
    struct Refusal {
        int status = 401;
        std::string message;
    };
    std::variant<auth::RequestHead, Refusal> admit(const std::string& header) {
        if (header.empty()) {
            return Refusal{401, fmt::format("the request carries no {} header: agents sign every "
                                            "report (carma agent --token-file F, or --munge)",
                                            auth::kAuthHeader)};
        }
        auto head = options.auth->verify_head(header, exec::unix_now());
        if (!head) {
            return Refusal{head.error().code == ErrorCode::Io ? 503 : 401, head.error().message};
        }
        // The body's own length is the mode's to check (verify_body): in MUNGE mode what travels
        // is a credential of the signed JSON. Its size is the listener's (limits.max_body_bytes).
        return std::move(*head);
    }

    struct Reply {
        int status = 200;
        std::string auth_header;  // set on a 200: the answer proves it comes from the server
        std::string body;
        std::string content_type = "application/json";
    };
    static Reply error_reply(int status, const std::string& message) {
        return Reply{status, "",
                     json{{"error", message}}.dump(-1, ' ', false,
                                                   json::error_handler_t::replace),
                     "application/json"};
    }
    static int status_of(ErrorCode code) {
        switch (code) {
            case ErrorCode::Forbidden: return 403;
            case ErrorCode::Conflict: return 409;
            case ErrorCode::Io: return 503;
            default: return 400;
        }
    }

    // One admitted report: its body checked against its head, its node against its
    // credentials, then taken; the answer signed for the request's nonce.
    Reply serve(const auth::RequestHead& head, const std::string& body) {
        auto text = options.auth->verify_body(head, body);
        if (!text) {
            return error_reply(text.error().code == ErrorCode::Io ? 503 : 401,
                               text.error().message);
        }
        auto parsed = parse_wire_json(*text);
        if (!parsed) {
            return error_reply(400, parsed.error().message);
        }
        auto report = report_from_json(*parsed);
        if (!report) {
            return error_reply(400, report.error().message);
        }
        if (head.mode == auth::Mode::Munge) {
            if (auto in = node_in_allocation(*report); !in) {
                return error_reply(status_of(in.error().code), in.error().message);
            }
        }
        Result<json> answer = [&] {
            std::lock_guard lock(mu);
            return take_report(std::move(*report), head.node);
        }();
        if (!answer) {
            return error_reply(status_of(answer.error().code), answer.error().message);
        }
        auto sealed = options.auth->sign_answer(head, answer->dump(), exec::unix_now());
        if (!sealed) {
            return error_reply(status_of(sealed.error().code),
                               "cannot sign the answer: " + sealed.error().message);
        }
        return Reply{200, sealed->header, sealed->body,
                     head.mode == auth::Mode::Munge ? "text/plain" : "application/json"};
    }

    void forget_now(Node& node, const std::string& name) {
        node.expected.erase(name);
        node.attempts.erase(name);
        node.missing.erase(name);
        node.vanished.erase(name);
        node.logs.erase(name);
        node.pending.push_back(Command{Command::Kind::Forget, 0, name, {}, {}});
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
    std::unique_ptr<Hub> hub(new Hub(std::move(options)));
    if (auto r = hub->impl_->load_slots(); !r) {
        return tl::unexpected(r.error());
    }
    return hub;
}

namespace {

void send_error(http::Response& res, int status, const std::string& message) {
    http::send_json(res, status, json{{"error", message}});
}

// What a refusal the listener made says, as JSON, whatever bytes the request held.
void agent_port_errors(http::Listener& server) {
    server.set_error_handler([](const http::Request& req, http::Response& res) {
        if (!res.body.empty()) {
            return;
        }
        switch (res.status) {
            case 404:
                send_error(res, 404, fmt::format("no such endpoint on the agents' port: {} {} "
                                                 "(agents POST /agent/v1/report)",
                                                 req.method, req.path));
                break;
            case 400:
                send_error(res, 400, fmt::format("malformed request {} {}: {}check the request "
                                                 "line and the headers",
                                                 req.method, req.path,
                                                 req.parse_error.empty()
                                                     ? ""
                                                     : req.parse_error + "; "));
                break;
            default:
                send_error(res, res.status,
                           fmt::format("request failed with HTTP {}", res.status));
                break;
        }
    });
    server.set_exception_handler([](const http::Request&, http::Response& res,
                                    std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, 500, "internal error: " + what);
    });
}

}  // namespace

Result<void> Hub::listen() {
    Impl& m = *impl_;
    m.http = std::make_unique<http::Listener>(http::Listener::Transport::Tcp, m.options.limits);
    http::Listener& server = *m.http;
    // Before the body is read: a sender without the node's credentials never gets to send one,
    // and a node over its report rate is answered without its report being read.
    server.set_admission([this](const http::Request& req, http::Response& res,
                                http::Connection& conn) {
        t_admitted.reset();
        auto refuse = [&](int status, const std::string& message) {
            send_error(res, status, message);
            conn.close_after_answer();
            return http::HandlerResponse::Handled;
        };
        auto admitted = impl_->admit(req.get_header_value(std::string(auth::kAuthHeader).c_str()));
        if (auto* refused = std::get_if<Impl::Refusal>(&admitted)) {
            return refuse(refused->status, refused->message);
        }
        auth::RequestHead head = std::get<auth::RequestHead>(std::move(admitted));
        double wait_s = 0;
        if (!impl_->allow_report(head.node, &wait_s)) {
            res.set_header("Retry-After",
                           std::to_string(std::max<long>(1, std::lround(std::ceil(wait_s)))));
            return refuse(429, fmt::format("node {} reports faster than the server takes "
                                           "reports (a burst of {:g}, then {:g} a second); "
                                           "this report is dropped, the next in its period is "
                                           "taken",
                                           head.node, impl_->report_limiter->burst(),
                                           impl_->report_limiter->rate_per_s()));
        }
        if (!conn.promote()) {
            return refuse(429, fmt::format("too many agents' connections at once (at most {}); "
                                           "retry in a moment",
                                           impl_->options.limits.max_authenticated_connections));
        }
        t_admitted = std::move(head);
        return http::HandlerResponse::Unhandled;
    });
    server.Post("/agent/v1/report", [this](const http::Request& req, http::Response& res) {
        std::optional<auth::RequestHead> head = std::move(t_admitted);
        t_admitted.reset();
        const Impl::Reply r = head ? impl_->serve(*head, req.body)
                                   : Impl::error_reply(401, "the request was not admitted");
        res.status = r.status;
        if (!r.auth_header.empty()) {
            res.set_header(std::string(auth::kAuthHeader).c_str(), r.auth_header);
        }
        res.set_content(r.body, r.content_type);
    });
    agent_port_errors(server);
    auto bound = server.bind_tcp(m.options.host, m.options.port);
    if (!bound && m.options.port == 0) {
        return fail(ErrorCode::Io, fmt::format("cannot listen for agents on {}: no free port",
                                               m.options.host));
    }
    if (!bound) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot listen for agents on {}:{}: the address is in use or not "
                                "this machine's; pick another with --agents HOST:PORT",
                                m.options.host, m.options.port));
    }
    m.options.port = *bound;
    m.http_thread = std::thread([this] { impl_->http->listen_after_bind(); });
    m.monitor_thread = std::thread([this] { impl_->monitor(); });
    spdlog::info("listening for node agents on {}", address());
    return {};
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

bool HubBackend::refresh() {
    std::vector<device::GpuInfo> now = hub_->gpus();
    const bool grew = now.size() != gpus_.size();
    gpus_ = std::move(now);
    return grew;
}

}  // namespace carma::cluster

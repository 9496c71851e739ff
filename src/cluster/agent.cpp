#include "cluster/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cluster/launch_identity.h"
#include "cluster/report_client.h"
#include "cluster/wire.h"
#include "exec/clock.h"
#include "exec/launch.h"
#include "exec/proc_tree.h"

namespace carma::cluster {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCollectedFile = "collected";  // the server has stored this attempt's end
constexpr std::size_t kTailBytes = 16 * 1024;
// Log bytes one report carries: per stream of an attempt, and in all (base64 adds a third).
// MUNGE carries at most about 1 MB per credential (cluster/munge_auth.h), so logs take a
// quarter of that per report; at one report a second that is still 256 KiB/s per node.
constexpr std::size_t kLogChunkBytes = 64 * 1024;
constexpr std::size_t kLogReportBytes = 256 * 1024;

std::string host_name() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

std::string random_instance() {
    std::random_device rd;
    return fmt::format("{:08x}{:08x}", rd(), rd());
}

class Agent {
public:
    Agent(const AgentOptions& o, std::unique_ptr<device::GpuBackend> backend)
        : o_(o),
          backend_(std::move(backend)),
          attempts_dir_(o.backend.state_dir + "/attempts"),
          client_(o.server_host, o.server_port) {}

    int run(const std::atomic<bool>& stop) {
        spdlog::info("agent of node {} ({}{}) reports to {}:{} every {:.2f} s", o_.node,
                     backend_->name(),
                     o_.slurm_job.empty() ? "" : ", Slurm job " + o_.slurm_job, o_.server_host,
                     o_.server_port, o_.period_s);
        double backoff = period_s_;
        while (!stop) {
            const bool ok = exchange(false);
            backoff = ok ? period_s_ : std::min(std::max(backoff, 0.5) * 2, 30.0);
            sleep_for(ok ? period_s_ : backoff, stop);
        }
        if (o_.stop_tasks_on_exit) {
            finish_tasks();
        }
        spdlog::info("agent of node {} stops", o_.node);
        return 0;
    }

private:
    static void sleep_for(double seconds, const std::atomic<bool>& stop) {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(seconds));
        while (!stop && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }

    // The allocation ends: stop every attempt, and tell the server until their ends are in
    // (or the grace period is over), so it re-queues them at once instead of after a timeout.
    void finish_tasks() {
        ending_ = true;
        for (const AttemptReport& a : scan()) {
            if (a.state == AttemptReport::State::Running) {
                (void)exec::request_stop(
                    exec::LaunchHandle{a.shim_pid, a.dir, ""});
            }
        }
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration<double>(o_.kill_grace_s + 5);
        while (std::chrono::steady_clock::now() < deadline) {
            bool running = false;
            for (const AttemptReport& a : scan()) {
                running = running || a.state == AttemptReport::State::Running;
            }
            exchange(true);
            if (!running) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        exchange(true);
    }

    // One report and its answer. False when the server could not be reached or refused.
    bool exchange(bool quiet) {
        AgentReport report;
        report.node = o_.node;
        report.host = host_;
        report.instance = instance_;
        report.slurm_job = o_.slurm_job;
        report.uid = ::geteuid();
        report.backend = backend_->name();
        report.gpus = backend_->gpus();
        report.ending = ending_;
        if (auto s = backend_->sample()) {
            report.samples = std::move(*s);
        } else {
            for (const device::GpuInfo& g : backend_->gpus()) {
                device::GpuSample bad;
                bad.index = g.index;
                bad.error = s.error().message;
                report.samples.push_back(std::move(bad));
            }
        }
        report.attempts = scan();
        report.scan_error = scan_error_;
        add_logs(report.attempts);
        report.absent = absent_;
        report.replies = replies_;
        auto sealed = o_.auth->sign_request(to_json(report).dump(), exec::unix_now());
        if (!sealed) {
            say(quiet, "cannot sign the report: " + sealed.error().message);
            return false;
        }
        auto res = client_.post(sealed->header, sealed->body,
                                o_.auth->mode() == auth::Mode::Munge ? "text/plain"
                                                                     : "application/json");
        if (!res) {
            say(quiet, res.error().message + "; retrying, the tasks keep running");
            return false;
        }
        if (res->status != 200) {
            std::string why = res->body;
            try {
                why = json::parse(res->body).value("error", res->body);
            } catch (const std::exception&) {
            }
            say(quiet, fmt::format("the server refused the report (HTTP {}): {}", res->status, why));
            return false;
        }
        // Whoever answered must prove it is the server: otherwise nothing it says is run.
        auto text = o_.auth->verify_answer(res->auth_header, sealed->nonce, res->body,
                                           exec::unix_now());
        if (!text) {
            say_every_minute(fmt::format(
                "the answer from {}:{} does not prove it comes from the CARMA server ({}); "
                "nothing it says is run",
                o_.server_host, o_.server_port, text.error().message));
            return false;
        }
        replies_.clear();  // delivered
        absent_.clear();
        json answer;
        try {
            answer = json::parse(*text);
        } catch (const std::exception& e) {
            say(quiet, fmt::format("the server's answer is not JSON: {}", e.what()));
            return false;
        }
        // The server says how often it samples; an agent started without --time-scale follows.
        if (auto p = answer.find("period_s"); p != answer.end() && p->is_number() &&
                                              p->get<double>() >= 0.001 && p->get<double>() <= 60) {
            period_s_ = p->get<double>();
        }
        auto commands = commands_from_json(answer);
        if (!commands) {
            say(quiet, commands.error().message);
            return false;
        }
        if (!last_error_.empty()) {
            spdlog::info("server reached again");
            last_error_.clear();
        }
        last_said_ = {};
        for (const Command& c : *commands) {
            run_command(c);
        }
        return true;
    }

    // Said at once and then once a minute while it lasts, however often it repeats (its details,
    // such as the answer's timestamp, may change each time).
    void say_every_minute(const std::string& message) {
        const auto now = std::chrono::steady_clock::now();
        if (last_said_ == std::chrono::steady_clock::time_point{} ||
            now - last_said_ > std::chrono::minutes(1)) {
            spdlog::warn("{}", message);
            last_said_ = now;
        }
        last_error_ = message;
    }

    void say(bool quiet, const std::string& message) {
        if (message != last_error_ && !quiet) {
            spdlog::warn("{}", message);
        }
        last_error_ = message;
    }

    void run_command(const Command& c) {
        const fs::path dir = fs::path(attempts_dir_) / c.name;
        switch (c.kind) {
            case Command::Kind::Launch: replies_.push_back(launch(c, dir)); break;
            case Command::Kind::Stop: {
                auto pid = exec::read_tail((dir / exec::kShimPidFile).string());
                if (!pid.empty()) {
                    try {
                        (void)exec::request_stop(
                            exec::LaunchHandle{static_cast<pid_t>(std::stoi(pid)), dir, ""});
                    } catch (const std::exception&) {
                    }
                }
                break;
            }
            case Command::Kind::Forget: {
                std::ofstream out(dir / kCollectedFile);
                out << "stored by the server\n";
                if (!out) {
                    spdlog::warn("cannot mark attempt {} as stored ({}): it is reported again",
                                 c.name, (dir / kCollectedFile).string());
                }
                log_offsets_.erase(c.name);
                break;
            }
            case Command::Kind::Logs:
                log_offsets_[c.name] = {c.stdout_offset, c.stderr_offset};
                break;
            case Command::Kind::Check: {
                // Gone only when the attempts directory itself was read and it is not there.
                std::error_code ec;
                const bool listed = fs::is_directory(attempts_dir_, ec) && !ec;
                const fs::file_status st = fs::symlink_status(dir, ec);
                if (listed && st.type() == fs::file_type::not_found) {
                    absent_.push_back(c.name);
                }
                break;
            }
        }
    }

    // The log bytes the server asked for, within this report's budget.
    void add_logs(std::vector<AttemptReport>& attempts) {
        std::size_t budget = kLogReportBytes;
        for (AttemptReport& a : attempts) {
            auto want = log_offsets_.find(a.name);
            if (want == log_offsets_.end()) {
                continue;
            }
            for (bool err : {false, true}) {
                const std::uint64_t offset = err ? want->second.second : want->second.first;
                const fs::path file = fs::path(a.dir) / (err ? exec::kStderrFile : exec::kStdoutFile);
                auto slice = exec::read_slice(file.string(), offset,
                                              std::min(budget, kLogChunkBytes));
                if (!slice) {
                    continue;
                }
                LogChunk chunk;
                chunk.stderr_stream = err;
                chunk.offset = offset;
                chunk.eof = a.state != AttemptReport::State::Running &&
                            offset + slice->data.size() >= slice->size;
                budget -= slice->data.size();
                chunk.data = std::move(slice->data);
                if (!chunk.data.empty() || chunk.eof) {
                    a.logs.push_back(std::move(chunk));
                }
            }
        }
    }

    LaunchReply launch(const Command& c, const fs::path& dir) {
        LaunchReply reply;
        reply.id = c.id;
        reply.dir = dir.string();
        // A repeated command (its answer was lost on the way): the attempt is already there.
        if (auto pid = exec::read_tail((dir / exec::kShimPidFile).string()); !pid.empty()) {
            reply.ok = true;
            try {
                reply.shim_pid = static_cast<pid_t>(std::stoi(pid));
            } catch (const std::exception&) {
            }
            return reply;
        }
        exec::LaunchRequest req = c.request;
        const uid_t me = ::geteuid();
        if (auto refused = refuse_launch_identity({req.uid, req.gid, req.groups}, me,
                                                  o_.allow_root_tasks, o_.privileged_groups)) {
            reply.invalid = true;
            reply.error = std::move(*refused);
            return reply;
        }
        req.switch_user = me == 0 && req.uid != 0;
        if (!req.switch_user) {
            req.groups.clear();
        }
        req.attempt_dir = dir.string();
        for (const auto& [k, v] : backend_->task_environment()) {
            std::erase_if(req.env, [&](const auto& kv) { return kv.first == k; });
            req.env.emplace_back(k, v);
        }
        req.files.clear();
        for (const device::TaskFile& f : backend_->task_files()) {
            req.files.push_back(exec::TaskFile{f.path, f.env});
        }
        std::error_code ec;
        fs::create_directories(dir.parent_path(), ec);
        auto handle = exec::launch(req, o_.shim_path);
        if (!handle) {
            reply.error = handle.error().message;
            reply.invalid = handle.error().code == ErrorCode::InvalidArgument;
            fs::remove_all(dir, ec);  // a half-made directory must not look like an attempt
            return reply;
        }
        reply.ok = true;
        reply.shim_pid = handle->shim_pid;
        return reply;
    }

    // The attempts not yet collected; scan_error_ says why the list may be incomplete (then the
    // server keeps what it knew of the missing ones instead of taking them as gone).
    std::vector<AttemptReport> scan() {
        std::vector<AttemptReport> out;
        std::error_code ec;
        scan_error_.clear();
        auto failed = [&](const std::string& what) {
            scan_error_ = fmt::format("cannot read the attempts directory {} ({}): {}",
                                      attempts_dir_, what, ec.message());
            if (scan_error_ != last_scan_error_) {
                spdlog::warn("{}; reported to the server, which keeps the attempts it knew",
                             scan_error_);
            }
            last_scan_error_ = scan_error_;
        };
        if (!fs::is_directory(attempts_dir_, ec)) {
            if (!ec) {
                ec = std::make_error_code(std::errc::not_a_directory);
            }
            failed("it is not a directory");
            return out;
        }
        // The directory may go away while it is read (an NFS home that stops answering, a
        // rename): what was read of it then says nothing of the attempts, so the scan is
        // reported as failed instead, and nothing is killed on its word.
        struct stat before {};
        if (::stat(attempts_dir_.c_str(), &before) != 0) {
            ec = std::error_code(errno, std::generic_category());
            failed("it is not a directory");
            return out;
        }
        std::vector<std::pair<std::string, std::set<pid_t>>> orphans;  // vanished: to kill
        std::vector<exec::ProcEntry> table;
        bool table_read = false;
        fs::directory_iterator it(attempts_dir_, ec);
        if (ec) {
            failed("listing it");
            return out;
        }
        for (; it != fs::directory_iterator(); it.increment(ec)) {
            if (ec) {
                failed("listing it");
                break;
            }
            const fs::directory_entry& e = *it;
            std::error_code entry_ec;
            if (!e.is_directory(entry_ec) || fs::exists(e.path() / kCollectedFile, entry_ec)) {
                continue;
            }
            AttemptReport a;
            a.name = e.path().filename().string();
            a.dir = e.path().string();
            const std::string pid = exec::read_tail((e.path() / exec::kShimPidFile).string());
            try {
                a.shim_pid = pid.empty() ? 0 : static_cast<pid_t>(std::stoi(pid));
            } catch (const std::exception&) {
            }
            const exec::LaunchHandle handle{a.shim_pid, a.dir, ""};
            if (auto exit = exec::read_exit(a.dir)) {
                a.state = AttemptReport::State::Ended;
                a.exit = *exit;
            } else if (a.shim_pid > 0 && exec::shim_alive(handle)) {
                a.state = AttemptReport::State::Running;
            } else if (auto late = exec::read_exit(a.dir)) {
                a.state = AttemptReport::State::Ended;
                a.exit = *late;
            } else {
                a.state = AttemptReport::State::Vanished;
            }
            if (!table_read) {
                table = exec::read_process_table();
                table_read = true;
            }
            if (auto pgid = exec::task_pgid(a.dir); pgid && *pgid > 1) {
                a.members = exec::task_processes(table, *pgid);
                if (a.state == AttemptReport::State::Vanished) {
                    orphans.emplace_back(a.name, a.members);
                }
            }
            if (a.state != AttemptReport::State::Running) {
                a.stderr_tail = exec::read_tail((e.path() / exec::kStderrFile).string(), kTailBytes);
            }
            out.push_back(std::move(a));
        }
        struct stat after {};
        if (scan_error_.empty() &&
            (::stat(attempts_dir_.c_str(), &after) != 0 || after.st_ino != before.st_ino ||
             after.st_dev != before.st_dev)) {
            ec = std::make_error_code(std::errc::no_such_file_or_directory);
            failed("it went away while it was read");
        }
        if (!scan_error_.empty()) {
            out.clear();
            return out;
        }
        for (const auto& [name, members] : orphans) {
            // Its supervisor died without a record: what is left of the task runs unwatched. As
            // the daemon does: only processes still marked as this attempt's.
            if (auto id = parse_attempt_name(name)) {
                for (pid_t p : members) {
                    if (exec::carries_attempt(p, id->first, id->second)) {
                        ::kill(p, SIGKILL);
                    }
                }
            }
        }
        if (scan_error_.empty() && !last_scan_error_.empty()) {
            spdlog::info("the attempts directory {} reads again", attempts_dir_);
            last_scan_error_.clear();
        }
        return out;
    }

    const AgentOptions& o_;
    std::unique_ptr<device::GpuBackend> backend_;
    std::string attempts_dir_;
    ReportClient client_;  // the answer capped as it is read
    std::vector<LaunchReply> replies_;  // kept until a report carrying them was answered
    std::vector<std::string> absent_;   // answers to Check, kept likewise
    // Per attempt, the log bytes the server holds (stdout, stderr): what to send from.
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> log_offsets_;
    std::string scan_error_;
    std::string last_scan_error_;
    std::string host_ = host_name();
    std::string instance_ = random_instance();
    std::string last_error_;
    std::chrono::steady_clock::time_point last_said_{};
    bool ending_ = false;
    double period_s_ = o_.period_s;
};

}  // namespace

Result<int> run_agent(const AgentOptions& options, const std::atomic<bool>& stop) {
    std::error_code ec;
    fs::create_directories(options.backend.state_dir + "/attempts", ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot create the agent's state directory {}: {}; give a "
                                "writable one with --state-dir",
                                options.backend.state_dir, ec.message()));
    }
    // While any attempt still runs, a damaged emulated-GPU file is an error, not reset.
    int running = 0;
    for (const fs::directory_entry& e :
         fs::directory_iterator(options.backend.state_dir + "/attempts", ec)) {
        const std::string pid = exec::read_tail((e.path() / exec::kShimPidFile).string());
        try {
            if (!pid.empty() && !fs::exists(e.path() / kCollectedFile) &&
                exec::shim_alive(exec::LaunchHandle{static_cast<pid_t>(std::stoi(pid)),
                                                    e.path().string(), ""})) {
                ++running;
            }
        } catch (const std::exception&) {
        }
    }
    auto backend = device::open_backend(options.backend, running);
    if (!backend) {
        return tl::unexpected(backend.error());
    }
    Agent agent(options, std::move(*backend));
    return agent.run(stop);
}

}  // namespace carma::cluster

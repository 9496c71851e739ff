// The JSON of an attempt's two records: request.json (what launch() asks the shim to run) and
// exit.json (how the shim saw it end). Pure: no files, no processes.

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "core/json_number.h"
#include "exec/launch.h"

namespace carma::exec {

namespace {

using nlohmann::json;

Result<json> parse_json(std::string_view text, std::string_view what) {
    return parse_json_within(text, what);
}

// A number of a request or exit record as a T (core/json_number.h): nlohmann's get<T>() of 1e300
// or -1 would be undefined or wrap.
template <typename T>
T number_at(const json& j, const char* key, T lo = std::numeric_limits<T>::lowest(),
            T hi = std::numeric_limits<T>::max()) {
    const json& v = j.at(key);
    const std::optional<T> n = json_number<T>(v);
    if (!n || *n < lo || *n > hi) {
        throw std::invalid_argument(fmt::format("{} must be a number from {} to {}", key, lo, hi));
    }
    return *n;
}

// A user or group id: (uid_t)-1 is none, what setuid() and chown() take as "unchanged".
template <typename T>
T id_of(const json& v, const char* what) {
    const std::optional<T> n = json_number<T>(v);
    if (!n || *n == static_cast<T>(-1)) {
        throw std::invalid_argument(fmt::format("{} must be an id from 0 to {}", what,
                                                static_cast<T>(-2)));
    }
    return *n;
}

json fence_to_json(const FenceSpec& f) {
    json j = {{"mode", std::string(to_string(f.mode))},
              {"root", f.root},
              {"name", f.name},
              {"cpus", f.cpus}};
    if (f.memory_bytes) {
        j["memory_bytes"] = *f.memory_bytes;
    }
    if (f.pids_max) {
        j["pids_max"] = *f.pids_max;
    }
    json deny = json::array();
    for (const DeviceNumber& d : f.deny_devices) {
        deny.push_back({{"type", std::string(1, d.type)}, {"major", d.major}, {"minor", d.minor}});
    }
    j["deny_devices"] = std::move(deny);
    return j;
}

// Throws std::invalid_argument (or json::exception) on anything a fence cannot be made of; the
// checks of exec/cgroup.h's fence_spec_problem() come last.
FenceSpec fence_from_json(const json& j) {
    FenceSpec f;
    const std::string mode = j.at("mode").get<std::string>();
    const auto m = cgroup_mode_from_string(mode);
    if (!m || *m == CgroupMode::None) {
        throw std::invalid_argument(fmt::format("fence mode \"{}\" must be v1 or v2", mode));
    }
    f.mode = *m;
    j.at("root").get_to(f.root);
    j.at("name").get_to(f.name);
    if (j.contains("cpus")) {
        for (const json& c : j.at("cpus")) {
            const std::optional<int> cpu = json_number<int>(c);
            if (!cpu || *cpu < 0) {
                throw std::invalid_argument("fence cpus must be numbers from 0");
            }
            f.cpus.push_back(*cpu);
        }
    }
    if (j.contains("memory_bytes")) {
        f.memory_bytes = number_at<std::int64_t>(j, "memory_bytes", 1);
    }
    if (j.contains("pids_max")) {
        f.pids_max = number_at<int>(j, "pids_max", 1);
    }
    if (j.contains("deny_devices")) {
        for (const json& d : j.at("deny_devices")) {
            const std::string type = d.at("type").get<std::string>();
            if (type != "c" && type != "b") {
                throw std::invalid_argument("a denied device's type must be \"c\" or \"b\"");
            }
            f.deny_devices.push_back(DeviceNumber{type[0], number_at<int>(d, "major", 0),
                                                  number_at<int>(d, "minor", 0)});
        }
    }
    if (std::string problem = fence_spec_problem(f); !problem.empty()) {
        throw std::invalid_argument(problem);
    }
    return f;
}

}  // namespace

Result<std::string> request_to_json(const LaunchRequest& r) {
    json j = {{"argv", r.argv},
              {"workdir", r.workdir},
              {"env", r.env},
              {"uid", r.uid},
              {"gid", r.gid},
              {"groups", r.groups},
              {"switch_user", r.switch_user},
              {"attempt_dir", r.attempt_dir},
              {"kill_grace_s", r.kill_grace_s}};
    json files = json::array();
    for (const TaskFile& f : r.files) {
        files.push_back({{"path", f.path}, {"env", f.env}});
    }
    j["files"] = std::move(files);
    if (!r.stdout_copy.empty() || !r.stderr_copy.empty()) {
        j["stdout_copy"] = r.stdout_copy;
        j["stderr_copy"] = r.stderr_copy;
        j["append_copies"] = r.append_copies;
    }
    if (r.fence) {
        j["fence"] = fence_to_json(*r.fence);
    }
    if (!r.script.empty()) {
        j["script"] = r.script;
        j["script_arg"] = r.script_arg;
    }
    try {
        return j.dump(2) + "\n";
    } catch (const json::exception& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the command, environment and directories must be valid UTF-8: {}",
                                e.what()));
    }
}

Result<LaunchRequest> request_from_json(std::string_view text) {
    auto j = parse_json(text, "the launch request");
    if (!j) {
        return tl::unexpected(j.error());
    }
    try {
        LaunchRequest r;
        j->at("argv").get_to(r.argv);
        j->at("workdir").get_to(r.workdir);
        j->at("env").get_to(r.env);
        r.uid = id_of<uid_t>(j->at("uid"), "uid");
        r.gid = id_of<gid_t>(j->at("gid"), "gid");
        const json& groups = j->at("groups");
        if (!groups.is_array()) {
            throw std::invalid_argument("groups must be an array of group ids");
        }
        for (const json& g : groups) {
            r.groups.push_back(id_of<gid_t>(g, "each of groups"));
        }
        j->at("switch_user").get_to(r.switch_user);
        j->at("attempt_dir").get_to(r.attempt_dir);
        r.kill_grace_s = number_at<double>(*j, "kill_grace_s", 0.0);
        // Optional: a request written before task files existed has none.
        if (j->contains("files")) {
            for (const json& f : j->at("files")) {
                r.files.push_back(TaskFile{f.at("path").get<std::string>(),
                                           f.at("env").get<std::string>()});
            }
        }
        // Optional: only a task with --output or --error has them.
        r.stdout_copy = j->value("stdout_copy", "");
        r.stderr_copy = j->value("stderr_copy", "");
        r.append_copies = j->value("append_copies", false);
        // Optional: none when fences are off, or from a daemon from before fences.
        if (j->contains("fence") && !j->at("fence").is_null()) {
            r.fence = fence_from_json(j->at("fence"));
        }
        // Optional: only a batch script submitted with its copy has it.
        r.script = j->value("script", "");
        r.script_arg = r.script.empty() ? 0 : number_at<std::size_t>(*j, "script_arg", 1);
        return r;
    } catch (const std::exception& e) {  // json::exception and the range checks above
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the launch request is malformed: {}", e.what()));
    }
}

std::string exit_to_json(const ExitRecord& record) {
    json j = {{"started", record.started},
              {"cancel_requested", record.cancel_requested},
              {"ended_at", record.ended_at}};
    if (record.exit_code) {
        j["exit_code"] = *record.exit_code;
    }
    if (record.signal) {
        j["signal"] = *record.signal;
    }
    if (!record.error.empty()) {
        j["error"] = record.error;
    }
    if (record.cpu_s) {
        j["cpu_s"] = *record.cpu_s;
    }
    if (record.max_rss_bytes) {
        j["max_rss_bytes"] = *record.max_rss_bytes;
    }
    if (record.memory_fence_hit) {
        j["memory_fence_hit"] = true;
    }
    if (record.memory_limit_bytes) {
        j["memory_limit_bytes"] = *record.memory_limit_bytes;
    }
    if (!record.fence_error.empty()) {
        j["fence_error"] = record.fence_error;
    }
    // An error text may quote a path in another encoding: replace rather than lose the record.
    return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<ExitRecord> exit_from_json(std::string_view text) {
    auto j = parse_json(text, "exit.json");
    if (!j) {
        return tl::unexpected(j.error());
    }
    try {
        ExitRecord r;
        j->at("started").get_to(r.started);
        r.cancel_requested = j->value("cancel_requested", false);
        if (j->contains("ended_at")) {
            r.ended_at = number_at<double>(*j, "ended_at");
        }
        if (j->contains("exit_code")) {
            r.exit_code = number_at<int>(*j, "exit_code");
        }
        if (j->contains("signal")) {
            r.signal = number_at<int>(*j, "signal");
        }
        r.error = j->value("error", "");
        // Optional: an exit.json from before fences has none of them.
        if (j->contains("cpu_s")) {
            r.cpu_s = number_at<double>(*j, "cpu_s", 0.0);
        }
        if (j->contains("max_rss_bytes")) {
            r.max_rss_bytes = number_at<std::int64_t>(*j, "max_rss_bytes", 0);
        }
        r.memory_fence_hit = j->value("memory_fence_hit", false);
        if (j->contains("memory_limit_bytes")) {
            r.memory_limit_bytes = number_at<std::int64_t>(*j, "memory_limit_bytes", 0);
        }
        r.fence_error = j->value("fence_error", "");
        return r;
    } catch (const std::exception& e) {  // json::exception and the range checks above
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("exit.json is malformed: {}", e.what()));
    }
}

}  // namespace carma::exec

#include "daemon/task_json.h"

#include <algorithm>
#include <regex>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "core/controls.h"
#include "core/fingerprint.h"
#include "core/gpu_share.h"
#include "core/host.h"
#include "core/json_limits.h"
#include "daemon/acct_json.h"
#include "core/knowledge.h"
#include "core/mail.h"
#include "core/output_pattern.h"
#include "core/python_command.h"
#include "core/text.h"
#include "store/dependency_json.h"
#include "store/peak_json.h"

namespace carma::daemon {

namespace {

api::ApiResult<std::optional<MiB>> read_mib(const nlohmann::json& obj, const char* key) {
    if (!obj.contains(key) || obj.at(key).is_null()) {
        return std::optional<MiB>();
    }
    const nlohmann::json& v = obj.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
        return api::api_fail(400, fmt::format("'{}' must be a whole number of MiB >= 0", key));
    }
    // The scheduler adds a margin to a need and sums needs; an absurd value such as
    // 9223372036854775807 would overflow there instead of being refused here.
    if (v.get<std::int64_t>() > kMaxMemoryMib) {
        return api::api_fail(400, fmt::format("'{}' is {} MiB; memory per GPU must be at most "
                                              "16 TiB ({} MiB)",
                                              key, v.get<std::int64_t>(), kMaxMemoryMib));
    }
    return std::optional<MiB>(v.get<std::int64_t>());
}

constexpr std::size_t kMaxNameBytes = 200;

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// A string field that reaches chdir(), exec() or SQLite as a C string: a NUL would silently cut
// it short there (a workdir "/tmp\0/x" would run the task in /tmp).
api::ApiResult<std::string> c_string(const nlohmann::json& body, const char* key,
                                     const char* what) {
    const nlohmann::json& v = body.at(key);
    if (!v.is_string() || has_nul(v.get<std::string>())) {
        return api::api_fail(400, fmt::format("'{}' must be {} without NUL characters", key, what));
    }
    return v.get<std::string>();
}

// `script`: {"text": the batch script as submitted, "arg": the index in `command` of the path
// it replaces}, sbatch's copy (core/task.h).
api::ApiResult<void> script_from_submission(const nlohmann::json& body, TaskSpec& spec) {
    if (!body.contains("script") || body["script"].is_null()) {
        return {};
    }
    const nlohmann::json& v = body["script"];
    constexpr const char* kShape =
        "'script' must be {\"text\": the script, \"arg\": the index in 'command' of its path}";
    if (!v.is_object() || !v.contains("text") || !v.contains("arg") || v.size() != 2) {
        return api::api_fail(400, kShape);
    }
    const nlohmann::json& text = v["text"];
    if (!text.is_string() || text.get<std::string>().empty() || has_nul(text.get<std::string>())) {
        return api::api_fail(400, "'script.text' must be the script's text, not empty and "
                                  "without NUL characters");
    }
    const nlohmann::json& arg = v["arg"];
    // argv[0] is the interpreter that reads the script: the script is never the program.
    if (!arg.is_number_integer() || arg.get<std::int64_t>() < 1 ||
        arg.get<std::int64_t>() >= static_cast<std::int64_t>(spec.command.size())) {
        return api::api_fail(400, fmt::format("'script.arg' must be the index of the script's "
                                              "path in 'command', from 1 to {}",
                                              spec.command.size() - 1));
    }
    spec.script = text.get<std::string>();
    spec.script_arg = static_cast<std::size_t>(arg.get<std::int64_t>());
    return {};
}

// `after` (afterok: [12, "12_3", "12_*"]) and `dependencies` ([{"type", "task"}]), in that
// order; the daemon checks that the tasks exist.
api::ApiResult<std::vector<Dependency>> dependencies_from_submission(const nlohmann::json& body) {
    constexpr std::size_t kMaxDependencies = 1000;
    std::vector<Dependency> out;
    if (body.contains("after") && !body["after"].is_null()) {
        const nlohmann::json& v = body["after"];
        if (!v.is_array() || v.size() > kMaxDependencies) {
            return api::api_fail(400, "'after' must be a list of at most 1000 task ids");
        }
        for (const nlohmann::json& id : v) {
            std::optional<TaskRef> ref;
            if (id.is_number_integer() && id.get<std::int64_t>() >= 1) {
                ref = TaskRef::of(id.get<std::int64_t>());
            } else if (id.is_string()) {
                auto parsed = parse_task_ref(id.get<std::string>());
                if (parsed) {
                    ref = *parsed;
                }
            }
            if (!ref) {
                return api::api_fail(400, fmt::format("every element of 'after' must be a task: "
                                                      "an id (12), an array member (\"12_3\") "
                                                      "or a whole array (\"12_*\"); got {}",
                                                      json_excerpt(id)));
            }
            out.push_back({DependencyType::AfterOk, *ref});
        }
    }
    if (body.contains("dependencies") && !body["dependencies"].is_null()) {
        const nlohmann::json& v = body["dependencies"];
        if (!v.is_array() || v.size() + out.size() > kMaxDependencies) {
            return api::api_fail(400, "'dependencies' must be a list of at most 1000 "
                                      "{\"type\", \"task\"} objects, with 'after' together");
        }
        for (const nlohmann::json& d : v) {
            const std::optional<Dependency> dep = store::dependency_from_json(d);
            if (!dep) {
                return api::api_fail(400, fmt::format("every element of 'dependencies' must be "
                                                      "{{\"type\": \"afterok\"|\"afterany\"|"
                                                      "\"afternotok\", \"task\": \"12\"|"
                                                      "\"12_3\"|\"12_*\"}} or "
                                                      "{{\"type\": \"singleton\"}}; got {}",
                                                      json_excerpt(d)));
            }
            out.push_back(*dep);
        }
    }
    return out;
}

// What a task view says of its copied script: where it stands in the command and its size; the
// text itself only in one task's view, to its owner (daemon_tasks.cpp).
nlohmann::json script_json(const TaskSpec& spec) {
    if (spec.script.empty()) {
        return nullptr;
    }
    return {{"arg", spec.script_arg}, {"bytes", spec.script.size()}};
}

}  // namespace

nlohmann::json learned_to_json(const Learned& l) {
    return {{"need_mib", json_or_null(l.need_mib)},
            {"margin_mib", l.margin_mib},
            {"lower_bound_mib", l.lower_bound_mib},
            {"runs", l.runs},
            {"duration_s", json_or_null(l.duration_s)},
            {"activity", json_or_null(l.activity)},
            {"basis", l.basis}};
}

nlohmann::json task_to_json(const store::TaskRow& t) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [k, v] : t.env) {
        env[k] = v;
    }
    return {{"id", t.id},
            {"name", t.spec.name},
            {"user", t.user},
            {"uid", t.uid},
            {"gid", t.gid},
            {"state", std::string(store::to_string(t.state))},
            {"command", t.spec.command},
            {"workdir", t.workdir},
            {"gpus", t.spec.gpus},
            {"cpus", t.spec.cpus},
            {"host_mem_mib", t.spec.host_mem_mib},
            {"memory",
             {{"declared_mib", json_or_null(t.spec.memory.declared_mib)},
              {"profiled_mib", json_or_null(t.spec.memory.profiled_mib)},
              {"horus_mib", json_or_null(t.spec.memory.horus_mib)},
              {"faketensor_mib", json_or_null(t.spec.memory.faketensor_mib)},
              {"gpumemnet_mib", json_or_null(t.spec.memory.gpumemnet_mib)}}},
            {"workload", t.spec.workload},
            {"conda", t.spec.conda.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.spec.conda)},
            {"venv", t.spec.venv.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.spec.venv)},
            {"learned", learned_to_json(t.spec.learned)},
            {"time_limit_s", json_or_null(t.spec.time_limit_s)},
            {"dependencies", store::dependencies_to_json(t.spec.dependencies)},
            {"array", array_json(t.spec.array)},
            {"output", t.spec.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.spec.output)},
            {"error", t.spec.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.spec.error)},
            {"script", script_json(t.spec)},
            {"mail_type", t.spec.mail_types == 0 ? nlohmann::json(nullptr)
                                                  : nlohmann::json(format_mail_types(t.spec.mail_types))},
            {"mail_user", t.spec.mail_types == 0 ? nlohmann::json(nullptr)
                                                  : nlohmann::json(t.spec.mail_user)},
            {"env", env},
            {"explicit_env", t.spec.explicit_env ? nlohmann::json(*t.spec.explicit_env)
                                                 : nlohmann::json(nullptr)},
            {"exclusive", t.spec.exclusive},
            {"max_slowdown", json_or_null(t.spec.max_slowdown)},
            {"gpu_share", t.spec.gpu_milli > 0 ? nlohmann::json(t.spec.gpu_milli / 1000.0)
                                               : nlohmann::json(nullptr)},
            {"nice", t.spec.nice},
            {"requeue", t.spec.requeue},
            {"attempts", t.attempts},
            {"max_attempts", t.max_attempts},
            {"submitted_at", t.submitted_at},
            {"finished_at", t.finished_at ? nlohmann::json(*t.finished_at) : nlohmann::json(nullptr)},
            {"message", t.message}};
}

nlohmann::json attempt_to_json(const store::AttemptRow& a) {
    auto opt_int = [](const std::optional<int>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    // Once it ran and ended: whether CARMA ever saw it holding memory on its GPUs.
    // (A CPU-only attempt holds no GPU: there is nothing to observe.)
    const bool ran = a.ended_at && !a.outcome.empty() && a.outcome != "not-started" &&
                     !a.gpus.empty();
    const Observation seen = ran ? observation_of(a.peak_mib) : Observation::Seen;
    const bool unobserved = seen != Observation::Seen;
    return {{"number", a.number},
            {"gpus", a.gpus},
            {"started_at", a.started_at},
            {"ended_at", a.ended_at ? nlohmann::json(*a.ended_at) : nlohmann::json(nullptr)},
            {"outcome", a.outcome},
            {"exit_code", opt_int(a.exit_code)},
            {"signal", opt_int(a.signal)},
            {"recovered", a.recovered},
            {"peak_mib", store::peak_to_json(a.peak_mib)},
            {"unobserved", unobserved ? nlohmann::json(std::string(to_string(seen)))
                                      : nlohmann::json(nullptr)},
            {"unobserved_why", unobserved ? nlohmann::json(std::string(unobserved_why(seen)))
                                          : nlohmann::json(nullptr)},
            {"energy_j", a.energy_j ? nlohmann::json(*a.energy_j) : nlohmann::json(nullptr)},
            {"node", a.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.node)},
            {"slurm_job",
             a.slurm_job.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.slurm_job)},
            {"charged_gpu_s", json_or_null(a.charged_gpu_s)},
            {"slowdown", json_or_null(a.slowdown)},
            {"cores", a.cores},
            {"total_cpu_s", json_or_null(a.total_cpu_s)},
            {"max_rss_mib", json_or_null(a.max_rss_mib)}};
}

namespace {

// "explicit_env": which of "env"'s variables the submitter set on purpose (carma submit sends
// it; the rest came from the submitter's shell). Absent: all of them.
api::ApiResult<std::optional<std::vector<std::string>>> explicit_env_from_submission(
    const nlohmann::json& body, const std::vector<std::pair<std::string, std::string>>& env) {
    auto it = body.find("explicit_env");
    if (it == body.end() || it->is_null()) {
        return std::optional<std::vector<std::string>>{};
    }
    if (!it->is_array()) {
        return api::api_fail(400, "'explicit_env' must be a list of names of 'env''s variables");
    }
    std::vector<std::string> names;
    for (const nlohmann::json& n : *it) {
        const std::string name = n.is_string() ? n.get<std::string>() : std::string();
        const bool in_env = std::any_of(env.begin(), env.end(),
                                        [&](const auto& kv) { return kv.first == name; });
        if (!in_env) {
            return api::api_fail(400, fmt::format("'explicit_env' names {}, which 'env' does not "
                                                  "set; list only variables of 'env'",
                                                  json_excerpt(n)));
        }
        if (std::find(names.begin(), names.end(), name) == names.end()) {
            names.push_back(name);
        }
    }
    return std::optional<std::vector<std::string>>{std::move(names)};
}

}  // namespace

api::ApiResult<store::TaskRow> task_from_submission(const nlohmann::json& body) {
    if (!body.is_object()) {
        return api::api_fail(400, "the request body must be a JSON object describing the task");
    }
    static const std::set<std::string> known = {
        "name",         "command",      "gpus",  "memory_mib",   "memory", "workdir",
        "env",          "max_attempts", "workload", "conda",     "venv",   "time_limit_s",
        "after",        "dependencies", "hold",  "array",        "output", "error",
        "mail_type",    "mail_user",    "warnings", "explicit_env", "exclusive",
        "max_slowdown", "nice",         "requeue",  "cpus",      "host_mem_mib",
        "gpu_share",    "script"};
    for (const auto& [key, value] : body.items()) {
        if (!known.contains(key)) {
            return api::api_fail(400, fmt::format("unknown field '{}'; known fields: {}", key,
                                                  fmt::join(known, ", ")));
        }
    }
    store::TaskRow t;
    if (!body.contains("command") || !body["command"].is_array() || body["command"].empty()) {
        return api::api_fail(400, "'command' must be a non-empty list of strings (argv)");
    }
    for (const nlohmann::json& arg : body["command"]) {
        if (!arg.is_string()) {
            return api::api_fail(400, "every element of 'command' must be a string");
        }
        const std::string s = arg.get<std::string>();
        if (has_nul(s)) {
            return api::api_fail(400, "'command' must not contain NUL characters");
        }
        t.spec.command.push_back(s);
    }
    if (t.spec.command.front().empty()) {
        return api::api_fail(400, "the command's first element (the program) is empty");
    }
    if (body.contains("gpus")) {
        const nlohmann::json& g = body["gpus"];
        if (!g.is_number_integer()) {
            return api::api_fail(400, "'gpus' must be a whole number >= 0 (0: a CPU-only task)");
        }
        const auto n = g.get<std::int64_t>();
        if (n < 0) {
            return api::api_fail(400, fmt::format("'gpus' is {}; ask for 0 (a CPU-only task) or "
                                                  "more",
                                                  n));
        }
        if (n > 1024) {
            return api::api_fail(422, fmt::format("'gpus' is {}; no server has that many", n));
        }
        t.spec.gpus = static_cast<int>(n);
    }
    if (body.contains("name")) {
        auto name = c_string(body, "name", "a string");
        if (!name || name->size() > kMaxNameBytes) {
            return api::api_fail(400, "'name' must be a string of at most 200 characters "
                                      "without NUL characters");
        }
        t.spec.name = std::move(*name);
    }
    if (const std::optional<std::string> script = python_script(t.spec.command);
        t.spec.name.empty() && script) {
        // `python3 train.py` is "train", as the file a person wrote, not the interpreter.
        t.spec.name = utf8_prefix(script_stem(*script), kMaxNameBytes);
    }
    if (t.spec.name.empty()) {
        // The program's file name, held to the limit a given name has.
        const std::string& prog = t.spec.command.front();
        t.spec.name = utf8_prefix(prog.substr(prog.find_last_of('/') + 1), kMaxNameBytes);
        if (t.spec.name.empty()) {  // "/usr/bin/": no file name to take
            t.spec.name = utf8_prefix(prog, kMaxNameBytes);
        }
    }
    if (body.contains("cpus") && !body["cpus"].is_null()) {
        const nlohmann::json& c = body["cpus"];
        if (!c.is_number_integer() || c.get<std::int64_t>() < 1 ||
            c.get<std::int64_t>() > kMaxCpusPerTask) {
            return api::api_fail(400, fmt::format("'cpus' must be a whole number of cores from 1 "
                                                  "to {} (sbatch's -c)",
                                                  kMaxCpusPerTask));
        }
        t.spec.cpus = static_cast<int>(c.get<std::int64_t>());
    }
    auto host_mem = read_mib(body, "host_mem_mib");
    if (!host_mem) {
        return tl::unexpected(host_mem.error());
    }
    t.spec.host_mem_mib = host_mem->value_or(0);
    auto declared = read_mib(body, "memory_mib");
    if (!declared) {
        return tl::unexpected(declared.error());
    }
    t.spec.memory.declared_mib = *declared;
    if (body.contains("memory") && !body["memory"].is_null()) {
        const nlohmann::json& m = body["memory"];
        if (!m.is_object()) {
            return api::api_fail(400, "'memory' must be an object of *_mib fields");
        }
        static const std::set<std::string> mem_keys = {"declared_mib", "profiled_mib", "horus_mib",
                                                       "faketensor_mib", "gpumemnet_mib"};
        for (const auto& [key, value] : m.items()) {
            if (!mem_keys.contains(key)) {
                return api::api_fail(400, fmt::format("unknown field 'memory.{}'; known: "
                                                      "declared_mib, profiled_mib, horus_mib, "
                                                      "faketensor_mib, gpumemnet_mib",
                                                      key));
            }
        }
        MemoryInfo& mem = t.spec.memory;
        for (auto [key, slot] : {std::pair{"declared_mib", &mem.declared_mib},
                                 std::pair{"profiled_mib", &mem.profiled_mib},
                                 std::pair{"horus_mib", &mem.horus_mib},
                                 std::pair{"faketensor_mib", &mem.faketensor_mib},
                                 std::pair{"gpumemnet_mib", &mem.gpumemnet_mib}}) {
            auto v = read_mib(m, key);
            if (!v) {
                return tl::unexpected(v.error());
            }
            if (*v) {
                *slot = *v;
            }
        }
    }
    if (!body.contains("workdir")) {
        return api::api_fail(400, "'workdir' must be an absolute path");
    }
    auto workdir = c_string(body, "workdir", "an absolute path");
    if (!workdir) {
        return tl::unexpected(workdir.error());
    }
    if (workdir->empty() || workdir->front() != '/') {
        return api::api_fail(400, "'workdir' must be an absolute path");
    }
    t.workdir = std::move(*workdir);
    if (body.contains("env")) {
        if (!body["env"].is_object()) {
            return api::api_fail(400, "'env' must be an object of NAME: value strings");
        }
        static const std::regex name_re("[A-Za-z_][A-Za-z0-9_]*");
        for (const auto& [k, v] : body["env"].items()) {
            if (!std::regex_match(k, name_re)) {
                return api::api_fail(400, fmt::format("environment variable name '{}' is not "
                                                      "valid (letters, digits, _)",
                                                      k));
            }
            if (!v.is_string() || has_nul(v.get<std::string>())) {
                return api::api_fail(400, fmt::format("environment variable {} must be a string "
                                                      "without NUL",
                                                      k));
            }
            t.env.emplace_back(k, v.get<std::string>());
        }
    }
    if (auto explicit_env = explicit_env_from_submission(body, t.env); !explicit_env) {
        return tl::unexpected(explicit_env.error());
    } else {
        t.spec.explicit_env = std::move(*explicit_env);
    }
    {
        std::vector<std::pair<std::string, std::string>> chosen;
        for (const auto& [name, value] : t.env) {
            if (!t.spec.explicit_env ||
                std::find(t.spec.explicit_env->begin(), t.spec.explicit_env->end(), name) !=
                    t.spec.explicit_env->end()) {
                chosen.emplace_back(name, value);
            }
        }
        t.spec.explicit_env_key = env_key(std::move(chosen));
    }
    if (body.contains("max_attempts")) {
        const nlohmann::json& a = body["max_attempts"];
        if (!a.is_number_integer() || a.get<std::int64_t>() < 1 || a.get<std::int64_t>() > 100) {
            return api::api_fail(400, "'max_attempts' must be a whole number 1..100");
        }
        t.max_attempts = static_cast<int>(a.get<std::int64_t>());
    } else {
        t.max_attempts = 0;  // the daemon's default
    }
    if (body.contains("workload")) {
        auto workload = c_string(body, "workload", "a string");
        if (!workload) {
            return tl::unexpected(workload.error());
        }
        t.spec.workload = std::move(*workload);
    }
    // Python environments come as absolute prefixes: a conda environment's name means something
    // only in the submitter's conda setup, which the client resolves.
    for (const char* key : {"conda", "venv"}) {
        if (!body.contains(key) || body[key].is_null()) {
            continue;
        }
        auto prefix = c_string(body, key, "an absolute path");
        if (!prefix) {
            return tl::unexpected(prefix.error());
        }
        if (prefix->empty() || prefix->front() != '/') {
            return api::api_fail(400, fmt::format("'{}' must be an absolute path (got '{}'); "
                                                  "`carma submit --{}` resolves names",
                                                  key, *prefix, key));
        }
        (std::string_view(key) == "conda" ? t.spec.conda : t.spec.venv) = std::move(*prefix);
    }
    if (!t.spec.conda.empty() && !t.spec.venv.empty()) {
        return api::api_fail(400, "give 'conda' or 'venv', not both: a task runs in one Python "
                                  "environment");
    }
    if (body.contains("time_limit_s") && !body["time_limit_s"].is_null()) {
        const nlohmann::json& v = body["time_limit_s"];
        if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > kMaxTimeLimitS) {
            return api::api_fail(400, fmt::format("'time_limit_s' must be a number of seconds, "
                                                  "above 0 and at most {:.0f} (a year)",
                                                  kMaxTimeLimitS));
        }
        t.spec.time_limit_s = v.get<double>();
    }
    auto dependencies = dependencies_from_submission(body);
    if (!dependencies) {
        return tl::unexpected(dependencies.error());
    }
    t.spec.dependencies = std::move(*dependencies);
    for (auto [key, slot] : {std::pair{"output", &t.spec.output}, std::pair{"error", &t.spec.error}}) {
        if (!body.contains(key) || body[key].is_null()) {
            continue;
        }
        auto pattern = c_string(body, key, "a file name (sbatch's %j, %A, %a, %x, %u, %% codes)");
        if (!pattern) {
            return tl::unexpected(pattern.error());
        }
        if (auto ok = check_output_pattern(*pattern, fmt::format("'{}'", key)); !ok) {
            return api::api_fail(400, ok.error().message);
        }
        *slot = std::move(*pattern);
    }
    if (body.contains("mail_type") && !body["mail_type"].is_null()) {
        if (!body["mail_type"].is_string()) {
            return api::api_fail(400, "'mail_type' must be a string like \"END,FAIL\"");
        }
        auto types = parse_mail_types(body["mail_type"].get<std::string>());
        if (!types) {
            return api::api_fail(400, types.error().message);
        }
        t.spec.mail_types = *types;
    }
    if (body.contains("mail_user") && !body["mail_user"].is_null()) {
        const nlohmann::json& v = body["mail_user"];
        if (!v.is_string() || !plausible_mail_address(v.get<std::string>())) {
            return api::api_fail(400, "'mail_user' must be a user name or an address user@host, "
                                      "without spaces, quotes or commas");
        }
        t.spec.mail_user = v.get<std::string>();
    }
    if (body.contains("hold") && !body["hold"].is_null()) {
        if (!body["hold"].is_boolean()) {
            return api::api_fail(400, "'hold' must be true or false");
        }
        if (body["hold"].get<bool>()) {
            t.state = store::TaskState::Held;
        }
    }
    // What the task asks of its co-runners and its place in the queue (fair share, issue 23).
    if (body.contains("exclusive") && !body["exclusive"].is_null()) {
        if (!body["exclusive"].is_boolean()) {
            return api::api_fail(400, "'exclusive' must be true or false");
        }
        t.spec.exclusive = body["exclusive"].get<bool>();
    }
    if (body.contains("max_slowdown") && !body["max_slowdown"].is_null()) {
        const nlohmann::json& v = body["max_slowdown"];
        if (!v.is_number() || !(v.get<double>() >= 1) || v.get<double>() > 1000) {
            return api::api_fail(400, "'max_slowdown' must be a number from 1 (no slowdown "
                                      "accepted) to 1000, e.g. 1.3 for at most 30 % slower");
        }
        t.spec.max_slowdown = v.get<double>();
    }
    if (body.contains("gpu_share") && !body["gpu_share"].is_null()) {
        const nlohmann::json& v = body["gpu_share"];
        auto milli = v.is_number() ? gpu_share_milli(v.get<double>())
                                   : fail(ErrorCode::InvalidArgument,
                                          "'gpu_share' must be a number above 0 and below 1, "
                                          "such as 0.5 for half of one GPU");
        if (!milli) {
            return api::api_fail(400, milli.error().message);
        }
        if (t.spec.gpus != 1) {
            return api::api_fail(400, fmt::format("'gpu_share' is a share of one GPU, but 'gpus' "
                                                  "is {}; ask for 1 GPU with a share, or whole "
                                                  "GPUs without one",
                                                  t.spec.gpus));
        }
        if (t.spec.exclusive) {
            return api::api_fail(400, "'gpu_share' and 'exclusive' contradict each other: an "
                                      "exclusive task holds its GPU whole; drop one of them");
        }
        t.spec.gpu_milli = *milli;
    }
    if (body.contains("nice") && !body["nice"].is_null()) {
        const nlohmann::json& v = body["nice"];
        if (!v.is_number_integer() || v.get<std::int64_t>() < -kMaxNice ||
            v.get<std::int64_t>() > kMaxNice) {
            return api::api_fail(400, fmt::format("'nice' must be a whole number from {} to {} "
                                                  "(positive lowers the task's priority)",
                                                  -kMaxNice, kMaxNice));
        }
        t.spec.nice = static_cast<int>(v.get<std::int64_t>());
    }
    if (body.contains("requeue") && !body["requeue"].is_null()) {
        if (!body["requeue"].is_boolean()) {
            return api::api_fail(400, "'requeue' must be true or false");
        }
        t.spec.requeue = body["requeue"].get<bool>();
    }
    if (auto ok = script_from_submission(body, t.spec); !ok) {
        return tl::unexpected(ok.error());
    }
    return t;
}

api::ApiResult<std::vector<std::string>> warnings_from_submission(const nlohmann::json& body) {
    constexpr std::size_t kMaxWarnings = 20;
    constexpr std::size_t kMaxWarningBytes = 500;
    std::vector<std::string> out;
    if (!body.contains("warnings") || body["warnings"].is_null()) {
        return out;
    }
    const nlohmann::json& v = body["warnings"];
    if (!v.is_array() || v.size() > kMaxWarnings) {
        return api::api_fail(400, "'warnings' must be a list of at most 20 strings");
    }
    for (const nlohmann::json& w : v) {
        if (!w.is_string() || w.get<std::string>().size() > kMaxWarningBytes) {
            return api::api_fail(400, "every element of 'warnings' must be a string of at most "
                                      "500 bytes");
        }
        out.push_back(w.get<std::string>());
    }
    return out;
}

api::ApiResult<ArraySpec> array_from_submission(const nlohmann::json& body) {
    if (!body.is_object() || !body.contains("array") || body["array"].is_null()) {
        return ArraySpec{};
    }
    const nlohmann::json& v = body["array"];
    if (v.is_string()) {
        auto parsed = parse_array_spec(v.get<std::string>());
        if (!parsed) {
            return api::api_fail(400, parsed.error().message);
        }
        return *parsed;
    }
    if (!v.is_array() || v.empty() || v.size() > kMaxArrayMembers) {
        return api::api_fail(400, fmt::format("'array' must be a range like \"0-9\" or a list of "
                                              "1 to {} indices",
                                              kMaxArrayMembers));
    }
    std::set<int> seen;
    std::vector<int> out;
    for (const nlohmann::json& i : v) {
        if (!i.is_number_integer() || i.get<std::int64_t>() < 0 ||
            i.get<std::int64_t>() > kMaxArrayIndex) {
            return api::api_fail(400, fmt::format("every element of 'array' must be an index "
                                                  "0..{}",
                                                  kMaxArrayIndex));
        }
        if (!seen.insert(i.get<int>()).second) {
            return api::api_fail(400, fmt::format("'array' lists index {} twice", i.get<int>()));
        }
        out.push_back(i.get<int>());
    }
    return ArraySpec{std::move(out), 0};
}

std::size_t submission_bytes(const store::TaskRow& task) {
    const TaskSpec& s = task.spec;
    std::size_t n = kStoredTaskRowBytes;
    for (const std::string* text : {&s.name, &task.workdir, &s.workload, &s.output, &s.error,
                                    &s.mail_user, &s.conda, &s.venv, &task.user, &s.script}) {
        n += text->size();
    }
    for (const std::string& a : s.command) {
        n += a.size() + 1;
    }
    for (const auto& [k, v] : task.env) {
        n += k.size() + v.size() + 2;
    }
    if (s.explicit_env) {
        for (const std::string& name : *s.explicit_env) {
            n += name.size() + 1;
        }
    }
    return n + s.dependencies.size() * kStoredDependencyBytes;
}

}  // namespace carma::daemon

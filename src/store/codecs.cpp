#include "store/codecs.h"

#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/json_limits.h"
#include "core/mail.h"
#include "store/columns.h"
#include "store/dependency_json.h"
#include "store/peak_json.h"

namespace carma::store::detail {

using nlohmann::json;

namespace {

// Absent optionals are left out of the JSON (not written as null), so "unknown" stays unknown.
template <typename T>
void put_optional(json& j, const char* key, const std::optional<T>& value) {
    if (value) {
        j[key] = *value;
    }
}

template <typename T>
void get_optional(const json& j, const char* key, std::optional<T>& out) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        out = it->get<T>();
    }
}

// JSON has no NaN or infinity (nlohmann writes null), and a null where a number belongs would
// make the stored row unreadable, so such a spec is refused before it is written.
Result<void> check_finite(const TaskSpec& spec) {
    const std::optional<ModelDescriptor>& model = spec.memory.model;
    if (model &&
        !(std::isfinite(model->parameters) && std::isfinite(model->activations_per_sample))) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}': the model's parameters and activations must be finite "
                                "numbers",
                                spec.name));
    }
    if (spec.time_limit_s && !std::isfinite(*spec.time_limit_s)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}': the time limit must be a finite number", spec.name));
    }
    return {};
}

template <typename Decode>
auto decode_json(TaskId id, const char* column, const std::string& text, Decode decode) {
    try {
        if (auto at = json_too_deep_at(text)) {
            throw std::runtime_error(fmt::format("nested deeper than {} at byte {}", kMaxJsonDepth,
                                                 *at));
        }
        return decode(json::parse(text));
    } catch (const std::exception& e) {  // json's own, and what a decoder refuses
        throw std::runtime_error(fmt::format("task {}: bad {}: {}", id, column, e.what()));
    }
}

// The live (or final) states, quoted for an IN list. Built from the enum so a new state lands
// on the right side of the filter without touching this file; the names are constants, not user
// input.
std::string states_sql(bool (*included)(TaskState)) {
    std::string out;
    for (TaskState s : all_task_states()) {
        if (included(s)) {
            out += fmt::format("{}'{}'", out.empty() ? "" : ", ", to_string(s));
        }
    }
    return out;
}

}  // namespace

// A row the store cannot decode is corruption or a bug; the message names the task so the row
// can be found with sqlite3.
TaskState decode_state(TaskId id, const std::string& text) {
    if (auto state = parse_task_state(text)) {
        return *state;
    }
    throw std::runtime_error(fmt::format("task {} has unknown state '{}'", id, text));
}

// ---- JSON columns -----------------------------------------------------------------------------

json memory_to_json(const MemoryInfo& m) {
    json j = json::object();
    put_optional(j, "declared_mib", m.declared_mib);
    put_optional(j, "profiled_mib", m.profiled_mib);
    put_optional(j, "horus_mib", m.horus_mib);
    put_optional(j, "faketensor_mib", m.faketensor_mib);
    put_optional(j, "gpumemnet_mib", m.gpumemnet_mib);
    if (m.model) {
        j["model"] = {{"parameters", m.model->parameters},
                      {"activations_per_sample", m.model->activations_per_sample},
                      {"batch_size", m.model->batch_size}};
    }
    return j;
}

MemoryInfo memory_from_json(const json& j) {
    MemoryInfo m;
    get_optional(j, "declared_mib", m.declared_mib);
    get_optional(j, "profiled_mib", m.profiled_mib);
    get_optional(j, "horus_mib", m.horus_mib);
    get_optional(j, "faketensor_mib", m.faketensor_mib);
    get_optional(j, "gpumemnet_mib", m.gpumemnet_mib);
    if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
        m.model = ModelDescriptor{it->at("parameters").get<double>(),
                                  it->at("activations_per_sample").get<double>(),
                                  it->at("batch_size").get<int>()};
    }
    return m;
}

json learned_to_json(const Learned& l) {
    json j = {{"margin_mib", l.margin_mib},
              {"lower_bound_mib", l.lower_bound_mib},
              {"runs", l.runs},
              {"basis", l.basis}};
    put_optional(j, "need_mib", l.need_mib);
    put_optional(j, "duration_s", l.duration_s);
    put_optional(j, "activity", l.activity);
    return j;
}

// Rows written before schema 3 have no "learned": the daemon derives it again when it
// re-queues them.
Learned learned_from_json(const json& j) {
    Learned l;
    l.margin_mib = j.value("margin_mib", MiB{0});
    l.lower_bound_mib = j.value("lower_bound_mib", MiB{0});
    l.runs = j.value("runs", 0);
    l.basis = j.value("basis", std::string());
    get_optional(j, "need_mib", l.need_mib);
    get_optional(j, "duration_s", l.duration_s);
    get_optional(j, "activity", l.activity);
    return l;
}

json spec_to_json(const TaskSpec& s) {
    json j = {{"name", s.name},
              {"command", s.command},
              {"gpus", s.gpus},
              {"memory", memory_to_json(s.memory)},
              {"workload", s.workload}};
    if (s.cpus != 0) {
        j["cpus"] = s.cpus;
    }
    if (s.host_mem_mib != 0) {
        j["host_mem_mib"] = s.host_mem_mib;
    }
    // Only when set: rows written before these fields existed read the same.
    if (!s.conda.empty()) {
        j["conda"] = s.conda;
    }
    if (!s.venv.empty()) {
        j["venv"] = s.venv;
    }
    j["learned"] = learned_to_json(s.learned);
    put_optional(j, "time_limit_s", s.time_limit_s);
    if (!s.dependencies.empty()) {
        j["dependencies"] = dependencies_to_json(s.dependencies);
    }
    if (s.array) {
        j["array"] = {{"id", s.array->id}, {"index", s.array->index}};
        if (s.array->max_running > 0) {
            j["array"]["max_running"] = s.array->max_running;
        }
    }
    if (!s.output.empty()) {
        j["output"] = s.output;
    }
    if (!s.error.empty()) {
        j["error"] = s.error;
    }
    if (!s.script.empty()) {
        j["script"] = {{"text", s.script}, {"arg", s.script_arg}};
    }
    if (s.mail_types != 0) {
        j["mail_type"] = format_mail_types(s.mail_types);
        j["mail_user"] = s.mail_user;
    }
    if (s.explicit_env) {
        j["explicit_env"] = *s.explicit_env;
    }
    if (s.gpu_milli != 0) {
        j["gpu_milli"] = s.gpu_milli;
    }
    if (s.exclusive) {
        j["exclusive"] = true;
    }
    put_optional(j, "max_slowdown", s.max_slowdown);
    if (s.nice != 0) {
        j["nice"] = s.nice;
    }
    if (s.requeue) {
        j["requeue"] = true;
    }
    if (!s.explicit_env_key.empty()) {
        j["explicit_env_key"] = s.explicit_env_key;
    }
    return j;
}

TaskSpec spec_from_json(const json& j) {
    TaskSpec s;
    s.name = j.at("name").get<std::string>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.gpus = j.at("gpus").get<int>();
    s.cpus = j.value("cpus", 0);
    s.host_mem_mib = j.value("host_mem_mib", MiB{0});
    s.memory = memory_from_json(j.at("memory"));
    s.workload = j.at("workload").get<std::string>();
    s.conda = j.value("conda", "");
    s.venv = j.value("venv", "");
    if (auto it = j.find("learned"); it != j.end() && it->is_object()) {
        s.learned = learned_from_json(*it);
    }
    get_optional(j, "time_limit_s", s.time_limit_s);
    for (TaskId id : j.value("after", std::vector<TaskId>{})) {
        s.dependencies.push_back({DependencyType::AfterOk, TaskRef::of(id)});
    }
    if (auto it = j.find("dependencies"); it != j.end() && it->is_array()) {
        for (const json& d : *it) {
            auto dep = dependency_from_json(d);
            if (!dep) {
                // Dropped, it would let the task start before what it waits for.
                throw std::runtime_error("a dependency is not {type, task}: " + d.dump());
            }
            s.dependencies.push_back(*dep);
        }
    }
    if (auto it = j.find("array"); it != j.end() && it->is_object()) {
        s.array = ArrayMember{it->at("id").get<TaskId>(), it->at("index").get<int>(),
                              it->value("max_running", 0)};
    }
    s.output = j.value("output", "");
    s.error = j.value("error", "");
    if (auto it = j.find("script"); it != j.end() && it->is_object()) {
        s.script = it->at("text").get<std::string>();
        s.script_arg = it->at("arg").get<std::size_t>();
    }
    if (auto it = j.find("mail_type"); it != j.end() && it->is_string()) {
        auto types = parse_mail_types(it->get<std::string>());
        if (!types) {
            throw std::runtime_error(types.error().message);
        }
        s.mail_types = *types;
        s.mail_user = j.value("mail_user", "");
    }
    if (auto it = j.find("explicit_env"); it != j.end() && it->is_array()) {
        s.explicit_env = it->get<std::vector<std::string>>();
    }
    s.explicit_env_key = j.value("explicit_env_key", "");
    s.gpu_milli = j.value("gpu_milli", 0);
    s.exclusive = j.value("exclusive", false);
    get_optional(j, "max_slowdown", s.max_slowdown);
    s.nice = j.value("nice", 0);
    s.requeue = j.value("requeue", false);
    return s;
}

Result<EncodedTask> encode_task(const TaskRow& task) {
    if (auto finite = check_finite(task.spec); !finite) {
        return tl::unexpected(finite.error());
    }
    try {
        // env is a list of pairs, not an object: it keeps the submitter's order and duplicates.
        return EncodedTask{spec_to_json(task.spec).dump(), json(task.env).dump()};
    } catch (const json::exception& e) {
        // dump() refuses strings that are not UTF-8; argv and environment bytes may be anything.
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}': the command and environment must be valid UTF-8 ({})",
                                task.spec.name, e.what()));
    }
}

// ---- tasks ------------------------------------------------------------------------------------

int bind_task(SQLite::Statement& st, const TaskRow& t, const EncodedTask& encoded) {
    st.bind(1, t.spec.name);
    st.bind(2, encoded.spec_json);
    st.bind(3, static_cast<std::int64_t>(t.uid));
    st.bind(4, static_cast<std::int64_t>(t.gid));
    st.bind(5, t.user);
    st.bind(6, t.workdir);
    st.bind(7, encoded.env_json);
    st.bind(8, std::string(to_string(t.state)));
    st.bind(9, t.attempts);
    st.bind(10, t.max_attempts);
    st.bind(11, t.submitted_at);
    bind_optional(st, 12, t.finished_at);
    st.bind(13, t.message);
    return 14;
}

TaskRow read_task(const SQLite::Statement& st) {
    TaskRow t;
    t.id = st.getColumn(0).getInt64();
    // Column 1 (name) duplicates spec.name; the JSON is the truth.
    t.spec = decode_json(t.id, "spec_json", st.getColumn(2).getString(), spec_from_json);
    t.uid = static_cast<uid_t>(st.getColumn(3).getInt64());
    t.gid = static_cast<gid_t>(st.getColumn(4).getInt64());
    t.user = st.getColumn(5).getString();
    t.workdir = st.getColumn(6).getString();
    t.env = decode_json(t.id, "env_json", st.getColumn(7).getString(), [](const json& j) {
        return j.get<std::vector<std::pair<std::string, std::string>>>();
    });
    t.state = decode_state(t.id, st.getColumn(8).getString());
    t.attempts = st.getColumn(9).getInt();
    t.max_attempts = st.getColumn(10).getInt();
    t.submitted_at = st.getColumn(11).getDouble();
    t.finished_at = optional_double(st.getColumn(12));
    t.message = st.getColumn(13).getString();
    return t;
}

std::vector<TaskRow> read_tasks(SQLite::Statement& st) {
    std::vector<TaskRow> rows;
    while (st.executeStep()) {
        rows.push_back(read_task(st));
    }
    return rows;
}

std::string task_columns_without_env() {
    std::string columns = kTaskColumns;
    const std::string env = "env_json";
    columns.replace(columns.find(env), env.size(), "'[]'");
    return columns;
}

// ---- attempts ---------------------------------------------------------------------------------

// Insert and update share the parameter order: the mutable fields, then the key.
void bind_attempt(SQLite::Statement& st, const AttemptRow& a) {
    st.bind(1, json(a.gpus).dump());
    st.bind(2, a.dir);
    st.bind(3, static_cast<std::int64_t>(a.shim_pid));
    st.bind(4, a.started_at);
    bind_optional(st, 5, a.ended_at);
    st.bind(6, a.outcome);
    bind_optional(st, 7, a.exit_code);
    bind_optional(st, 8, a.signal);
    st.bind(9, a.recovered ? 1 : 0);
    st.bind(10, peak_to_json(a.peak_mib).dump());
    bind_optional(st, 11, a.energy_j);
    st.bind(12, a.node);
    st.bind(13, a.slurm_job);
    bind_optional(st, 14, a.charged_gpu_s);
    bind_optional(st, 15, a.slowdown);
    st.bind(16, json(a.cores).dump());
    bind_optional(st, 17, a.total_cpu_s);
    bind_optional(st, 18, a.max_rss_mib);
    st.bind(19, a.task);
    st.bind(20, a.number);
}

AttemptRow read_attempt(const SQLite::Statement& st) {
    AttemptRow a;
    a.task = st.getColumn(0).getInt64();
    a.number = st.getColumn(1).getInt();
    a.gpus = decode_json(a.task, "gpus_json", st.getColumn(2).getString(),
                         [](const json& j) { return j.get<std::vector<int>>(); });
    a.dir = st.getColumn(3).getString();
    a.shim_pid = static_cast<pid_t>(st.getColumn(4).getInt64());
    a.started_at = st.getColumn(5).getDouble();
    a.ended_at = optional_double(st.getColumn(6));
    a.outcome = st.getColumn(7).getString();
    a.exit_code = optional_int(st.getColumn(8));
    a.signal = optional_int(st.getColumn(9));
    a.recovered = st.getColumn(10).getInt() != 0;
    a.peak_mib = decode_json(a.task, "peak_mib_json", st.getColumn(11).getString(),
                             [](const json& j) {
                                 std::map<int, MiB> peak;
                                 for (const auto& [gpu, mib] : j.items()) {
                                     peak[std::stoi(gpu)] = mib.get<MiB>();
                                 }
                                 return peak;
                             });
    a.energy_j = optional_double(st.getColumn(12));
    a.node = st.getColumn(13).getString();
    a.slurm_job = st.getColumn(14).getString();
    a.charged_gpu_s = optional_double(st.getColumn(15));
    a.slowdown = optional_double(st.getColumn(16));
    a.cores = decode_json(a.task, "cores_json", st.getColumn(17).getString(),
                          [](const json& j) { return j.get<std::vector<int>>(); });
    a.total_cpu_s = optional_double(st.getColumn(18));
    if (const auto rss = optional_int64(st.getColumn(19))) {
        a.max_rss_mib = *rss;
    }
    return a;
}

std::vector<AttemptRow> read_attempts(SQLite::Statement& st) {
    std::vector<AttemptRow> rows;
    while (st.executeStep()) {
        rows.push_back(read_attempt(st));
    }
    return rows;
}

// ---- SQL text ---------------------------------------------------------------------------------

std::string live_states_sql() {
    return states_sql([](TaskState s) { return !is_final(s); });
}
std::string final_states_sql() { return states_sql(is_final); }
std::string waiting_states_sql() { return states_sql(is_waiting); }

std::string limit_sql(std::size_t limit) {
    return limit == 0 ? std::string() : fmt::format(" LIMIT {}", limit);
}

std::string id_list_sql(std::span<const TaskId> ids) {
    std::string out;
    for (TaskId id : ids) {
        out += fmt::format("{}{}", out.empty() ? "" : ",", id);
    }
    return out;
}

}  // namespace carma::store::detail

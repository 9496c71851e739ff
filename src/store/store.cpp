#include "store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/columns.h"
#include "store/peak_json.h"

namespace carma::store {

namespace {

using nlohmann::json;

// Long enough to ride out another process (sqlite3 shell, a backup) holding the write lock for a
// moment; short enough that a wedged one surfaces as an error instead of a hung daemon.
constexpr int kBusyTimeoutMs = 5000;

// ---- schema -----------------------------------------------------------------------------------

// One forward-only step. Opening a database applies, in order and in one transaction, every step
// whose version is above the file's PRAGMA user_version. Steps are never edited once released:
// a change to the schema is a new step.
struct Migration {
    int version;  // the user_version once this step has run
    const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
-- AUTOINCREMENT: ids are shown to users and written in logs, so a deleted newest task must
-- never hand its id to the next submission.
CREATE TABLE tasks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,  -- copy of spec.name for people reading the file with sqlite3
    spec_json    TEXT    NOT NULL,
    uid          INTEGER NOT NULL,
    gid          INTEGER NOT NULL,
    user         TEXT    NOT NULL,
    workdir      TEXT    NOT NULL,
    env_json     TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    submitted_at REAL    NOT NULL,
    finished_at  REAL,
    message      TEXT    NOT NULL
);
-- Listing live tasks must not scan the whole history.
CREATE INDEX tasks_state ON tasks(state);

CREATE TABLE attempts (
    task_id    INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    number     INTEGER NOT NULL,
    gpus_json  TEXT    NOT NULL,
    dir        TEXT    NOT NULL,
    shim_pid   INTEGER NOT NULL,
    started_at REAL    NOT NULL,
    ended_at   REAL,
    outcome    TEXT    NOT NULL,
    exit_code  INTEGER,
    signal     INTEGER,
    recovered  INTEGER NOT NULL,
    PRIMARY KEY (task_id, number)
);

-- task_id 0 marks daemon-wide events, so it cannot be a foreign key.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    REAL    NOT NULL,
    task_id INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    message TEXT    NOT NULL
);
CREATE INDEX events_task ON events(task_id);

-- The metrics may be NULL: a backend without a reading reports NaN, which SQLite stores as NULL.
CREATE TABLE gpu_samples (
    time     REAL    NOT NULL,
    gpu      INTEGER NOT NULL,
    free_mib INTEGER NOT NULL,
    used_mib INTEGER NOT NULL,
    util     REAL,
    smact    REAL,
    smocc    REAL,
    drama    REAL,
    power_w  REAL,
    energy_j REAL
);
CREATE INDEX gpu_samples_time ON gpu_samples(time);
)sql"},
    {2, R"sql(
-- Peak GPU memory of the attempt's processes per GPU, {"<gpu index>": MiB}: what later issues
-- learn memory needs from.
ALTER TABLE attempts ADD COLUMN peak_mib_json TEXT NOT NULL DEFAULT '{}';
)sql"},
    {3, R"sql(
-- What each finished attempt did, by command (store/history.h). Not tied to tasks by a foreign
-- key: it is knowledge about a command and outlives any one task. id orders rows by when they
-- were recorded (newest = largest).
CREATE TABLE history (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,  -- core/fingerprint.h: owner + argv + GPU count
    family      TEXT    NOT NULL,  -- owner + program + script
    uid         INTEGER NOT NULL,
    gpus        INTEGER NOT NULL,
    peak_mib    INTEGER NOT NULL,  -- the most held on any one of its GPUs
    peak_json   TEXT    NOT NULL,  -- {"<gpu index>": MiB}
    run_s       REAL    NOT NULL,
    activity    REAL,              -- mean SMACT of its GPUs; NULL when no GPU reported it
    outcome     TEXT    NOT NULL,
    ended_at    REAL    NOT NULL,
    UNIQUE (task_id, attempt)
);
CREATE INDEX history_fingerprint ON history(fingerprint, id);
CREATE INDEX history_family ON history(family, id);
)sql"},
    {4, R"sql(
-- The GPU energy attributed to the attempt (`carma acct`): joules, accumulated while it runs
-- (daemon/daemon_acct.cpp); NULL where no GPU of it reported energy, and for attempts recorded
-- before this step.
ALTER TABLE attempts ADD COLUMN energy_j REAL;
)sql"},
    {5, R"sql(
-- Where the attempt ran when CARMA schedules over several nodes (`carma agent`): the node's
-- name and the Slurm job of the allocation its agent ran in, so `sacct` and `carma acct` join.
-- Empty for attempts on the daemon's own GPUs and for those recorded before this step.
ALTER TABLE attempts ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN slurm_job TEXT NOT NULL DEFAULT '';
)sql"},
    {6, R"sql(
-- Per-user limits count a user's waiting tasks at every submission, and the live view counts
-- every user's: from the index alone, not a scan of a table that may hold 100,000 tasks. It
-- answers what tasks_state did, too.
CREATE INDEX tasks_state_uid ON tasks(state, uid);
DROP INDEX tasks_state;
-- The live view's "finished recently" and accounting by time, without a scan.
CREATE INDEX tasks_finished_at ON tasks(finished_at);
)sql"},
    {7, R"sql(
-- Why an attempt was not seen on its GPUs ("not-seen", "no-memory": core/knowledge.h
-- Observation); NULL when it was, and for rows recorded before this step. Such a row teaches its
-- run time only: its peak of 0 is not a need.
ALTER TABLE history ADD COLUMN unobserved TEXT;
)sql"},
    {8, R"sql(
-- `carma` learns its own error (core/speed_correction.h): per attempt, the time it ran with
-- GPU-active co-runners (0: alone, so its run time is solo history), and where it shared, the
-- sharing class and the factor k by which its slowdown exceeded the prediction. NULL for rows
-- recorded before this step: unknown whether they ran alone, so they are no solo history.
ALTER TABLE history ADD COLUMN shared_s REAL;
ALTER TABLE history ADD COLUMN sharing_class TEXT;
ALTER TABLE history ADD COLUMN speed_k REAL;
)sql"},
};

constexpr bool migrations_are_consecutive() {
    int expected = 1;
    for (const Migration& m : kMigrations) {
        if (m.version != expected) {
            return false;
        }
        ++expected;
    }
    return expected - 1 == kSchemaVersion;
}
static_assert(migrations_are_consecutive(), "kMigrations must be steps 1, 2, ..., kSchemaVersion");

// ---- JSON columns -----------------------------------------------------------------------------

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
    // Only when set: rows written before these fields existed read the same.
    if (!s.conda.empty()) {
        j["conda"] = s.conda;
    }
    if (!s.venv.empty()) {
        j["venv"] = s.venv;
    }
    j["learned"] = learned_to_json(s.learned);
    put_optional(j, "time_limit_s", s.time_limit_s);
    if (!s.after.empty()) {
        j["after"] = s.after;
    }
    if (s.array) {
        j["array"] = {{"id", s.array->id}, {"index", s.array->index}};
    }
    return j;
}

TaskSpec spec_from_json(const json& j) {
    TaskSpec s;
    s.name = j.at("name").get<std::string>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.gpus = j.at("gpus").get<int>();
    s.memory = memory_from_json(j.at("memory"));
    s.workload = j.at("workload").get<std::string>();
    s.conda = j.value("conda", "");
    s.venv = j.value("venv", "");
    if (auto it = j.find("learned"); it != j.end() && it->is_object()) {
        s.learned = learned_from_json(*it);
    }
    get_optional(j, "time_limit_s", s.time_limit_s);
    s.after = j.value("after", std::vector<TaskId>{});
    if (auto it = j.find("array"); it != j.end() && it->is_object()) {
        s.array = ArrayMember{it->at("id").get<TaskId>(), it->at("index").get<int>()};
    }
    return s;
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

struct EncodedTask {
    std::string spec_json;
    std::string env_json;
};

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

// ---- binding and reading columns --------------------------------------------------------------

std::optional<double> optional_double(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional<double>(c.getDouble());
}

std::optional<int> optional_int(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional<int>(c.getInt());
}

// SQLite stores a bound NaN as NULL; reading it back as NaN makes the round trip exact.
double nullable_double(const SQLite::Column& c) {
    return c.isNull() ? std::numeric_limits<double>::quiet_NaN() : c.getDouble();
}

constexpr const char* kTaskColumns =
    "id, name, spec_json, uid, gid, user, workdir, env_json, state, attempts, max_attempts, "
    "submitted_at, finished_at, message";

constexpr const char* kInsertTask =
    "INSERT INTO tasks (name, spec_json, uid, gid, user, workdir, env_json, state, attempts, "
    "max_attempts, submitted_at, finished_at, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "?, ?)";

constexpr const char* kUpdateTask =
    "UPDATE tasks SET name = ?, spec_json = ?, uid = ?, gid = ?, user = ?, workdir = ?, "
    "env_json = ?, state = ?, attempts = ?, max_attempts = ?, submitted_at = ?, finished_at = ?, "
    "message = ? WHERE id = ?";

// Binds every column but the id, in kInsertTask order; returns the next parameter index.
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

// A row the store cannot decode is corruption or a bug; the message names the task so the row
// can be found with sqlite3.
TaskState decode_state(TaskId id, const std::string& text) {
    if (auto state = parse_task_state(text)) {
        return *state;
    }
    throw std::runtime_error(fmt::format("task {} has unknown state '{}'", id, text));
}

template <typename Decode>
auto decode_json(TaskId id, const char* column, const std::string& text, Decode decode) {
    try {
        return decode(json::parse(text));
    } catch (const json::exception& e) {
        throw std::runtime_error(fmt::format("task {}: bad {}: {}", id, column, e.what()));
    }
}

// Reads a row selected with kTaskColumns.
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

std::string live_states_sql() {
    return states_sql([](TaskState s) { return !is_final(s); });
}
std::string final_states_sql() { return states_sql(is_final); }
std::string waiting_states_sql() { return states_sql(is_waiting); }

// " LIMIT n", or nothing for no limit (0).
std::string limit_sql(std::size_t limit) {
    return limit == 0 ? std::string() : fmt::format(" LIMIT {}", limit);
}

// Task ids as an SQL list; integers, never user text.
std::string id_list_sql(std::span<const TaskId> ids) {
    std::string out;
    for (TaskId id : ids) {
        out += fmt::format("{}{}", out.empty() ? "" : ",", id);
    }
    return out;
}

// kTaskColumns with an empty environment in env_json's place (reads that do not need it).
std::string task_columns_without_env() {
    std::string columns = kTaskColumns;
    const std::string env = "env_json";
    columns.replace(columns.find(env), env.size(), "'[]'");
    return columns;
}

constexpr const char* kAttemptColumns =
    "task_id, number, gpus_json, dir, shim_pid, started_at, ended_at, outcome, exit_code, signal, "
    "recovered, peak_mib_json, energy_j, node, slurm_job";

constexpr const char* kInsertAttempt =
    "INSERT INTO attempts (gpus_json, dir, shim_pid, started_at, ended_at, outcome, exit_code, "
    "signal, recovered, peak_mib_json, energy_j, node, slurm_job, task_id, number) VALUES (?, ?, "
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

constexpr const char* kUpdateAttempt =
    "UPDATE attempts SET gpus_json = ?, dir = ?, shim_pid = ?, started_at = ?, ended_at = ?, "
    "outcome = ?, exit_code = ?, signal = ?, recovered = ?, peak_mib_json = ?, energy_j = ?, "
    "node = ?, slurm_job = ? WHERE task_id = ? AND number = ?";

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
    st.bind(14, a.task);
    st.bind(15, a.number);
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
    return a;
}

std::vector<AttemptRow> read_attempts(SQLite::Statement& st) {
    std::vector<AttemptRow> rows;
    while (st.executeStep()) {
        rows.push_back(read_attempt(st));
    }
    return rows;
}

EventRow read_event(const SQLite::Statement& st) {
    EventRow e;
    e.id = st.getColumn(0).getInt64();
    e.time = st.getColumn(1).getDouble();
    e.task = st.getColumn(2).getInt64();
    e.kind = st.getColumn(3).getString();
    e.message = st.getColumn(4).getString();
    return e;
}

void bind_sample(SQLite::Statement& st, const GpuSampleRow& s) {
    st.bind(1, s.time);
    st.bind(2, s.gpu);
    st.bind(3, s.free_mib);
    st.bind(4, s.used_mib);
    st.bind(5, s.util);
    st.bind(6, s.smact);
    st.bind(7, s.smocc);
    st.bind(8, s.drama);
    st.bind(9, s.power_w);
    st.bind(10, s.energy_j);
}

GpuSampleRow read_sample(const SQLite::Statement& st) {
    GpuSampleRow s;
    s.time = st.getColumn(0).getDouble();
    s.gpu = st.getColumn(1).getInt();
    s.free_mib = st.getColumn(2).getInt64();
    s.used_mib = st.getColumn(3).getInt64();
    s.util = nullable_double(st.getColumn(4));
    s.smact = nullable_double(st.getColumn(5));
    s.smocc = nullable_double(st.getColumn(6));
    s.drama = nullable_double(st.getColumn(7));
    s.power_w = nullable_double(st.getColumn(8));
    s.energy_j = nullable_double(st.getColumn(9));
    return s;
}

// ---- opening ----------------------------------------------------------------------------------

// The daemon creates the state directory. A missing or read-only one is a deployment mistake
// that SQLite would only report as "unable to open database file", so it is named here.
Result<void> check_directory(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) {
        dir = ".";
    }
    std::error_code ec;
    const fs::file_status status = fs::status(dir, ec);
    const auto refuse = [&](const std::string& why) {
        return fail(ErrorCode::Io, fmt::format("cannot open the database {}: {}", path, why));
    };
    if (status.type() == fs::file_type::not_found) {
        return refuse(
            fmt::format("directory {} does not exist (the daemon creates its state "
                        "directory; check --state-dir)",
                        dir.string()));
    }
    if (ec) {
        return refuse(fmt::format("cannot inspect directory {}: {}", dir.string(), ec.message()));
    }
    if (!fs::is_directory(status)) {
        return refuse(fmt::format("{} is not a directory", dir.string()));
    }
    // SQLite creates the -wal and -shm files next to the database, so the directory itself, not
    // only the file, must be writable.
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
        return refuse(fmt::format("directory {} is not writable by this user: {}", dir.string(),
                                  std::strerror(errno)));
    }
    return {};
}

// Throws SQLite::Exception or std::runtime_error; Store::open adds the path.
void configure(SQLite::Database& db) {
    // SQLite silently falls back to read-only when the file is not writable; the daemon would
    // then fail on its first write instead of at startup.
    if (sqlite3_db_readonly(db.getHandle(), "main") == 1) {
        throw std::runtime_error("the file is not writable by this user");
    }
    // WAL: readers in other processes (sqlite3, backups) do not block the daemon's writes, and
    // a commit appends its pages to the log instead of first copying the old ones to a journal.
    const std::string mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
    if (mode != "wal") {
        throw std::runtime_error(
            fmt::format("cannot use WAL journal mode (got '{}'); put the "
                        "state directory on a local filesystem",
                        mode));
    }
    // With WAL, NORMAL can lose the last commits on power failure but never corrupts the file,
    // and it saves an fsync per transaction.
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
}

std::string too_new_message(const std::string& path, int found) {
    return fmt::format(
        "database {} has schema version {}, but this build of carma knows only up to "
        "version {}; upgrade carma or point --state-dir elsewhere",
        path, found, kSchemaVersion);
}

// Brings the file to kSchemaVersion. IMMEDIATE: two daemons starting at once must not both
// decide to run the same step; the second waits, then sees the new user_version.
Result<int> migrate(SQLite::Database& db, const std::string& path) {
    int found = 0;
    try {
        SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
        found = db.execAndGet("PRAGMA user_version").getInt();
        if (found > kSchemaVersion) {
            return fail(ErrorCode::InvalidArgument, too_new_message(path, found));
        }
        for (const Migration& m : kMigrations) {
            if (m.version > found) {
                db.exec(m.sql);
            }
        }
        if (found < kSchemaVersion) {
            // user_version lives in the file header and is part of the transaction.
            db.exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion));
        }
        tx.commit();
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot migrate the database {} from schema "
                                               "version {} to {}: {}",
                                               path, found, kSchemaVersion, e.what()));
    }
    return kSchemaVersion;
}

}  // namespace

// ---- Store ------------------------------------------------------------------------------------

struct Store::Impl {
    explicit Impl(const std::string& file)
        : path(file), db(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs) {}

    // Runs `body` (which returns a Result) holding the connection's lock: the daemon's API and
    // scheduler threads share this one connection. SQLiteCpp reports errors by throwing; they
    // become an error naming the operation, the file and SQLite's message.
    template <typename F>
    std::invoke_result_t<F&, SQLite::Database&> locked(std::string_view op, F&& body) {
        std::lock_guard lock(mutex);
        try {
            return body(db);
        } catch (const std::exception& e) {
            return fail(ErrorCode::Io, fmt::format("{} in {}: {}", op, path, e.what()));
        }
    }

    // As locked(), inside one transaction that commits only when `body` succeeds, so a failed
    // write leaves nothing behind. IMMEDIATE takes the write lock at BEGIN: a deferred
    // transaction that upgrades later can get SQLITE_BUSY without the busy timeout applying.
    template <typename F>
    std::invoke_result_t<F&, SQLite::Database&> write(std::string_view op, F&& body) {
        return locked(op, [&](SQLite::Database& d) {
            SQLite::Transaction tx(d, SQLite::TransactionBehavior::IMMEDIATE);
            auto result = body(d);
            if (result) {
                tx.commit();
            }
            return result;
        });
    }

    std::string path;
    SQLite::Database db;
    std::mutex mutex;
    int version = 0;
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() = default;

namespace {

std::string restore_hint(const std::string& path) {
    return fmt::format(
        "keep {0} and its -wal and -shm files as they are (they may hold the newest writes), then "
        "either copy a backup made with `carma admin backup FILE` to {0}, or move the damaged "
        "files aside to start with an empty queue",
        path);
}

// Serving a damaged database would answer every request with 500 and could make it worse.
Result<void> check_integrity(SQLite::Database& db, const std::string& path) {
    std::string problem;
    try {
        SQLite::Statement st(db, "PRAGMA quick_check");
        if (st.executeStep()) {
            problem = st.getColumn(0).getString();
        }
    } catch (const std::exception& e) {
        problem = e.what();
    }
    if (problem == "ok") {
        return {};
    }
    return fail(ErrorCode::Io, fmt::format("the database {} is damaged ({}); {}", path,
                                           problem.empty() ? "quick_check said nothing" : problem,
                                           restore_hint(path)));
}

}  // namespace

Result<void> Store::backup(const std::string& source, const std::string& destination) {
    if (!std::filesystem::exists(source)) {
        return fail(ErrorCode::NotFound,
                    fmt::format("no database at {}; give the daemon's state directory", source));
    }
    try {
        SQLite::Database from(source, SQLite::OPEN_READONLY);
        from.setBusyTimeout(kBusyTimeoutMs);
        {
            // Created 0600 before SQLite writes a byte: the tasks' environments are inside.
            const int fd = ::open(destination.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) {
                return fail(ErrorCode::Io, fmt::format("cannot create {}: {}; choose a new file",
                                                       destination, std::strerror(errno)));
            }
            ::close(fd);
        }
        SQLite::Database to(destination, SQLite::OPEN_READWRITE);
        SQLite::Backup copy(to, from);
        copy.executeStep(-1);
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot back up {} to {}: {}", source, destination,
                                               e.what()));
    }
    return {};
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path) {
    if (auto dir = check_directory(path); !dir) {
        return tl::unexpected(dir.error());
    }
    // The database holds every task's environment (tokens, keys): only the daemon's user may
    // read it. SQLite gives its -wal and -shm files the database file's mode.
    if (const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
        (void)::fchmod(fd, 0600);
        ::close(fd);
    }
    std::unique_ptr<Impl> impl;
    try {
        impl = std::make_unique<Impl>(path);
        configure(impl->db);
    } catch (const std::exception& e) {
        return fail(ErrorCode::Io, fmt::format("cannot open the database {}: {}; {}", path,
                                               e.what(), restore_hint(path)));
    }
    if (auto healthy = check_integrity(impl->db, path); !healthy) {
        return tl::unexpected(healthy.error());
    }
    auto version = migrate(impl->db, path);
    if (!version) {
        return tl::unexpected(version.error());
    }
    impl->version = *version;
    // make_unique cannot reach the private constructor.
    return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Result<void> Store::add_history(const HistoryRow& row, const HistoryLimits& limits) {
    const std::string op = fmt::format("record the history of attempt {} of task {}",
                                       row.attempt, row.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        insert_history(db, row, limits);
        return {};
    });
}

Result<std::vector<HistoryRow>> Store::command_history(const std::string& fingerprint,
                                                       int newest) {
    return impl_->locked("read the history of a command",
                         [&](SQLite::Database& db) -> Result<std::vector<HistoryRow>> {
                             return history_rows(db, HistoryKey::Command, fingerprint, "",
                                                 newest);
                         });
}

Result<std::vector<SpeedFactorRow>> Store::speed_factors() {
    return impl_->locked("read the learned speed factors",
                         [&](SQLite::Database& db) -> Result<std::vector<SpeedFactorRow>> {
                             return speed_factor_rows(db);
                         });
}

Result<std::vector<HistoryRow>> Store::family_history(const std::string& family,
                                                      const std::string& fingerprint,
                                                      int newest) {
    return impl_->locked("read the history of a command's family",
                         [&](SQLite::Database& db) -> Result<std::vector<HistoryRow>> {
                             return history_rows(db, HistoryKey::Family, family, fingerprint,
                                                 newest);
                         });
}

int Store::schema_version() const {
    return impl_->version;
}

Result<TaskId> Store::insert_task(const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    return impl_->write(fmt::format("insert task '{}'", task.spec.name),
                        [&](SQLite::Database& db) -> Result<TaskId> {
                            SQLite::Statement st(db, kInsertTask);
                            bind_task(st, task, *encoded);
                            st.exec();
                            return db.getLastInsertRowid();
                        });
}

Result<std::vector<TaskId>> Store::insert_array(const TaskRow& task,
                                                std::span<const int> indices) {
    if (indices.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("array task '{}' has no indices", task.spec.name));
    }
    TaskRow member = task;
    member.spec.array = ArrayMember{0, indices.front()};
    auto encoded = encode_task(member);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    return impl_->write(
        fmt::format("insert array task '{}' ({} members)", task.spec.name, indices.size()),
        [&](SQLite::Database& db) -> Result<std::vector<TaskId>> {
            std::vector<TaskId> ids;
            SQLite::Statement insert(db, kInsertTask);
            SQLite::Statement update(db, kUpdateTask);
            // The array's id is its first member's, known only once that one is in: each member is
            // inserted and then rewritten with it, all in this one transaction.
            for (int index : indices) {
                member.spec.array = ArrayMember{ids.empty() ? 0 : ids.front(), index};
                insert.reset();
                bind_task(insert, member, EncodedTask{spec_to_json(member.spec).dump(),
                                                      encoded->env_json});
                insert.exec();
                ids.push_back(db.getLastInsertRowid());
            }
            member.spec.array = ArrayMember{ids.front(), indices.front()};
            update.bind(bind_task(update, member, EncodedTask{spec_to_json(member.spec).dump(),
                                                              encoded->env_json}),
                        ids.front());
            update.exec();
            return ids;
        });
}

// Writes every column but the id: which fields change is the caller's business.
Result<void> Store::update_task(const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op = fmt::format("update task {}", task.id);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kUpdateTask);
        st.bind(bind_task(st, task, *encoded), task.id);
        if (st.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<int> Store::set_learned_if_waiting(std::span<const std::pair<TaskId, Learned>> learned) {
    if (learned.empty()) {
        return 0;
    }
    const std::string op = fmt::format("record what was learned of {} waiting task(s)",
                                       learned.size());
    return impl_->write(op, [&](SQLite::Database& db) -> Result<int> {
        SQLite::Statement st(
            db, fmt::format("UPDATE tasks SET spec_json = json_set(spec_json, '$.learned', "
                            "json(?)) WHERE id = ? AND state IN ({})",
                            waiting_states_sql()));
        int changed = 0;
        for (const auto& [id, l] : learned) {
            st.reset();
            st.bind(1, learned_to_json(l).dump());
            st.bind(2, static_cast<std::int64_t>(id));
            changed += st.exec();
        }
        return changed;
    });
}

Result<void> Store::begin_attempt(const AttemptRow& attempt, const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op =
        fmt::format("record attempt {} of task {} as starting", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement insert(db, kInsertAttempt);
        bind_attempt(insert, attempt);
        insert.exec();
        SQLite::Statement update(db, kUpdateTask);
        update.bind(bind_task(update, task, *encoded), task.id);
        if (update.exec() == 0) {
            return fail(ErrorCode::NotFound, fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<void> Store::end_attempt(const AttemptRow& attempt, const TaskRow& task) {
    auto encoded = encode_task(task);
    if (!encoded) {
        return tl::unexpected(encoded.error());
    }
    const std::string op =
        fmt::format("record the end of attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement ended(db, kUpdateAttempt);
        bind_attempt(ended, attempt);
        if (ended.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such attempt", op, impl_->path));
        }
        SQLite::Statement update(db, kUpdateTask);
        update.bind(bind_task(update, task, *encoded), task.id);
        if (update.exec() == 0) {
            return fail(ErrorCode::NotFound, fmt::format("{} in {}: no such task", op, impl_->path));
        }
        return {};
    });
}

Result<std::optional<TaskRow>> Store::task(TaskId id) {
    const std::string sql = fmt::format("SELECT {} FROM tasks WHERE id = ?", kTaskColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::optional<TaskRow>> {
        SQLite::Statement st(db, sql);
        st.bind(1, id);
        if (!st.executeStep()) {
            return std::optional<TaskRow>();
        }
        return read_task(st);
    };
    return impl_->locked(fmt::format("read task {}", id), body);
}

Result<std::vector<TaskRow>> Store::tasks(bool include_final, TaskId after, std::size_t limit) {
    const std::string where =
        include_final ? "" : fmt::format(" AND state IN ({})", live_states_sql());
    return impl_->locked("list tasks", [&](SQLite::Database& db) -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id > ?{} ORDER BY id{}",
                                             kTaskColumns, where, limit_sql(limit)));
        st.bind(1, after);
        return read_tasks(st);
    });
}

Result<std::vector<TaskRow>> Store::tasks_by_id(std::span<const TaskId> ids) {
    if (ids.empty()) {
        return std::vector<TaskRow>{};
    }
    return impl_->locked("read tasks", [&](SQLite::Database& db) -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id IN ({}) ORDER BY id",
                                             task_columns_without_env(), id_list_sql(ids)));
        return read_tasks(st);
    });
}

Result<std::vector<TaskId>> Store::ids_in_state(TaskState state, std::size_t limit) {
    return impl_->locked("list task ids by state",
                         [&](SQLite::Database& db) -> Result<std::vector<TaskId>> {
        SQLite::Statement st(db, fmt::format("SELECT id FROM tasks WHERE state = ? ORDER BY id{}",
                                             limit_sql(limit)));
        st.bind(1, std::string(to_string(state)));
        std::vector<TaskId> out;
        while (st.executeStep()) {
            out.push_back(st.getColumn(0).getInt64());
        }
        return out;
    });
}

Result<std::size_t> Store::waiting_count(uid_t uid) {
    return impl_->locked("count a user's waiting tasks",
                         [&](SQLite::Database& db) -> Result<std::size_t> {
        SQLite::Statement st(db, fmt::format("SELECT count(*) FROM tasks WHERE uid = ? AND "
                                             "state IN ({})",
                                             waiting_states_sql()));
        st.bind(1, static_cast<std::int64_t>(uid));
        st.executeStep();
        return static_cast<std::size_t>(st.getColumn(0).getInt64());
    });
}

Result<std::vector<StateCount>> Store::live_counts() {
    return impl_->locked("count live tasks by user and state",
                         [&](SQLite::Database& db) -> Result<std::vector<StateCount>> {
        // The index (state, uid) answers the grouping alone; one row per user gives the name.
        SQLite::Statement st(
            db, fmt::format("SELECT c.uid, c.state, c.n, (SELECT user FROM tasks t WHERE t.state = "
                            "c.state AND t.uid = c.uid LIMIT 1) FROM (SELECT state, uid, count(*) AS n FROM tasks "
                            "WHERE state IN ({}) GROUP BY state, uid) c ORDER BY c.uid, c.state",
                            live_states_sql()));
        std::vector<StateCount> out;
        while (st.executeStep()) {
            const auto state = parse_task_state(st.getColumn(1).getString());
            if (!state) {
                continue;
            }
            out.push_back(StateCount{static_cast<uid_t>(st.getColumn(0).getInt64()),
                                     st.getColumn(3).getString(), *state,
                                     static_cast<std::size_t>(st.getColumn(2).getInt64())});
        }
        return out;
    });
}

Result<std::map<TaskState, std::size_t>> Store::state_counts() {
    return impl_->locked("count tasks by state",
                         [&](SQLite::Database& db) -> Result<std::map<TaskState, std::size_t>> {
        SQLite::Statement st(db, "SELECT state, count(*) FROM tasks GROUP BY state");
        std::map<TaskState, std::size_t> out;
        while (st.executeStep()) {
            if (const auto state = parse_task_state(st.getColumn(0).getString())) {
                out[*state] = static_cast<std::size_t>(st.getColumn(1).getInt64());
            }
        }
        return out;
    });
}

Result<std::vector<TaskRow>> Store::waiting_tasks_without_env(TaskId after, std::size_t limit) {
    return impl_->locked("list waiting tasks", [&](SQLite::Database& db)
                                                   -> Result<std::vector<TaskRow>> {
        SQLite::Statement st(db, fmt::format("SELECT {} FROM tasks WHERE id > ? AND state IN ({}) "
                                             "ORDER BY id{}",
                                             task_columns_without_env(), waiting_states_sql(),
                                             limit_sql(limit)));
        st.bind(1, after);
        return read_tasks(st);
    });
}

Result<void> Store::insert_attempt(const AttemptRow& attempt) {
    const std::string op =
        fmt::format("insert attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kInsertAttempt);
        bind_attempt(st, attempt);
        st.exec();
        return {};
    });
}

Result<void> Store::update_attempt(const AttemptRow& attempt) {
    const std::string op =
        fmt::format("update attempt {} of task {}", attempt.number, attempt.task);
    return impl_->write(op, [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, kUpdateAttempt);
        bind_attempt(st, attempt);
        if (st.exec() == 0) {
            return fail(ErrorCode::NotFound,
                        fmt::format("{} in {}: no such attempt", op, impl_->path));
        }
        return {};
    });
}

Result<void> Store::set_attempt_peak(TaskId task, int number, const std::map<int, MiB>& peak_mib) {
    const std::string op = fmt::format("record the peak memory of attempt {} of task {}", number,
                                       task);
    auto body = [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(
            db, "UPDATE attempts SET peak_mib_json = ? WHERE task_id = ? AND number = ?");
        st.bind(1, peak_to_json(peak_mib).dump());
        st.bind(2, task);
        st.bind(3, number);
        st.exec();
        return {};
    };
    return impl_->locked(op, body);
}

Result<void> Store::set_attempt_energy(TaskId task, int number, double energy_j) {
    const std::string op = fmt::format("record the energy of attempt {} of task {}", number, task);
    auto body = [&](SQLite::Database& db) -> Result<void> {
        SQLite::Statement st(db, "UPDATE attempts SET energy_j = ? WHERE task_id = ? AND number = ?");
        st.bind(1, energy_j);
        st.bind(2, task);
        st.bind(3, number);
        st.exec();
        return {};
    };
    return impl_->locked(op, body);
}

namespace {

// Tasks matching `where` (bound by `bind`) with their attempts, one query each.
template <typename Bind>
// Tasks (without their environments: no listing of finished tasks shows one) and their
// attempts, at most `limit` (0: all).
Result<std::vector<FinishedTask>> tasks_with_attempts(SQLite::Database& db,
                                                      const std::string& where,
                                                      const std::string& order, const Bind& bind,
                                                      std::size_t limit = 0) {
    std::vector<FinishedTask> out;
    std::map<TaskId, std::size_t> index;
    std::vector<TaskId> ids;
    SQLite::Statement tasks(db, fmt::format("SELECT {} FROM tasks WHERE {} ORDER BY {}{}",
                                            task_columns_without_env(), where, order,
                                            limit_sql(limit)));
    bind(tasks);
    while (tasks.executeStep()) {
        index[tasks.getColumn(0).getInt64()] = out.size();
        ids.push_back(tasks.getColumn(0).getInt64());
        out.push_back(FinishedTask{read_task(tasks), {}});
    }
    if (ids.empty()) {
        return out;
    }
    SQLite::Statement attempts(
        db, fmt::format("SELECT {} FROM attempts WHERE task_id IN ({}) ORDER BY task_id, number",
                        kAttemptColumns, id_list_sql(ids)));
    while (attempts.executeStep()) {
        AttemptRow a = read_attempt(attempts);
        if (auto it = index.find(a.task); it != index.end()) {
            out[it->second].attempts.push_back(std::move(a));
        }
    }
    return out;
}

}  // namespace

Result<std::vector<FinishedTask>> Store::finished_tasks(const FinishedQuery& query) {
    std::string states;
    for (TaskState s : all_task_states()) {
        const bool asked = query.states.empty() ||
                           std::find(query.states.begin(), query.states.end(), s) !=
                               query.states.end();
        if (is_final(s) && asked) {
            states += fmt::format("{}'{}'", states.empty() ? "" : ", ", to_string(s));
        }
    }
    if (states.empty()) {
        return std::vector<FinishedTask>{};  // only live states asked for: nothing has finished
    }
    // The state names are constants, not user input; the user and the time are bound.
    const std::string where =
        fmt::format("id > ? AND state IN ({}) AND COALESCE(finished_at, submitted_at) >= ?{}",
                    states, query.user.empty() ? "" : " AND user = ?");
    const auto bind = [&](SQLite::Statement& st) {
        st.bind(1, query.after);
        st.bind(2, query.since);
        if (!query.user.empty()) {
            st.bind(3, query.user);
        }
    };
    return impl_->locked("list finished tasks", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "id", bind, query.limit);
    });
}

Result<std::vector<FinishedTask>> Store::tasks_between(const SpanQuery& query) {
    // `ran`: only tasks with an attempt in the span (what a chart of the GPUs draws).
    const std::string where = fmt::format(
        "id > ? AND submitted_at <= ? AND (finished_at IS NULL OR finished_at >= ?){}",
        query.ran ? " AND EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = tasks.id AND "
                    "a.started_at <= ? AND (a.ended_at IS NULL OR a.ended_at >= ?))"
                  : "");
    const auto bind = [&](SQLite::Statement& st) {
        st.bind(1, query.after);
        st.bind(2, query.until);
        st.bind(3, query.since);
        if (query.ran) {
            st.bind(4, query.until);
            st.bind(5, query.since);
        }
    };
    return impl_->locked("list the tasks of a time span", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "id", bind, query.limit);
    });
}

Result<std::vector<FinishedTask>> Store::recently_finished(int limit) {
    // One scan of tasks (finished_at has no index): retention keeps the table to weeks of work.
    const std::string where = fmt::format(
        "id IN (SELECT id FROM tasks WHERE finished_at IS NOT NULL ORDER BY finished_at DESC "
        "LIMIT {})",
        std::max(limit, 0));
    return impl_->locked("list recently finished tasks", [&](SQLite::Database& db) {
        return tasks_with_attempts(db, where, "finished_at DESC, id DESC",
                                   [](SQLite::Statement&) {});
    });
}

Result<std::vector<AttemptRow>> Store::attempts(TaskId task) {
    const std::string sql =
        fmt::format("SELECT {} FROM attempts WHERE task_id = ? ORDER BY number", kAttemptColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::vector<AttemptRow>> {
        SQLite::Statement st(db, sql);
        st.bind(1, task);
        return read_attempts(st);
    };
    return impl_->locked(fmt::format("list attempts of task {}", task), body);
}

Result<std::vector<AttemptRow>> Store::open_attempts() {
    const std::string sql = fmt::format(
        "SELECT {} FROM attempts WHERE ended_at IS NULL ORDER BY task_id, number", kAttemptColumns);
    const auto body = [&](SQLite::Database& db) -> Result<std::vector<AttemptRow>> {
        SQLite::Statement st(db, sql);
        return read_attempts(st);
    };
    return impl_->locked("list open attempts", body);
}

Result<std::map<TaskId, double>> Store::latest_attempt_starts(std::span<const TaskId> ids) {
    if (ids.empty()) {
        return std::map<TaskId, double>{};
    }
    // The subquery walks the attempts' primary key (task_id, number) backwards: one row each.
    const std::string sql = fmt::format(
        "SELECT t.id, (SELECT a.started_at FROM attempts a WHERE a.task_id = t.id "
        "ORDER BY a.number DESC LIMIT 1) FROM tasks t WHERE t.id IN ({})",
        id_list_sql(ids));
    const auto body = [&](SQLite::Database& db) -> Result<std::map<TaskId, double>> {
        SQLite::Statement st(db, sql);
        std::map<TaskId, double> starts;
        while (st.executeStep()) {
            if (!st.getColumn(1).isNull()) {
                starts.emplace(st.getColumn(0).getInt64(), st.getColumn(1).getDouble());
            }
        }
        return starts;
    };
    return impl_->locked("list the starts of the tasks' latest attempts", body);
}

Result<std::int64_t> Store::add_event(const EventRow& event) {
    return impl_->write(
        fmt::format("add event '{}' of task {}", event.kind, event.task),
        [&](SQLite::Database& db) -> Result<std::int64_t> {
            SQLite::Statement st(
                db, "INSERT INTO events (time, task_id, kind, message) VALUES (?, ?, ?, ?)");
            st.bind(1, event.time);
            st.bind(2, event.task);
            st.bind(3, event.kind);
            st.bind(4, event.message);
            st.exec();
            return db.getLastInsertRowid();
        });
}

Result<void> Store::add_events(std::span<const EventRow> events) {
    if (events.empty()) {
        return {};
    }
    return impl_->write(
        fmt::format("add {} events, the first '{}' of task {}", events.size(),
                    events.front().kind, events.front().task),
        [&](SQLite::Database& db) -> Result<void> {
            SQLite::Statement st(
                db, "INSERT INTO events (time, task_id, kind, message) VALUES (?, ?, ?, ?)");
            for (const EventRow& e : events) {
                st.reset();
                st.bind(1, e.time);
                st.bind(2, e.task);
                st.bind(3, e.kind);
                st.bind(4, e.message);
                st.exec();
            }
            return {};
        });
}

// A negative limit means no limit (SQLite's LIMIT semantics).
Result<std::vector<EventRow>> Store::events(std::int64_t after_id, TaskId task, int limit) {
    // Two statements rather than "(? = 0 OR task_id = ?)", which would keep SQLite from using
    // the task_id index.
    const std::string sql = fmt::format(
        "SELECT id, time, task_id, kind, message FROM events WHERE id > ?{} ORDER BY id LIMIT ?",
        task == 0 ? "" : " AND task_id = ?");
    return impl_->locked("list events", [&](SQLite::Database& db) -> Result<std::vector<EventRow>> {
        SQLite::Statement st(db, sql);
        int index = 1;
        st.bind(index++, after_id);
        if (task != 0) {
            st.bind(index++, task);
        }
        st.bind(index, limit);
        std::vector<EventRow> rows;
        while (st.executeStep()) {
            rows.push_back(read_event(st));
        }
        return rows;
    });
}

Result<void> Store::add_gpu_samples(const std::vector<GpuSampleRow>& samples) {
    if (samples.empty()) {
        return {};
    }
    return impl_->write(fmt::format("add {} GPU samples", samples.size()),
                        [&](SQLite::Database& db) -> Result<void> {
                            SQLite::Statement st(
                                db,
                                "INSERT INTO gpu_samples (time, gpu, free_mib, used_mib, util, "
                                "smact, smocc, drama, power_w, energy_j) VALUES (?, ?, ?, ?, ?, "
                                "?, ?, ?, ?, ?)");
                            for (const GpuSampleRow& s : samples) {
                                bind_sample(st, s);
                                st.exec();
                                st.reset();
                            }
                            return {};
                        });
}

Result<std::int64_t> Store::prune_history(double before) {
    // Finished tasks go as their events do; their attempts first (counted), though the foreign
    // key would take them along.
    const std::string finished = fmt::format(
        "SELECT id FROM tasks WHERE state IN ({}) AND COALESCE(finished_at, submitted_at) < ?",
        final_states_sql());
    return impl_->write("drop GPU samples, events and finished tasks past their retention",
                        [&](SQLite::Database& db) -> Result<std::int64_t> {
                            SQLite::Statement samples(db, "DELETE FROM gpu_samples WHERE time < ?");
                            samples.bind(1, before);
                            std::int64_t dropped = samples.exec();
                            SQLite::Statement events(db, "DELETE FROM events WHERE time < ?");
                            events.bind(1, before);
                            dropped += events.exec();
                            SQLite::Statement attempts(
                                db, "DELETE FROM attempts WHERE task_id IN (" + finished + ")");
                            attempts.bind(1, before);
                            dropped += attempts.exec();
                            SQLite::Statement tasks(db, "DELETE FROM tasks WHERE id IN (" +
                                                            finished + ")");
                            tasks.bind(1, before);
                            dropped += tasks.exec();
                            return dropped;
                        });
}

// Samples with time >= since, oldest first (GPU index breaks ties).
Result<std::vector<GpuSampleRow>> Store::gpu_sample_buckets(double since, double until,
                                                            int buckets) {
    buckets = std::max(buckets, 1);
    const double width = until > since ? (until - since) / buckets : 1.0;
    // Grouped in SQL, so an answer holds at most `buckets` rows per GPU however long the span:
    // each the first sample's time and the largest of each reading (NULL, a missing reading,
    // counts as none, as MAX does).
    const std::string sql = fmt::format(
        "SELECT MIN(time), gpu, MIN(free_mib), MAX(used_mib), MAX(util), MAX(smact), MAX(smocc), "
        "MAX(drama), MAX(power_w), MAX(energy_j), "
        "MIN(CAST((time - ?1) / ?2 AS INTEGER), ?3) AS bucket "
        "FROM gpu_samples WHERE time >= ?1 AND time <= ?4 GROUP BY gpu, bucket "
        "ORDER BY gpu, bucket");
    return impl_->locked("list GPU samples",
                         [&](SQLite::Database& db) -> Result<std::vector<GpuSampleRow>> {
                             SQLite::Statement st(db, sql);
                             st.bind(1, since);
                             st.bind(2, width);
                             st.bind(3, buckets - 1);
                             st.bind(4, until);
                             std::vector<GpuSampleRow> rows;
                             while (st.executeStep()) {
                                 rows.push_back(read_sample(st));
                             }
                             return rows;
                         });
}

Result<std::vector<GpuSampleRow>> Store::gpu_samples(double since, int gpu) {
    const std::string sql = fmt::format(
        "SELECT time, gpu, free_mib, used_mib, util, smact, smocc, drama, power_w, energy_j "
        "FROM gpu_samples WHERE time >= ?{} ORDER BY time, gpu",
        gpu < 0 ? "" : " AND gpu = ?");
    return impl_->locked("list GPU samples",
                         [&](SQLite::Database& db) -> Result<std::vector<GpuSampleRow>> {
                             SQLite::Statement st(db, sql);
                             st.bind(1, since);
                             if (gpu >= 0) {
                                 st.bind(2, gpu);
                             }
                             std::vector<GpuSampleRow> rows;
                             while (st.executeStep()) {
                                 rows.push_back(read_sample(st));
                             }
                             return rows;
                         });
}

}  // namespace carma::store

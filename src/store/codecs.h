#pragma once
// Private to src/store/: how tasks and attempts are kept in their tables. The JSON of their JSON
// columns, their column lists and statements, binding a row to those and reading one back, and
// the SQL text (state lists, id lists, limits) the queries over them are built from. Shared by
// tasks.cpp, accounting.cpp and store.cpp. Readers throw on a row they cannot decode (naming the
// task), and so do SQLite calls: run them inside Store::Impl::locked().

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <nlohmann/json.hpp>

#include "core/result.h"
#include "store/records.h"

namespace carma::store::detail {

// ---- JSON columns -----------------------------------------------------------------------------

nlohmann::json memory_to_json(const MemoryInfo& m);
MemoryInfo memory_from_json(const nlohmann::json& j);
nlohmann::json learned_to_json(const Learned& l);
Learned learned_from_json(const nlohmann::json& j);
nlohmann::json spec_to_json(const TaskSpec& s);
TaskSpec spec_from_json(const nlohmann::json& j);

// A task's JSON columns, encoded before its transaction begins.
struct EncodedTask {
    std::string spec_json;
    std::string env_json;
};

// Refuses a spec that JSON cannot hold (not finite numbers, text that is not UTF-8), naming the
// task.
Result<EncodedTask> encode_task(const TaskRow& task);

// ---- tasks ------------------------------------------------------------------------------------

// A state column; throws naming the task when it is none CARMA knows.
TaskState decode_state(TaskId id, const std::string& text);

inline constexpr const char* kTaskColumns =
    "id, name, spec_json, uid, gid, user, workdir, env_json, state, attempts, max_attempts, "
    "submitted_at, finished_at, message";

inline constexpr const char* kInsertTask =
    "INSERT INTO tasks (name, spec_json, uid, gid, user, workdir, env_json, state, attempts, "
    "max_attempts, submitted_at, finished_at, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "?, ?)";

inline constexpr const char* kUpdateTask =
    "UPDATE tasks SET name = ?, spec_json = ?, uid = ?, gid = ?, user = ?, workdir = ?, "
    "env_json = ?, state = ?, attempts = ?, max_attempts = ?, submitted_at = ?, finished_at = ?, "
    "message = ? WHERE id = ?";

// Binds every column but the id, in kInsertTask order; returns the next parameter index.
int bind_task(SQLite::Statement& st, const TaskRow& t, const EncodedTask& encoded);

// Reads a row selected with kTaskColumns.
TaskRow read_task(const SQLite::Statement& st);
std::vector<TaskRow> read_tasks(SQLite::Statement& st);

// kTaskColumns with an empty environment in env_json's place (reads that do not need it).
std::string task_columns_without_env();

// ---- attempts ---------------------------------------------------------------------------------

inline constexpr const char* kAttemptColumns =
    "task_id, number, gpus_json, dir, shim_pid, started_at, ended_at, outcome, exit_code, signal, "
    "recovered, peak_mib_json, energy_j, node, slurm_job, charged_gpu_s, slowdown, cores_json, "
    "total_cpu_s, max_rss_mib";

inline constexpr const char* kInsertAttempt =
    "INSERT INTO attempts (gpus_json, dir, shim_pid, started_at, ended_at, outcome, exit_code, "
    "signal, recovered, peak_mib_json, energy_j, node, slurm_job, charged_gpu_s, slowdown, "
    "cores_json, total_cpu_s, max_rss_mib, task_id, number) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

inline constexpr const char* kUpdateAttempt =
    "UPDATE attempts SET gpus_json = ?, dir = ?, shim_pid = ?, started_at = ?, ended_at = ?, "
    "outcome = ?, exit_code = ?, signal = ?, recovered = ?, peak_mib_json = ?, energy_j = ?, "
    "node = ?, slurm_job = ?, charged_gpu_s = ?, slowdown = ?, cores_json = ?, total_cpu_s = ?, "
    "max_rss_mib = ? WHERE task_id = ? AND number = ?";

// Binds every parameter of kInsertAttempt or kUpdateAttempt.
void bind_attempt(SQLite::Statement& st, const AttemptRow& a);

// Reads a row selected with kAttemptColumns.
AttemptRow read_attempt(const SQLite::Statement& st);
std::vector<AttemptRow> read_attempts(SQLite::Statement& st);

// ---- SQL text ---------------------------------------------------------------------------------

// The live, final or waiting states, quoted for an IN list.
std::string live_states_sql();
std::string final_states_sql();
std::string waiting_states_sql();

// " LIMIT n", or nothing for no limit (0).
std::string limit_sql(std::size_t limit);

// Task ids as an SQL list; integers, never user text.
std::string id_list_sql(std::span<const TaskId> ids);

}  // namespace carma::store::detail

#pragma once
// History: what each finished attempt really did, kept per command so the knowledge rule
// (core/knowledge.h) can plan the next run of the same command (core/fingerprint.h) from it.
// One row per attempt that started: its fingerprints, the most GPU memory it held (per GPU and
// the largest of them), its run time, its own mean SM activity while it ran, how it ended, and
// whether CARMA saw it on its GPUs at all (`unobserved`). Rows are the knowledge, so they are
// not dropped with old events and samples; instead each command keeps its newest
// HistoryLimits::per_command rows and each family its newest HistoryLimits::per_family.
// The SQL lives here; Store (store.h) runs it under its lock and in its transactions. A caller
// that already holds a transaction on the store's connection may call insert_history() in it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/knowledge.h"
#include "core/task.h"
#include "core/units.h"

namespace SQLite {
class Database;
}

namespace carma::store {

struct HistoryRow {
    TaskId task = 0;
    int attempt = 0;                   // 1-based attempt number
    std::string fingerprint;           // TaskFingerprint::exact
    std::string family;                // TaskFingerprint::family
    std::int64_t uid = 0;              // the owner, for people reading the table
    int gpus = 1;
    std::map<int, MiB> peak_per_gpu;   // GPU index -> the most its processes held there
    MiB peak_mib = 0;                  // the largest of peak_per_gpu (0 when never seen)
    double run_s = 0;                  // start to end, on the scheduler's clock (x time_scale)
    std::optional<double> activity;    // its own mean SM activity while it ran, 0..1
    std::string outcome;               // to_string(AttemptOutcome): "succeeded", "out-of-memory"
    double ended_at = 0;               // unix seconds
    // "" when its processes were seen on its GPUs; else why not, to_string(Observation)
    // ("not-seen", "no-memory"): such a row teaches its run time only (core/knowledge.h).
    std::string unobserved;
    // Time it ran with GPU-active co-runners, on the scheduler's clock: 0 makes its run time
    // solo history; unknown for rows recorded before schema step 8.
    std::optional<double> shared_s;
    // Where it shared and taught the predictor's error (core/speed_correction.h): the sharing
    // class and the factor k; "" and unknown otherwise.
    std::string sharing_class;
    std::optional<double> speed_k;
};

// One learned factor of the speed correction, as the history keeps it.
struct SpeedFactorRow {
    std::string family;
    std::string sharing_class;
    double k = 1;
};

struct HistoryLimits {
    int per_command = 50;  // newest rows kept per fingerprint
    int per_family = 200;  // newest rows kept per family (a sweep makes many fingerprints)
};

// What the knowledge rule reads of a row.
RunFacts run_facts(const HistoryRow& row);
std::vector<RunFacts> run_facts(const std::vector<HistoryRow>& rows);

// Which rows a history query selects.
enum class HistoryKey {
    Command,  // the same fingerprint
    Family,   // the same family, other fingerprints (see history_rows)
};

// Inserts (or, for the same task and attempt, replaces: a retried write records once) and
// trims to `limits`. Throws SQLite::Exception; run it inside a transaction.
void insert_history(SQLite::Database& db, const HistoryRow& row, const HistoryLimits& limits);

// The newest `newest` rows for `key`, oldest first. For HistoryKey::Family, rows of the family
// whose fingerprint is `exclude_fingerprint` are left out (they are the command's own history).
// Throws SQLite::Exception.
std::vector<HistoryRow> history_rows(SQLite::Database& db, HistoryKey key,
                                     const std::string& value,
                                     const std::string& exclude_fingerprint, int newest);

// Every row's speed factor, oldest first. Throws SQLite::Exception.
std::vector<SpeedFactorRow> speed_factor_rows(SQLite::Database& db);

// The median run time of the rows that ran alone and succeeded with their processes seen: what
// the command takes alone. Unknown without such a row.
std::optional<double> solo_run_s(const std::vector<HistoryRow>& rows);

}  // namespace carma::store

#include "store/history.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "store/columns.h"
#include "store/peak_json.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

namespace {

using nlohmann::json;

constexpr const char* kColumns =
    "task_id, attempt, fingerprint, family, uid, gpus, peak_mib, peak_json, run_s, activity, "
    "outcome, ended_at, unobserved, shared_s, sharing_class, speed_k";

std::string peak_text(const std::map<int, MiB>& peak) { return peak_to_json(peak).dump(); }

std::map<int, MiB> peak_from_text(const std::string& text) {
    std::map<int, MiB> peak;
    const json j = json_too_deep_at(text) ? json() : json::parse(text, nullptr, false);
    if (!j.is_object()) {
        return peak;  // a damaged cell costs one row's per-GPU detail, not the whole query
    }
    for (const auto& [gpu, mib] : j.items()) {
        int index = 0;
        const auto [end, ec] = std::from_chars(gpu.data(), gpu.data() + gpu.size(), index);
        if (ec == std::errc() && end == gpu.data() + gpu.size() && mib.is_number_integer()) {
            peak[index] = mib.get<MiB>();
        }
    }
    return peak;
}

HistoryRow read_row(SQLite::Statement& st) {
    HistoryRow r;
    r.task = st.getColumn(0).getInt64();
    r.attempt = st.getColumn(1).getInt();
    r.fingerprint = st.getColumn(2).getString();
    r.family = st.getColumn(3).getString();
    r.uid = st.getColumn(4).getInt64();
    r.gpus = st.getColumn(5).getInt();
    r.peak_mib = st.getColumn(6).getInt64();
    r.peak_per_gpu = peak_from_text(st.getColumn(7).getString());
    r.run_s = st.getColumn(8).getDouble();
    if (!st.getColumn(9).isNull()) {
        r.activity = st.getColumn(9).getDouble();
    }
    r.outcome = st.getColumn(10).getString();
    r.ended_at = st.getColumn(11).getDouble();
    if (!st.getColumn(12).isNull()) {
        r.unobserved = st.getColumn(12).getString();
    }
    if (!st.getColumn(13).isNull()) {
        r.shared_s = st.getColumn(13).getDouble();
    }
    if (!st.getColumn(14).isNull()) {
        r.sharing_class = st.getColumn(14).getString();
    }
    if (!st.getColumn(15).isNull()) {
        r.speed_k = st.getColumn(15).getDouble();
    }
    return r;
}

// Keeps the newest `keep` rows whose `column` equals `value`.
void trim(SQLite::Database& db, const char* column, const std::string& value, int keep) {
    SQLite::Statement st(db, std::string("DELETE FROM history WHERE ") + column +
                                 " = ?1 AND id NOT IN (SELECT id FROM history WHERE " + column +
                                 " = ?1 ORDER BY id DESC LIMIT ?2)");
    st.bind(1, value);
    st.bind(2, keep);
    st.exec();
}

}  // namespace

RunFacts run_facts(const HistoryRow& row) {
    RunFacts f;
    f.peak_mib = row.peak_mib;
    f.run_s = row.run_s;
    f.activity = row.activity;
    f.succeeded = row.outcome == "succeeded";
    f.out_of_memory = row.outcome == "out-of-memory";
    f.observed = row.unobserved.empty();
    return f;
}

std::vector<RunFacts> run_facts(const std::vector<HistoryRow>& rows) {
    std::vector<RunFacts> out;
    out.reserve(rows.size());
    for (const HistoryRow& r : rows) {
        out.push_back(run_facts(r));
    }
    return out;
}

void insert_history(SQLite::Database& db, const HistoryRow& row, const HistoryLimits& limits) {
    // REPLACE on (task_id, attempt): the daemon retries an attempt's end until it is stored,
    // and one attempt must count once. The replaced row gets a new id, i.e. counts as newest.
    SQLite::Statement st(db, std::string("INSERT OR REPLACE INTO history (") + kColumns +
                                 ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    st.bind(1, row.task);
    st.bind(2, row.attempt);
    st.bind(3, row.fingerprint);
    st.bind(4, row.family);
    st.bind(5, row.uid);
    st.bind(6, row.gpus);
    st.bind(7, row.peak_mib);
    st.bind(8, peak_text(row.peak_per_gpu));
    st.bind(9, row.run_s);
    bind_optional(st, 10, row.activity);
    st.bind(11, row.outcome);
    st.bind(12, row.ended_at);
    bind_text_or_null(st, 13, row.unobserved);
    bind_optional(st, 14, row.shared_s);
    bind_text_or_null(st, 15, row.sharing_class);
    bind_optional(st, 16, row.speed_k);
    st.exec();
    trim(db, "fingerprint", row.fingerprint, std::max(1, limits.per_command));
    trim(db, "family", row.family, std::max(1, limits.per_family));
}

std::vector<HistoryRow> history_rows(SQLite::Database& db, HistoryKey key,
                                     const std::string& value,
                                     const std::string& exclude_fingerprint, int newest) {
    // Newest first to apply the limit, then turned around: the rule reads oldest first.
    const std::string where = key == HistoryKey::Command
                                  ? "fingerprint = ?1"
                                  : "family = ?1 AND fingerprint != ?3";
    SQLite::Statement st(db, std::string("SELECT ") + kColumns + " FROM history WHERE " + where +
                                 " ORDER BY id DESC LIMIT ?2");
    st.bind(1, value);
    st.bind(2, newest);
    if (key == HistoryKey::Family) {
        st.bind(3, exclude_fingerprint);
    }
    std::vector<HistoryRow> rows;
    while (st.executeStep()) {
        rows.push_back(read_row(st));
    }
    std::reverse(rows.begin(), rows.end());
    return rows;
}

std::vector<SpeedFactorRow> speed_factor_rows(SQLite::Database& db) {
    SQLite::Statement st(db,
                         "SELECT family, sharing_class, speed_k FROM history WHERE speed_k IS NOT "
                         "NULL AND sharing_class IS NOT NULL ORDER BY id");
    std::vector<SpeedFactorRow> rows;
    while (st.executeStep()) {
        rows.push_back({st.getColumn(0).getString(), st.getColumn(1).getString(),
                        st.getColumn(2).getDouble()});
    }
    return rows;
}

std::optional<double> solo_run_s(const std::vector<HistoryRow>& rows) {
    std::vector<double> solo;
    for (const HistoryRow& r : rows) {
        if (r.outcome == "succeeded" && r.unobserved.empty() && r.shared_s && *r.shared_s <= 0 &&
            r.run_s > 0) {
            solo.push_back(r.run_s);
        }
    }
    if (solo.empty()) {
        return std::nullopt;
    }
    std::sort(solo.begin(), solo.end());
    const std::size_t n = solo.size();
    return n % 2 == 1 ? solo[n / 2] : (solo[n / 2 - 1] + solo[n / 2]) / 2;
}

// ---- Store's queries of the history -----------------------------------------------------------

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

}  // namespace carma::store

// Store's queries of the gpu_samples table.

#include <algorithm>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/columns.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace carma::store {

namespace {

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

}  // namespace

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

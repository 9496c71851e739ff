#pragma once
// Task records as the API shows them (docs/api.md) and submissions as the API accepts them.

#include <optional>

#include <nlohmann/json.hpp>

#include "core/controls.h"

#include "api/service.h"
#include "store/records.h"

namespace carma::daemon {

// A value, or JSON null where there is none.
template <typename T>
nlohmann::json json_or_null(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json task_to_json(const store::TaskRow& task);
// What the knowledge rule made of a task: {need_mib, margin_mib, lower_bound_mib, runs,
// duration_s, activity, basis}; unknown figures are null.
nlohmann::json learned_to_json(const Learned& learned);
nlohmann::json attempt_to_json(const store::AttemptRow& attempt);

// The fields of a POST /v1/tasks body, checked for shape only (types, ranges, unknown fields);
// what needs the server (GPU limits, paths, the command) is checked by the daemon.
// `hold: true` makes the row Held; `array` is read by array_from_submission.
api::ApiResult<store::TaskRow> task_from_submission(const nlohmann::json& body);
// The indices of a submission's `array` ("0-9", "0-9%2" or [0, 1, ...]) and its throttle (the
// "%2"); no indices when it has none.
api::ApiResult<ArraySpec> array_from_submission(const nlohmann::json& body);
// `warnings`: what the submitter's side noticed in the task file (a .rad file's lines it does
// not read), kept in the task's events; at most 20 strings of at most 500 bytes.
api::ApiResult<std::vector<std::string>> warnings_from_submission(const nlohmann::json& body);

// Whether a page of `count` rows is a listing's last: one that came out short (api::Page).
inline bool is_last_page(std::size_t count, const api::Page& page) {
    return count == 0 || count < page.limit;
}

// A listing's "next": the last id of a full page, after which there may be more; null after the
// last page.
inline std::string next_page_json(std::size_t count, TaskId last, const api::Page& page) {
    return is_last_page(count, page) ? std::string("null") : std::to_string(last);
}

// What a submission stores per task, in bytes (UserLimits::max_submit_bytes_per_task): every
// field a user gives (command line, environment, name, workdir, workload, output and error
// files, mail user, environments, the names of explicit variables), each dependency at what its
// row costs, and the task's own row. Counting some fields only let one request of 3 KB
// (`after` of 1,000 tasks on 4,000 members) store 227 MB.
std::size_t submission_bytes(const store::TaskRow& task);

// What the store spends on one dependency (its row: task, type, reference, index) and on a
// task's row beyond its text fields; round figures, of the order SQLite's rows take.
inline constexpr std::size_t kStoredDependencyBytes = 32;
inline constexpr std::size_t kStoredTaskRowBytes = 256;

}  // namespace carma::daemon

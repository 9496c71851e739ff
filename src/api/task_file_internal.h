#pragma once
// Private to src/api/: what the task-file parsers share. task_file.cpp holds the entry points
// and the I/O; task_file_yaml.cpp reads YAML documents, task_file_fields.cpp checks their fields
// and task_file_rad.cpp reads the paper's .rad files.

#include <string>

#include <yaml-cpp/yaml.h>

#include "api/task_file.h"
#include "core/result.h"

namespace carma::api {

// "source:line: what" with a 1-based line; without a line when the position is unknown.
tl::unexpected<Error> error_at(const TaskFileContext& ctx, int zero_based_line,
                               const std::string& what);

// The fields of a task file's top-level mapping into `r`: each a known name given once, with a
// value of its kind; the first that is not names its line.
Result<void> parse_fields(const YAML::Node& root, const TaskFileContext& ctx, SubmitRequest& r);

}  // namespace carma::api

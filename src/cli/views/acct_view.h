#pragma once
// `carma acct`'s table as pure functions: an answer of GET /v1/acct (docs/api.md), the columns
// and how times are written go in, the text comes out, like Slurm's sacct. The command around it
// is cli/commands/acct_command.cpp.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/result.h"

namespace carma::cli {

// The columns --format may name, in the order of the default table.
const std::vector<std::string>& acct_field_names();
// The columns of the default table.
const std::vector<std::string>& acct_default_fields();

// "id,user,state,wait" (any case, spaces around commas allowed) -> the fields in that order. An
// unknown field is an error naming it, the closest valid one, and every valid one.
Result<std::vector<std::string>> parse_acct_format(std::string_view text);

// How a unix time is written in the table (the command writes local ISO time).
using TimeText = std::function<std::string(double)>;

// The table of an answer of GET /v1/acct with these columns, then the totals per user.
std::string format_acct(const nlohmann::json& answer, const std::vector<std::string>& fields,
                        const TimeText& time_text);

// "8,250 J", "12.5 kJ", "3.25 MJ".
std::string format_energy(double joules);

}  // namespace carma::cli

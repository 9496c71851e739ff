#pragma once
// `--mem` and `--gpus` of submit and estimate, read one way: memory needs a unit (a bare number
// is refused, naming the three spellings); a task gets at least one whole GPU.

#include <string>

#include "core/result.h"
#include "core/units.h"

namespace carma::cli {

Result<MiB> parse_mem_flag(const std::string& text);
Result<int> check_gpus_flag(int gpus);

}  // namespace carma::cli

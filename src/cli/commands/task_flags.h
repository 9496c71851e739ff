#pragma once
// `--mem`, `--gpu-mem`, `--gpus` and `-c` of submit and estimate, read one way: memory needs a
// unit (a bare number is refused, naming the three spellings); a task gets whole GPUs or none.

#include <string>
#include <string_view>

#include "core/result.h"
#include "core/units.h"

namespace carma::cli {

// `flag` names it in errors (--mem, --gpu-mem).
Result<MiB> parse_mem_flag(const std::string& text, std::string_view flag = "--mem");
Result<int> check_gpus_flag(int gpus);
Result<int> check_cpus_flag(int cpus);

}  // namespace carma::cli

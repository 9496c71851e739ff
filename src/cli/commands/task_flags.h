#pragma once
// `--mem`, `--gpu-mem`, `--gpus` and `-c` of submit and estimate, read one way: memory needs a
// unit (a bare number is refused, naming the three spellings); a task gets whole GPUs or none.

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/units.h"

namespace carma::cli {

// `flag` names it in errors (--mem, --gpu-mem).
Result<MiB> parse_mem_flag(const std::string& text, std::string_view flag = "--mem");
Result<int> check_gpus_flag(int gpus);
Result<int> check_cpus_flag(int cpus);

// sbatch's --gres: "gpu", "gpu:N", "gpu:TYPE:N", a comma list of such. The GPUs it asks for;
// `notes` gets a line for each part CARMA does not use (a GPU type, other resources).
Result<int> parse_gres_flag(std::string_view text, std::vector<std::string>& notes);

}  // namespace carma::cli

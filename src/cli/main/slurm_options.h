#pragma once
// sbatch's options that `carma submit` does not take, each with what CARMA has instead (or why
// it has none): people come from Slurm with their habits, and "did you mean '--name'?" for
// `--nice` sends them the wrong way. Those CARMA does take under Slurm's spelling (-J, -t, -o,
// -e, -d/--dependency, -a/--array, -D/--chdir, --mail-type, --gres=gpu:N) are its own options.

#include <optional>
#include <string>
#include <string_view>

namespace carma::cli {

// For `command` ("carma submit") and an option as typed without its value ("--gres", "-p"):
// what CARMA does instead; nothing when the option is not one of Slurm's it knows.
std::optional<std::string> slurm_option_hint(std::string_view command, std::string_view option);
// The same for a `#SBATCH` line of a batch script: what CARMA does instead, alone.
std::optional<std::string_view> slurm_option_instead(std::string_view option);

}  // namespace carma::cli

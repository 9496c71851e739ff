#include "cli/main/slurm_options.h"

#include <array>

#include <fmt/format.h>

namespace carma::cli {

namespace {

struct SlurmOption {
    std::string_view names;  // the long name and, after a space, the short one
    std::string_view instead;
};

constexpr std::string_view kOneTask =
    "a CARMA task is one command on whole GPUs (`-g N`); it starts its own processes (torchrun, "
    "mpirun)";
constexpr std::string_view kGpus = "CARMA's is `-g N` (GPUs per task)";
constexpr std::string_view kPlacement = "CARMA chooses the GPUs itself; `carma gpus` shows them";

constexpr std::array<SlurmOption, 19> kSlurmOptions = {{
    {"--gpus-per-task", kGpus},
    {"--gpus-per-node", kGpus},
    {"--mem-per-gpu", "CARMA's `--mem SIZE` is the task's whole host memory (GPUs x SIZE); GPU "
                      "memory per GPU is `--gpu-mem SIZE`"},
    {"--mem-per-cpu", "CARMA's `--mem SIZE` is the task's whole host memory: give `-c N --mem` "
                      "with N x SIZE"},
    {"--priority", "CARMA sets priorities from fair share and age; `--nice N` lowers a task's "
                   "(only root may raise it with a negative N)"},
    {"--partition -p", "CARMA schedules one pool of GPUs, without partitions: leave it out"},
    {"--qos -q", "CARMA has no QOS; what one user may ask for and run is the daemon's `limits:` "
                 "(max_gpus_per_user, max_running_per_user)"},
    {"--account -A", "CARMA has no accounts; `carma acct --user U` reports by user"},
    {"--ntasks -n", kOneTask},
    {"--ntasks-per-node", kOneTask},
    {"--nodes -N", "a task runs on one node; `carma slurm up` runs CARMA over Slurm's nodes"},
    {"--constraint -C", kPlacement},
    {"--nodelist -w", kPlacement},
    {"--exclude -x", kPlacement},
    {"--wrap", "write the command after `--`: carma submit -- sh -c '...'"},
    {"--begin", "not supported; `-H` holds a task until `carma release`"},
    {"--open-mode", "--output and --error files are truncated by the first attempt and appended "
                    "to by later ones"},
    {"--signal", "at its time limit (-t) a task gets SIGTERM, then SIGKILL after the daemon's "
                 "--kill-grace"},
    {"--test-only", "`carma estimate` says what CARMA would plan with, without submitting"},
}};

}  // namespace

std::optional<std::string_view> slurm_option_instead(std::string_view option) {
    for (const SlurmOption& o : kSlurmOptions) {
        const std::size_t space = o.names.find(' ');
        const std::string_view long_name = o.names.substr(0, space);
        const std::string_view short_name =
            space == std::string_view::npos ? std::string_view() : o.names.substr(space + 1);
        if (option == long_name || (!short_name.empty() && option == short_name)) {
            return o.instead;
        }
    }
    return std::nullopt;
}

std::optional<std::string> slurm_option_hint(std::string_view command, std::string_view option) {
    if (command != "carma submit") {
        return std::nullopt;
    }
    if (const auto instead = slurm_option_instead(option)) {
        return fmt::format("sbatch's {} is not one of CARMA's options: {}", option, *instead);
    }
    return std::nullopt;
}

}  // namespace carma::cli

#pragma once
// What `carma submit` takes from the submitter's side, as sbatch does: the environment
// (`--export`), the Python environment the task runs in (`--conda NAME|PATH`, `--venv PATH`),
// and the executable, resolved against the submitter's PATH at submit time.

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/task_file.h"
#include "core/result.h"

namespace carma::api {

using EnvMap = std::map<std::string, std::string>;

// The process's own environment.
EnvMap current_environment();

struct ExportedEnv {
    EnvMap vars;
    // Variables left out, each "NAME (why)", for a note to the submitter.
    std::vector<std::string> dropped;
};

// `spec`: "ALL" (every variable), "NONE", or a comma list of NAME and NAME=VALUE items, which may
// start with ALL ("ALL,EPOCHS=3"). Variables that would change who or where the task runs
// (LD_PRELOAD, LD_AUDIT, CUDA_VISIBLE_DEVICES and friends, CUDA_MPS_*, CARMA_*) are dropped with
// a note; the shell's own bookkeeping (PWD, OLDPWD, SHLVL, _) silently; values that are not UTF-8
// (JSON cannot carry them) with a note.
Result<ExportedEnv> export_environment(std::string_view spec, const EnvMap& caller);

// A conda environment's prefix: `name_or_path` with a '/' is a path (relative to `cwd`); a name
// is looked up in the caller's conda setup (CONDA_ENVS_PATH/CONDA_ENVS_DIRS, the root of
// CONDA_EXE, MAMBA_ROOT_PREFIX, CONDA_ROOT, the root of CONDA_PREFIX, ~/.conda/envs, and the usual
// install places ~/miniconda3, ~/anaconda3, ~/miniforge3, ~/mambaforge, /opt/conda); "base" is
// the root itself. Errors say where it looked and what to do.
Result<std::string> resolve_conda(std::string_view name_or_path, const EnvMap& caller,
                                  const std::filesystem::path& cwd);

// A virtual environment's directory (relative to `cwd`); it must hold pyvenv.cfg or bin/python.
Result<std::string> resolve_venv(std::string_view path, const std::filesystem::path& cwd);

// `argv0` as the submitter's shell would find it: unchanged when it contains a '/', else the
// first executable regular file of that name in `path_list`. Errors name the PATH searched.
Result<std::string> resolve_command(const std::string& argv0, const std::string& path_list);

// What `carma submit` and `carma estimate` both do to a request so that the same command gets
// the same fingerprint: the Python environment resolved to its prefix (a conda name or a relative
// venv path), and argv[0] looked up in the caller's PATH with that environment's bin first.
Result<void> resolve_environment_and_command(SubmitRequest& request, const EnvMap& caller,
                                             const std::filesystem::path& cwd);

}  // namespace carma::api

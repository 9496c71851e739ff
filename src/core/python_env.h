#pragma once
// Activating a conda environment or a Python virtual environment for an attempt the way their
// own `activate` scripts do, without running a shell: the environment's bin directory goes first
// on PATH (replacing a previously active environment's), and the variables tools look at are set
// (conda: CONDA_PREFIX, CONDA_DEFAULT_ENV, CONDA_SHLVL, CONDA_PROMPT_MODIFIER; venv: VIRTUAL_ENV,
// VIRTUAL_ENV_PROMPT; PYTHONHOME is removed, as activate does). Scripts in a conda
// environment's etc/conda/activate.d are not run (they are shell code).

#include <string>
#include <utility>
#include <vector>

namespace carma {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// `env` must already hold PATH. `conda_prefix` and `venv` are absolute; empty = not used.
EnvList activate_python_env(EnvList env, const std::string& conda_prefix, const std::string& venv);

}  // namespace carma

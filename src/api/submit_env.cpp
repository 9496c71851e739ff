#include "api/submit_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.h"

extern char** environ;

namespace carma::api {

namespace fs = std::filesystem;

namespace {

// Where a task runs (GPUs, MPS) is CARMA's to set; code injected into every process it starts
// (LD_PRELOAD, LD_AUDIT) would run with the task's identity but not as the task declared.
std::optional<std::string> reason_to_drop(const std::string& name) {
    static const char* const where[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                                        "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                        "GPU_DEVICE_ORDINAL"};
    if (std::find(std::begin(where), std::end(where), name) != std::end(where) ||
        name.starts_with("CUDA_MPS_")) {
        return "CARMA sets which GPUs a task sees";
    }
    if (name == "LD_PRELOAD" || name == "LD_AUDIT") {
        return "it would load code into every process of the task";
    }
    if (name.starts_with("CARMA_")) {
        return "CARMA's own variables are set per attempt";
    }
    return std::nullopt;
}

// Not the task's business, and too common to note every time: the shell's own bookkeeping and
// where the `carma` client finds its daemon.
bool shell_bookkeeping(const std::string& name) {
    return name == "_" || name == "PWD" || name == "OLDPWD" || name == "SHLVL" ||
           name == "CARMA_SOCKET";
}

bool is_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

std::string upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

bool is_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

std::string get(const EnvMap& env, const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
}

}  // namespace

EnvMap current_environment() {
    EnvMap out;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view kv(*e);
        const std::size_t eq = kv.find('=');
        if (eq != std::string_view::npos && eq > 0) {
            out.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
        }
    }
    return out;
}

Result<ExportedEnv> export_environment(std::string_view spec, const EnvMap& caller) {
    ExportedEnv out;
    auto take = [&](const std::string& name, const std::string& value) {
        if (shell_bookkeeping(name)) {
            return;
        }
        if (auto why = reason_to_drop(name)) {
            out.dropped.push_back(fmt::format("{} ({})", name, *why));
        } else if (!is_utf8(value)) {
            out.dropped.push_back(fmt::format("{} (its value is not UTF-8)", name));
        } else {
            out.vars[name] = value;
        }
    };
    if (upper(spec) == "NONE") {
        return out;
    }
    const std::vector<std::string> items = split_list(spec, ',');
    for (std::size_t i = 0; i < items.size(); ++i) {
        const std::string& item = items[i];
        if (i == 0 && upper(item) == "ALL") {
            for (const auto& [k, v] : caller) {
                take(k, v);
            }
            continue;
        }
        const std::size_t eq = item.find('=');
        const std::string name = item.substr(0, eq);
        if (name.empty() || upper(item) == "ALL" || upper(item) == "NONE") {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--export '{}': give ALL, NONE, or a comma list of NAME and "
                                    "NAME=VALUE (ALL may come first)",
                                    spec));
        }
        if (eq != std::string::npos) {
            take(name, item.substr(eq + 1));
        } else if (auto it = caller.find(name); it != caller.end()) {
            take(name, it->second);
        }
    }
    return out;
}

Result<std::string> resolve_conda(std::string_view name_or_path, const EnvMap& caller,
                                  const fs::path& cwd) {
    const std::string given(name_or_path);
    if (given.empty()) {
        return fail(ErrorCode::InvalidArgument, "--conda needs an environment name or path");
    }
    if (given.find('/') != std::string::npos) {
        const fs::path prefix = (cwd / given).lexically_normal();
        if (!is_dir(prefix / "bin")) {
            return fail(ErrorCode::NotFound,
                        fmt::format("conda environment {} does not exist (no {}); check the "
                                    "path with `conda env list`",
                                    prefix.string(), (prefix / "bin").string()));
        }
        return prefix.string();
    }
    std::vector<fs::path> env_dirs;  // directories that hold environments by name
    for (const char* var : {"CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"}) {
        for (const std::string& d : split_list(get(caller, var), ':')) {
            if (!d.empty()) {
                env_dirs.emplace_back(d);
            }
        }
    }
    std::vector<fs::path> roots;
    if (const std::string exe = get(caller, "CONDA_EXE"); !exe.empty()) {
        roots.push_back(fs::path(exe).parent_path().parent_path());  // <root>/bin/conda
    }
    for (const char* var : {"MAMBA_ROOT_PREFIX", "CONDA_ROOT"}) {
        if (const std::string r = get(caller, var); !r.empty()) {
            roots.emplace_back(r);
        }
    }
    if (const std::string active = get(caller, "CONDA_PREFIX"); !active.empty()) {
        const std::size_t envs = active.rfind("/envs/");
        roots.emplace_back(envs == std::string::npos ? active : active.substr(0, envs));
    }
    if (const std::string home = get(caller, "HOME"); !home.empty()) {
        env_dirs.push_back(fs::path(home) / ".conda" / "envs");
        for (const char* dir : {"miniconda3", "anaconda3", "miniforge3", "mambaforge"}) {
            roots.push_back(fs::path(home) / dir);
        }
    }
    roots.emplace_back("/opt/conda");
    for (const fs::path& r : roots) {
        env_dirs.push_back(r / "envs");
    }
    std::vector<std::string> looked;
    if (given == "base") {
        for (const fs::path& r : roots) {
            if (is_dir(r / "bin") && is_dir(r / "envs")) {
                return r.lexically_normal().string();
            }
            looked.push_back(r.string());
        }
    } else {
        for (const fs::path& d : env_dirs) {
            if (is_dir(d / given / "bin")) {
                return (d / given).lexically_normal().string();
            }
            if (std::find(looked.begin(), looked.end(), d.string()) == looked.end()) {
                looked.push_back(d.string());
            }
        }
    }
    return fail(ErrorCode::NotFound,
                fmt::format("conda environment '{}' not found (looked in {}); create it "
                            "(`conda create -n {}`), or give its path with --conda PATH",
                            given, fmt::join(looked, ", "), given));
}

Result<std::string> resolve_venv(std::string_view path, const fs::path& cwd) {
    if (path.empty()) {
        return fail(ErrorCode::InvalidArgument, "--venv needs the virtual environment's path");
    }
    const fs::path dir = (cwd / std::string(path)).lexically_normal();
    std::error_code ec;
    if (!fs::exists(dir / "pyvenv.cfg", ec) && !fs::exists(dir / "bin" / "python", ec)) {
        return fail(ErrorCode::NotFound,
                    fmt::format("{} is not a Python virtual environment (no pyvenv.cfg or "
                                "bin/python); create it with `python3 -m venv {}`",
                                dir.string(), dir.string()));
    }
    return dir.string();
}

Result<std::string> resolve_command(const std::string& argv0, const std::string& path_list) {
    if (argv0.find('/') != std::string::npos) {
        return argv0;
    }
    for (const std::string& dir : split_list(path_list, ':')) {
        if (dir.empty()) {
            continue;
        }
        const std::string candidate = dir + "/" + argv0;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return fail(ErrorCode::NotFound,
                fmt::format("command '{}' not found in your PATH ({}); give its path, or the "
                            "environment it lives in with --conda or --venv",
                            argv0, path_list));
}

Result<void> resolve_environment_and_command(SubmitRequest& r, const EnvMap& caller,
                                             const fs::path& cwd) {
    if (!r.conda.empty() && !r.venv.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "give --conda or --venv, not both: a task runs in one Python environment");
    }
    std::string env_bin;
    if (!r.conda.empty()) {
        auto prefix = resolve_conda(r.conda, caller, cwd);
        if (!prefix) {
            return tl::unexpected(prefix.error());
        }
        r.conda = *prefix;
        env_bin = r.conda + "/bin";
    } else if (!r.venv.empty()) {
        auto dir = resolve_venv(r.venv, cwd);
        if (!dir) {
            return tl::unexpected(dir.error());
        }
        r.venv = *dir;
        env_bin = r.venv + "/bin";
    }
    if (r.command.empty()) {
        return {};
    }
    const std::string path = get(caller, "PATH");
    auto resolved = resolve_command(r.command.front(),
                                    env_bin.empty() ? path : env_bin + ":" + path);
    if (!resolved) {
        return tl::unexpected(resolved.error());
    }
    r.command.front() = *resolved;
    return {};
}

}  // namespace carma::api

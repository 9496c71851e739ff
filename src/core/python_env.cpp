#include "core/python_env.h"

#include <algorithm>
#include <string_view>

#include "core/text.h"

namespace carma {

namespace {

std::string* find(EnvList& env, std::string_view name) {
    for (auto& [k, v] : env) {
        if (k == name) {
            return &v;
        }
    }
    return nullptr;
}

void set(EnvList& env, const std::string& name, const std::string& value) {
    if (std::string* v = find(env, name)) {
        *v = value;
    } else {
        env.emplace_back(name, value);
    }
}

void unset(EnvList& env, std::string_view name) {
    std::erase_if(env, [&](const auto& kv) { return kv.first == name; });
}

// PATH without `dir` (an environment that was active when the task was submitted).
std::string without_dir(const std::string& path, const std::string& dir) {
    std::string out;
    for (const std::string& part : split_list(path, ':')) {
        if (part != dir) {
            if (!out.empty()) {
                out += ':';
            }
            out += part;
        }
    }
    return out;
}

// Built with append: g++ 12 warns falsely (-Wrestrict) on some `"x" + s + "y"` chains.
std::string join3(std::string_view a, std::string_view b, std::string_view c) {
    std::string out;
    out.reserve(a.size() + b.size() + c.size());
    out.append(a).append(b).append(c);
    return out;
}

std::string base_name(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') {
        p.pop_back();
    }
    const std::size_t slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string prepend(EnvList& env, const std::string& bin) {
    std::string path = find(env, "PATH") ? *find(env, "PATH") : std::string();
    // Whatever environment was active at submit time gives way to the one asked for.
    for (const char* active : {"CONDA_PREFIX", "VIRTUAL_ENV"}) {
        if (const std::string* prefix = find(env, active); prefix && !prefix->empty()) {
            path = without_dir(path, join3(*prefix, "/bin", ""));
        }
    }
    path = without_dir(path, bin);
    return path.empty() ? bin : join3(bin, ":", path);
}

}  // namespace

EnvList activate_python_env(EnvList env, const std::string& conda_prefix,
                            const std::string& venv) {
    if (!conda_prefix.empty()) {
        const std::string path = prepend(env, join3(conda_prefix, "/bin", ""));
        set(env, "PATH", path);
        unset(env, "VIRTUAL_ENV");
        // An environment under <root>/envs/NAME is called NAME; the root itself is "base".
        const std::string parent = conda_prefix.substr(0, conda_prefix.rfind('/'));
        const std::string name =
            base_name(parent) == "envs" ? base_name(conda_prefix) : std::string("base");
        set(env, "CONDA_PREFIX", conda_prefix);
        set(env, "CONDA_DEFAULT_ENV", name);
        set(env, "CONDA_SHLVL", "1");
        set(env, "CONDA_PROMPT_MODIFIER", join3("(", name, ") "));
    }
    if (!venv.empty()) {
        const std::string path = prepend(env, join3(venv, "/bin", ""));
        set(env, "PATH", path);
        set(env, "VIRTUAL_ENV", venv);
        set(env, "VIRTUAL_ENV_PROMPT", join3("(", base_name(venv), ") "));
        unset(env, "PYTHONHOME");
    }
    return env;
}

}  // namespace carma

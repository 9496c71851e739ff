#include "core/python_command.h"

namespace carma {

namespace {

std::string_view base_name(std::string_view path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool is_python_interpreter(std::string_view program) {
    std::string_view name = base_name(program);
    if (!name.starts_with("python")) {
        return false;
    }
    name.remove_prefix(6);
    // python, python3, python3.11; not python-config or pythonw-like tools.
    return name.find_first_not_of("0123456789.") == std::string_view::npos;
}

std::optional<std::string> python_script(std::span<const std::string> argv) {
    if (argv.empty() || !is_python_interpreter(argv.front())) {
        return std::nullopt;
    }
    for (std::size_t i = 1; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (arg == "--") {
            return i + 1 < argv.size() ? std::optional<std::string>(argv[i + 1]) : std::nullopt;
        }
        if (arg.empty() || arg == "-") {
            return std::nullopt;  // "" or stdin: no file to look at
        }
        if (arg.starts_with("--")) {
            if (arg == "--check-hash-based-pycs") {
                ++i;  // its value
            }
            continue;  // --version, --help, ...: python does not run a script then either
        }
        if (arg.front() != '-') {
            return arg;
        }
        // A cluster of one-letter options, "-u", "-OO", "-uW", "-Werror": -c and -m end the
        // options with what runs; -W and -X take the rest of the cluster or the next argument.
        for (std::size_t k = 1; k < arg.size(); ++k) {
            const char c = arg[k];
            if (c == 'c' || c == 'm') {
                return std::nullopt;
            }
            if (c == 'W' || c == 'X') {
                if (k + 1 == arg.size()) {
                    ++i;
                }
                break;
            }
        }
    }
    return std::nullopt;
}

std::string script_stem(std::string_view script) {
    std::string_view name = base_name(script);
    if (const std::size_t dot = name.rfind('.'); dot != std::string_view::npos && dot > 0) {
        name = name.substr(0, dot);
    }
    return std::string(name);
}

}  // namespace carma

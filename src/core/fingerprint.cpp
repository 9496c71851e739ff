#include "core/fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace carma {

namespace {

std::string_view basename(std::string_view path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_assignment(std::string_view arg) {
    const std::size_t eq = arg.find('=');
    return eq != std::string_view::npos && eq > 0 && arg.front() != '-';
}

bool is_script_file(std::string_view arg) {
    return !arg.empty() && arg.front() != '-' && (arg.ends_with(".py") || arg.ends_with(".sh"));
}

// python, python3, python3.11 -> python: the interpreter's version does not change what a
// training script needs.
std::string program_name(std::string_view argv0) {
    std::string_view name = basename(argv0);
    if (name.starts_with("python") &&
        std::all_of(name.begin() + 6, name.end(), [](char c) {
            return (c >= '0' && c <= '9') || c == '.';
        })) {
        return "python";
    }
    return std::string(name);
}

// "./train.py" and "train.py" are the same file as written.
std::string normal_path(std::string_view path) {
    while (path.starts_with("./")) {
        path.remove_prefix(2);
    }
    return std::string(path);
}

// Whitespace-separated words with surrounding quotes removed: enough to find a program and its
// script in a shell line, not a shell parser.
std::vector<std::string> shell_words(std::string_view line) {
    std::vector<std::string> words;
    std::string word;
    char quote = 0;
    for (char c : line) {
        if (quote != 0) {
            if (c == quote) {
                quote = 0;
            } else {
                word += c;
            }
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            if (!word.empty()) {
                words.push_back(std::move(word));
                word.clear();
            }
        } else {
            word += c;
        }
    }
    if (!word.empty()) {
        words.push_back(std::move(word));
    }
    return words;
}

// The first command of a shell line that does the work: `cd exp && python train.py` is
// `python train.py`.
std::vector<std::string> working_command(const std::vector<std::string>& words) {
    static const std::set<std::string, std::less<>> kSetup = {"cd",  "export", "source", ".",
                                                              "set", "ulimit", "umask"};
    std::vector<std::string> command;
    for (std::size_t i = 0; i <= words.size(); ++i) {
        const bool separator = i == words.size() || words[i] == "&&" || words[i] == ";" ||
                               words[i] == "||" || words[i] == "|";
        if (!separator) {
            std::string w = words[i];
            const bool ends_segment = w.size() > 1 && w.back() == ';';
            if (ends_segment) {
                w.pop_back();
            }
            command.push_back(std::move(w));
            if (!ends_segment) {
                continue;
            }
        }
        // Leading assignments and `exec` only set up the command.
        auto first = std::find_if(command.begin(), command.end(), [](const std::string& s) {
            return !is_assignment(s) && s != "exec";
        });
        command.erase(command.begin(), first);
        if (!command.empty() && !kSetup.contains(command.front())) {
            return command;
        }
        command.clear();
    }
    return {};
}

bool is_shell(std::string_view program) {
    return program == "sh" || program == "bash" || program == "dash" || program == "zsh";
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    out += name;
    out += '=';
    out += std::to_string(value.size());
    out += ':';
    out += value;
    out += ';';
}

std::string hex64(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

std::uint64_t fnv1a64(std::string_view bytes) {
    std::uint64_t h = 14695981039346656037ULL;
    for (char c : bytes) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ULL;
    }
    return h;
}

CommandFamily command_family(const std::vector<std::string>& argv_in) {
    std::vector<std::string> argv = argv_in;
    // `env [-i] [VAR=value...] program ...`: the program is what env runs.
    if (!argv.empty() && basename(argv.front()) == "env") {
        std::size_t i = 1;
        while (i < argv.size() && (is_assignment(argv[i]) || argv[i].starts_with("-"))) {
            // -u NAME and -C DIR take the next word.
            const bool takes_value = argv[i] == "-u" || argv[i] == "--unset" ||
                                     argv[i] == "-C" || argv[i] == "--chdir";
            i += takes_value ? 2 : 1;
        }
        argv.erase(argv.begin(), argv.begin() + static_cast<std::ptrdiff_t>(
                                                    std::min(i, argv.size())));
    }
    // `sh -c 'LINE'` (how .rad commands with shell syntax run): the command inside LINE.
    if (argv.size() >= 3 && is_shell(basename(argv.front())) && argv[1] == "-c") {
        std::vector<std::string> inner = working_command(shell_words(argv[2]));
        if (!inner.empty()) {
            argv = std::move(inner);
        }
    }
    CommandFamily family;
    if (argv.empty()) {
        return family;
    }
    family.program = program_name(argv.front());
    if (family.program == "carma-fakejob") {
        // Its workload is the profile it emulates, not a file.
        for (std::size_t i = 1; i < argv.size(); ++i) {
            if (argv[i] == "--profile" && i + 1 < argv.size()) {
                family.script = "--profile " + argv[i + 1];
                break;
            }
            constexpr std::string_view kJoined = "--profile=";
            if (argv[i].starts_with(kJoined)) {
                family.script = "--profile " + argv[i].substr(kJoined.size());
                break;
            }
        }
        return family;
    }
    if (is_script_file(argv.front())) {
        family.script = normal_path(argv.front());
        return family;
    }
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (argv[i] == "-m" && i + 1 < argv.size()) {
            family.script = "-m " + argv[i + 1];
            break;
        }
        if (argv[i] == "-c") {
            break;  // inline code: no file names it
        }
        if (is_script_file(argv[i])) {
            family.script = normal_path(argv[i]);
            break;
        }
    }
    return family;
}

std::string canonical_exact(std::uint64_t owner, const std::vector<std::string>& argv, int gpus,
                            std::string_view env_key) {
    std::string out = "carma-exact-v1;";
    append_field(out, "owner", std::to_string(owner));
    append_field(out, "gpus", std::to_string(gpus));
    append_field(out, "argc", std::to_string(argv.size()));
    for (const std::string& arg : argv) {
        append_field(out, "arg", arg);
    }
    if (!env_key.empty()) {
        append_field(out, "env", env_key);
    }
    return out;
}

// v2: the GPU count joined the key, so v1 families (which mixed GPU counts) match none.
std::string canonical_family(std::uint64_t owner, const CommandFamily& family, int gpus) {
    std::string out = "carma-family-v2;";
    append_field(out, "owner", std::to_string(owner));
    append_field(out, "gpus", std::to_string(gpus));
    append_field(out, "program", family.program);
    append_field(out, "script", family.script);
    return out;
}

TaskFingerprint fingerprint_task(std::uint64_t owner, const std::vector<std::string>& argv,
                                 int gpus, std::string_view env_key) {
    return TaskFingerprint{hex64(fnv1a64(canonical_exact(owner, argv, gpus, env_key))),
                           hex64(fnv1a64(canonical_family(owner, command_family(argv), gpus)))};
}

std::string env_key(std::vector<std::pair<std::string, std::string>> vars) {
    if (vars.empty()) {
        return {};
    }
    std::sort(vars.begin(), vars.end());
    std::string canonical = "carma-env-v1;";
    for (const auto& [name, value] : vars) {
        append_field(canonical, "name", name);
        append_field(canonical, "value", value);
    }
    return hex64(fnv1a64(canonical));
}

}  // namespace carma

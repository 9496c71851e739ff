#include "cli/main/arg_check.h"

#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/main/slurm_options.h"
#include "core/text.h"

namespace carma::cli {

namespace {

std::vector<std::string> subcommand_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
    }
    return names;
}

std::vector<std::string> long_options(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::Option* o : app.get_options()) {
        for (const std::string& n : o->get_lnames()) {
            names.push_back("--" + n);
        }
    }
    return names;
}

bool has_short_option(const CLI::App& app, const std::string& dash_letter) {
    for (const CLI::Option* o : app.get_options()) {
        for (const std::string& n : o->get_snames()) {
            if ("-" + n == dash_letter) {
                return true;
            }
        }
    }
    return false;
}

// Whether the option `name` ("--time", "-t") of the command or of carma itself is followed by a
// value of its own when written without one attached.
bool takes_a_value(const CLI::App& current, const CLI::App& app, const std::string& name) {
    for (const CLI::App* where : {&current, &app}) {
        if (const CLI::Option* o = where->get_option_no_throw(name)) {
            return o->get_items_expected_max() > 0;
        }
    }
    return false;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
    const std::string near = closest_match(word, candidates);
    return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near);
}

}  // namespace

std::string unknown_argument_message(const CLI::App& app, const std::vector<std::string>& args) {
    const CLI::App* current = &app;
    std::string path = "carma";
    bool in_subcommand = false;
    bool value_next = false;  // the word is the value of the option before it
    for (const std::string& arg : args) {
        if (value_next) {
            value_next = false;
            continue;
        }
        if (arg == "--") {
            break;  // the task's own command follows
        }
        if (arg.starts_with("--")) {
            const std::string name = arg.substr(0, arg.find('='));
            std::vector<std::string> known = long_options(*current);
            if (current != &app) {
                for (const std::string& n : long_options(app)) {
                    known.push_back(n);
                }
            }
            if (std::find(known.begin(), known.end(), name) == known.end()) {
                if (const auto hint = slurm_option_hint(path, name)) {
                    return fmt::format("unknown option '{}' for `{}`: {}", name, path, *hint);
                }
                return fmt::format("unknown option '{}' for `{}`{}; `{} --help` lists them", name,
                                   path, did_you_mean(name, known), path);
            }
            value_next = name == arg && takes_a_value(*current, app, name);
            continue;
        }
        if (arg.starts_with("-")) {
            // Short options, and negative numbers given as values: only sbatch's short options
            // that the command does not have are named here; CLI11 tells the rest.
            const std::string name = arg.substr(0, 2);
            if (!has_short_option(*current, name)) {
                if (const auto hint = slurm_option_hint(path, name)) {
                    return fmt::format("unknown option '{}' for `{}`: {} (a command's own "
                                       "options go after `--`: {} [options] -- COMMAND ARGS...)",
                                       name, path, *hint, path);
                }
            }
            value_next = name == arg && takes_a_value(*current, app, name);
            continue;
        }
        const std::vector<std::string> subs = subcommand_names(*current);
        if (std::find(subs.begin(), subs.end(), arg) != subs.end()) {
            current = current->get_subcommand(arg);
            path += " " + arg;
            in_subcommand = true;
            continue;
        }
        if (!in_subcommand) {
            return fmt::format("unknown command '{}'{}; `carma --help` lists them", arg,
                               did_you_mean(arg, subs));
        }
        // Otherwise a positional argument of the current command; where the rest is the
        // task's (`carma submit train.sbatch --lr 0.1`), nothing after it is carma's.
        if (current->get_positionals_at_end()) {
            break;
        }
    }
    return {};
}

int run_subcommand(CLI::App& app, int argc, char** argv,
                   const std::map<std::string, std::function<int()>>& actions) {
    // Before CLI11: its messages do not name the mistyped word.
    if (const std::string wrong =
            unknown_argument_message(app, std::vector<std::string>(argv + 1, argv + argc));
        !wrong.empty()) {
        fmt::print(stderr, "carma: {}\n", printable(wrong));
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        for (const auto& [name, action] : actions) {
            if (app.got_subcommand(name)) {
                return action();
            }
        }
    } catch (const std::exception& e) {
        // An error may quote users' text (a task's name in the daemon's answer).
        fmt::print(stderr, "carma: {}\n", printable(e.what(), true));
        return 1;
    }
    return 0;
}

}  // namespace carma::cli

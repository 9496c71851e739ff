#pragma once
// The option tables of `carma` and `carma-daemon` as JSON, for what is generated from them
// (packaging/gen_docs.py: the man pages and the bash completion), so those cannot drift from
// the programs. `carma --option-table` and `carma-daemon --option-table` print it; the flag is
// not in --help (it is for the build, not for people).

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace carma::cli {

inline constexpr const char* kOptionTableFlag = "--option-table";

// {name, description, options: [{names, positional, flag, required, multiple, type, default,
// description}], subcommands: [...]}; subcommands in the order they were added.
nlohmann::json option_table(const CLI::App& app);

// Prints option_table(app) when argv is exactly `PROGRAM --option-table`; true if it did.
bool print_option_table(const CLI::App& app, int argc, char** argv);

}  // namespace carma::cli

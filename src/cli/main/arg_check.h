#pragma once
// Names what is wrong with a command line before CLI11 parses it, with the nearest valid word:
// "unknown command 'quee' (did you mean 'queue'?)", "unknown option '--gpu' for `carma submit`
// (did you mean '--gpus'?)". CLI11's own messages ("A subcommand is required", or a complaint
// about the command's arguments) do not say which word was wrong.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace carma::cli {

// `args` are argv[1..]. Empty when nothing is wrong that this check knows of.
std::string unknown_argument_message(const CLI::App& app, const std::vector<std::string>& args);

// The edge of both programs (carma, carma-daemon): names a wrong argument (exit 2), parses, runs
// the action of the subcommand given, and turns an exception into a message (exit 1).
int run_subcommand(CLI::App& app, int argc, char** argv,
                   const std::map<std::string, std::function<int()>>& actions);

}  // namespace carma::cli

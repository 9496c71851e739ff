#pragma once
// Runs one `carma` command in-process for the CLI's tests: parses `carma <args>` with only that
// command registered, runs it, and returns what it printed or the error it ended with.

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "cli/commands.h"

namespace carma::test_support {

using AddCommand = cli::Action (*)(CLI::App&);

// Parses `args` as `carma <args>` with one command registered and runs it, returning stdout.
inline std::string run_command(AddCommand add, std::vector<std::string> args) {
    CLI::App app;
    cli::Action action = add(app);
    args.insert(args.begin(), "carma");
    std::vector<const char*> argv;
    for (const std::string& a : args) {
        argv.push_back(a.c_str());
    }
    app.parse(static_cast<int>(argv.size()), argv.data());
    ::testing::internal::CaptureStdout();
    try {
        action();
    } catch (...) {
        ::testing::internal::GetCapturedStdout();
        throw;
    }
    return ::testing::internal::GetCapturedStdout();
}

inline std::string command_error(AddCommand add, std::vector<std::string> args) {
    try {
        run_command(add, std::move(args));
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace carma::test_support

#pragma once
// What the user commands of `carma` that talk to the daemon share (submit, queue, show, cancel,
// hold, release, logs, gpus and replay, a file each here): the --socket option, how a task is
// named, and how answers are printed. They only format what the API returns (docs/api.md); every
// decision is the daemon's. Answers are read defensively: a field that is missing or of another
// type prints as "-" instead of aborting, so a newer daemon never crashes an older client. Text
// from the daemon is users' own (names, commands, messages): it reaches the terminal through
// printable() (core/text.h), in print_line() and TextTable; --json output and logs are printed
// as they came.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "core/text.h"

namespace carma::cli {

// ---- errors -------------------------------------------------------------------------------

// One line of output, through printable(): what a command prints of the daemon's answers.
template <typename... Args>
void print_line(std::FILE* out, fmt::format_string<Args...> format, Args&&... args) {
    fmt::print(out, "{}\n", printable(fmt::format(format, std::forward<Args>(args)...)));
}

std::string or_dash(const std::string& text);

// "task 12 (resnet3)", the way every command names a task.
std::string task_label(const nlohmann::json& task);

// `carma logs -f`'s line between two attempts of `task` (GET /v1/tasks/ID, with its
// attempt_list): which attempt begins and why the one before it ended ("attempt 1 ran out of
// GPU memory; relaunched on idle GPUs").
std::string attempt_separator(const nlohmann::json& task, int attempt);

// ---- formatting ---------------------------------------------------------------------------

std::string format_clock(std::optional<double> epoch);
std::string format_mib_or_dash(std::optional<std::int64_t> mib);
std::string format_ratio(std::optional<double> value);
std::string format_command(const nlohmann::json& argv);

// A plain-text table: columns as wide as their widest cell, two spaces apart; each cell through
// printable().
class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {}

    void add(std::vector<std::string> row);
    void print(std::FILE* out = stdout) const;

private:
    std::vector<std::vector<std::string>> rows_;
};

void print_json(const nlohmann::json& doc);

// A terminal's width, which long names and reasons are cut to; 0 (nothing cut) when stdout is
// not a terminal, so a pipe or a file gets every character.
std::size_t terminal_width();

// ---- shared options -----------------------------------------------------------------------

void add_socket_option(CLI::App* cmd, std::string& socket);
api::ApiClient connect(const std::string& socket_flag);

// The caller's login as the daemon names it: from the uid the socket carries.
std::string login_name();

}  // namespace carma::cli

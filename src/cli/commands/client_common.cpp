#include "cli/commands/client_common.h"

#include <pwd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "cli/common/json_read.h"
#include "cli/views/cells.h"
#include "core/units.h"

namespace carma::cli {

namespace {

using nlohmann::json;


}  // namespace

// ---- errors -------------------------------------------------------------------------------

std::string or_dash(const std::string& text) {
    return text.empty() ? "-" : text;
}

std::string task_label(const json& task) {
    const std::string name = text_of(task, "name", "");
    const std::string id = task_id_text(task);
    return name.empty() ? fmt::format("task {}", id) : fmt::format("task {} ({})", id, name);
}

std::string attempt_separator(const json& task, int attempt) {
    std::string why;
    if (const auto it = task.find("attempt_list"); it != task.end() && it->is_array()) {
        for (const json& a : *it) {
            if (integer_of(a, "number").value_or(0) != attempt - 1) {
                continue;
            }
            const std::string outcome = text_of(a, "outcome", "");
            if (outcome == "out-of-memory") {
                why = "ran out of GPU memory; relaunched on idle GPUs";
            } else if (outcome == "out-of-host-memory") {
                why = "ran out of host memory (--mem); relaunched";
            } else if (outcome == "preempted") {
                why = "was stopped for fair share (preempted); queued again";
            } else if (outcome == "lost") {
                why = "was lost with its node; queued again";
            } else if (outcome == "failed") {
                why = "failed; relaunched (retry_failures)";
            } else if (!outcome.empty()) {
                why = "ended " + outcome;
            }
        }
    }
    return fmt::format("--- attempt {} of {}{} ---", attempt, task_label(task),
                       why.empty() ? std::string()
                                   : fmt::format(" (attempt {} {})", attempt - 1, why));
}

// ---- formatting ---------------------------------------------------------------------------

std::string format_clock(std::optional<double> epoch) {
    if (!epoch || !std::isfinite(*epoch) || std::abs(*epoch) > kLongestTime) {
        return "-";
    }
    const auto t = static_cast<std::time_t>(*epoch);
    std::tm local{};
    if (::localtime_r(&t, &local) == nullptr) {
        return "-";
    }
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
    return buf;
}

std::string format_mib_or_dash(std::optional<std::int64_t> mib) {
    return mib ? format_mib(*mib) : "-";
}

std::string format_ratio(std::optional<double> value) {
    return value ? fmt::format("{:.2f}", *value) : "-";
}

std::string format_command(const json& argv) {
    std::vector<std::string> parts;
    for (const json& a : argv.is_array() ? argv : json::array()) {
        parts.push_back(shell_quote(a.is_string() ? a.get<std::string>() : a.dump()));
    }
    return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, " "));
}

void TextTable::add(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    for (std::string& cell : row) {
        cell = printable(cell);
    }
    rows_.push_back(std::move(row));
}

void TextTable::print(std::FILE* out) const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& row : rows_) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            width[c] = std::max(width[c], display_width(row[c]));
        }
    }
    for (const auto& row : rows_) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            const bool last = c + 1 == row.size();
            line += row[c];
            if (!last) {
                line += std::string(width[c] - display_width(row[c]) + 2, ' ');
            }
        }
        fmt::print(out, "{}\n", line);
    }
}

std::size_t terminal_width() {
    if (::isatty(STDOUT_FILENO) == 0) {
        return 0;
    }
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        return ws.ws_col;
    }
    return 80;
}

void print_json(const json& doc) {
    fmt::print("{}\n", doc.dump(2));
}

// ---- shared options -----------------------------------------------------------------------

void add_socket_option(CLI::App* cmd, std::string& socket) {
    cmd->add_option(
        "--socket", socket,
        api::socket_option_help());
}

api::ApiClient connect(const std::string& socket_flag) {
    return api::ApiClient(api::resolve_socket_path(socket_flag));
}

std::string login_name() {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    const uid_t uid = ::geteuid();
    if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

}  // namespace carma::cli

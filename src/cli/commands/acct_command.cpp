// `carma acct`: every finished task with what it cost (wait, run time, attempts, GPU-hours, peak
// memory, energy) and the totals per user, from the daemon's GET /v1/acct (docs/api.md).

#include "cli/commands.h"

#include <algorithm>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/common/local_time.h"
#include "cli/views/acct_view.h"
#include "core/text.h"
#include "core/time_text.h"

namespace carma::cli {

namespace {

using nlohmann::json;

struct AcctOptions {
    std::string socket;
    std::string user;
    std::string state;
    std::string since;
    std::string format;
    bool json = false;
};

// sacct writes local time, ISO style.
std::string local_time_text(double epoch) {
    const auto t = static_cast<std::time_t>(epoch);
    std::tm local{};
    if (::localtime_r(&t, &local) == nullptr) {
        return "-";
    }
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &local);
    return buf;
}

int run_acct(const AcctOptions& o) {
    std::vector<std::string> columns = acct_default_fields();
    if (!o.format.empty()) {
        auto parsed = parse_acct_format(o.format);
        if (!parsed) {
            throw std::runtime_error("--format: " + parsed.error().message);
        }
        columns = std::move(*parsed);
    }
    api::AcctRequest request;
    if (!o.user.empty()) {
        request.user = o.user;
    }
    if (!o.state.empty()) {
        request.state = to_lower(o.state);
    }
    if (!o.since.empty()) {
        auto since = parse_time_point(o.since, now_epoch(), local_to_unix);
        if (!since) {
            throw std::runtime_error("--since: " + since.error().message);
        }
        request.since = std::max(0.0, *since);
    }
    api::ApiClient client(api::resolve_socket_path(o.socket));
    auto answer = client.acct(request);
    if (!answer) {
        throw std::runtime_error(answer.error().message);
    }
    if (o.json) {
        fmt::print("{}\n", answer->dump(2, ' ', false, json::error_handler_t::replace));
        return 0;
    }
    fmt::print("{}", format_acct(*answer, columns, local_time_text));
    return 0;
}

}  // namespace

Action add_acct_command(CLI::App& app) {
    auto o = std::make_shared<AcctOptions>();
    CLI::App* cmd = app.add_subcommand(
        "acct", "Accounting of finished tasks: wait, run time, attempts, GPU-hours, peak memory "
                "and energy, with totals per user (like sacct)");
    cmd->add_option("-u,--user", o->user, "Only this user's tasks");
    cmd->add_option("-s,--state", o->state,
                    "Only tasks that ended so (succeeded, failed, cancelled, lost, ...; several "
                    "separated by commas)");
    cmd->add_option("-S,--since", o->since,
                    "Only tasks that finished since: a unix time, an ISO date or time "
                    "(2026-11-29, 2026-11-29T10:00, Z for UTC) or how long ago (2h, 3d)");
    auto* json_flag = cmd->add_flag("--json", o->json,
                                    "Print {\"tasks\": [...], \"totals\": [...]} as the daemon "
                                    "returns it");
    cmd->add_option("-o,--format", o->format,
                    "The table's columns, in order: " +
                        fmt::format("{}", fmt::join(acct_field_names(), ",")))
        ->excludes(json_flag);
    cmd->add_option(
        "--socket", o->socket,
        api::socket_option_help());
    return [o] { return run_acct(*o); };
}

}  // namespace carma::cli

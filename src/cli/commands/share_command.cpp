// `carma share [--json]`: fair share as Slurm's sshare shows it (GET /v1/share): per user, the
// shares, the decayed usage charged, both normalised, the fair-share factor, what the user runs
// and has waiting, and, with preemption on, the stops made for the user within the window.

#include "cli/commands.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/commands/client_common.h"
#include "cli/common/die.h"
#include "cli/common/json_read.h"
#include "cli/views/cells.h"

namespace carma::cli {

namespace {

using nlohmann::json;

std::string fixed(const json& row, const char* key, int digits) {
    const std::optional<double> v = number_of(row, key);
    return v ? fmt::format("{:.{}f}", *v, digits) : "-";
}

void print_share(const json& answer) {
    const json* weights = member(answer, "weights");
    const json* limits = member(answer, "limits");
    const std::optional<double> half_life = number_of(answer, "half_life_s");
    const std::optional<double> horizon = number_of(answer, "horizon_s");
    print_line(stdout, "fair share: {}; usage half-life {}; the factor counts running tasks' "
                       "charge {} ahead; priority = {} x factor + {} x [waited max_wait] - nice",
               flag_of(answer, "fair_share") ? "on" : "off (the policy orders by arrival)",
               half_life ? format_duration(*half_life) : "-",
               horizon ? format_duration(*horizon) : "-",
               weights != nullptr ? fixed(*weights, "fair_share", 0) : "-",
               weights != nullptr ? fixed(*weights, "age", 0) : "-");
    if (const json* billing = member(answer, "billing"); billing != nullptr) {
        print_line(stdout,
                   "charged in GPU-seconds: {} per GPU-second held (a GPU never seen used: "
                   "whole), {} per core-second of a CPU-only task",
                   fixed(*billing, "gpu", 2), fixed(*billing, "cpu_core", 4));
    }
    if (limits != nullptr) {
        const auto limit = [&](const char* key) {
            const std::optional<std::int64_t> n = integer_of(*limits, key);
            return n && *n > 0 ? std::to_string(*n) : std::string("none");
        };
        print_line(stdout, "limits: max_gpus_per_user {}, max_running_per_user {}",
                   limit("max_gpus_per_user"), limit("max_running_per_user"));
    }
    // Preemption's budget is per user, so where it is on each row says how much is spent.
    const json* preemption = member(answer, "preemption");
    const bool preempts = preemption != nullptr && flag_of(*preemption, "enabled");
    if (preempts) {
        const std::optional<std::int64_t> stops = integer_of(*preemption, "max_stops_per_user");
        const std::optional<double> window = number_of(*preemption, "stops_window_s");
        print_line(stdout, "preemption: on; at most {} stops for one user's waiting tasks per {} "
                           "(STOPS: made within it)",
                   stops ? std::to_string(*stops) : "-",
                   window ? format_duration(*window) : "-");
    } else if (preemption != nullptr) {
        print_line(stdout, "preemption: off");
    }
    std::vector<std::string> header = {"USER",       "SHARES", "NORM_SHARES", "USAGE_GPU_H",
                                       "NORM_USAGE", "CHARGE_NOW", "FACTOR", "GPUS",
                                       "RUNNING",    "WAITING"};
    if (preempts) {
        header.push_back("STOPS");
    }
    TextTable table(std::move(header));
    for (const json& u : array_of(answer, "users")) {
        std::vector<std::string> row = {
            text_of(u, "user"),          fixed(u, "shares", 2),       fixed(u, "shares_norm", 3),
            fixed(u, "usage_gpu_hours", 3), fixed(u, "usage_norm", 3), fixed(u, "charge_now", 2),
            fixed(u, "factor", 3),       text_of(u, "gpus_running"),  text_of(u, "tasks_running"),
            text_of(u, "tasks_waiting")};
        if (preempts) {
            row.push_back(text_of(u, "preemption_stops"));
        }
        table.add(std::move(row));
    }
    table.print();
}

struct ShareOptions {
    std::string socket;
    bool json = false;
};

int run_share(const ShareOptions& o) {
    api::ApiClient client = connect(o.socket);
    const json answer = or_die(client.share());
    if (o.json) {
        print_json(answer);
    } else {
        print_share(answer);
    }
    return 0;
}

}  // namespace

Action add_share_command(CLI::App& app) {
    auto o = std::make_shared<ShareOptions>();
    CLI::App* cmd = app.add_subcommand(
        "share", "Fair share per user, as sshare: shares, charged usage, factor, running, waiting");
    cmd->add_flag("--json", o->json, "Print the daemon's answer as JSON");
    add_socket_option(cmd, o->socket);
    return [o] { return run_share(*o); };
}

}  // namespace carma::cli

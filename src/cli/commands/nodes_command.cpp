// `carma nodes`: the nodes whose agents report to the daemon (GET /v1/nodes), and giving up a
// node whose agent has gone silent (POST /v1/nodes/lost; root or the daemon's user).
//
//   carma nodes [--json] [--socket S]
//   carma nodes lost NAME [--socket S]

#include "cli/commands.h"

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/slurm/slurm_script.h"
#include "core/text.h"

namespace carma::cli {

namespace {

using nlohmann::json;

struct NodesOptions {
    bool json = false;
    std::string socket;
    std::string lost;  // the node to give up
};

int run_nodes(const NodesOptions& o) {
    api::ApiClient client(api::resolve_socket_path(o.socket));
    if (!o.lost.empty()) {
        auto r = client.declare_node_lost(o.lost);
        if (!r) {
            throw std::runtime_error(r.error().message);
        }
        std::printf("node %s given up: its tasks end as lost and are queued again\n",
                    printable(o.lost).c_str());
        return 0;
    }
    auto answer = client.nodes();
    if (!answer) {
        throw std::runtime_error(answer.error().message);
    }
    if (o.json) {
        std::printf("%s\n", answer->dump(2, ' ', false, json::error_handler_t::replace).c_str());
        return 0;
    }
    std::fputs(format_node_table(*answer).c_str(), stdout);
    return 0;
}

}  // namespace

Action add_nodes_command(CLI::App& app) {
    auto o = std::make_shared<NodesOptions>();
    CLI::App* cmd =
        app.add_subcommand("nodes", "Show the nodes whose agents report to the daemon");
    cmd->add_flag("--json", o->json, "Print JSON");
    cmd->add_option("--socket", o->socket,
                    api::socket_option_help());
    CLI::App* lost = cmd->add_subcommand(
        "lost", "Give up a node whose agent is silent: its tasks end as lost and are queued "
                "again (root)");
    lost->add_option("node", o->lost, "The node's name")->required();
    lost->add_option("--socket", o->socket, "The daemon's socket");
    return [o] { return run_nodes(*o); };
}

}  // namespace carma::cli

// Scheduling over nodes, as the API sees it: GET /v1/nodes, draining nodes and giving one up
// (root or the daemon's user), and the tasks on unreachable nodes that queries show as unknown.

#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/json_limits.h"
#include "daemon/daemon.h"

namespace carma::daemon {

namespace {

// The nodes' controls (drain, give up): root or the daemon's own user.
api::ApiResult<void> may_control_nodes(const api::Caller& caller, const char* what) {
    if (!caller.read_only && (caller.uid == 0 || caller.uid == ::geteuid())) {
        return {};
    }
    return api::api_fail(403, fmt::format("only root or the daemon's own user may {}", what));
}

}  // namespace

api::ApiResult<nlohmann::json> Daemon::nodes(const api::Caller&) {
    if (!hub_) {
        return nlohmann::json{{"agents", nullptr}, {"nodes", nlohmann::json::array()}};
    }
    std::map<std::string, int> running;
    {
        std::lock_guard lock(mu_);
        for (const auto& [id, live] : live_) {
            if (!live.handle.node.empty()) {
                running[live.handle.node] += 1;
            }
        }
    }
    nlohmann::json list = nlohmann::json::array();
    for (const cluster::NodeInfo& n : hub_->nodes()) {
        auto or_null = [](const std::string& s) {
            return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
        };
        list.push_back({{"node", n.node},
                        {"state", n.state},
                        {"slurm_job", or_null(n.slurm_job)},
                        {"host", or_null(n.host)},
                        {"backend", or_null(n.backend)},
                        {"gpus", n.gpus},
                        {"running", running[n.node]},
                        {"first_seen", n.first_seen > 0 ? nlohmann::json(n.first_seen)
                                                        : nlohmann::json(nullptr)},
                        {"last_seen", n.last_seen > 0 ? nlohmann::json(n.last_seen)
                                                      : nlohmann::json(nullptr)}});
    }
    return nlohmann::json{{"agents", hub_->address()},
                          {"auth", hub_->auth_mode() == cluster::auth::Mode::Munge ? "munge"
                                                                                   : "token"},
                          {"server_uid", ::geteuid()},
                          {"nodes", list}};
}

api::ApiResult<nlohmann::json> Daemon::drain_nodes(const api::Caller& caller,
                                                   const nlohmann::json& body) {
    if (auto ok = may_control_nodes(caller, "drain nodes"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (!hub_) {
        return api::api_fail(409, "this daemon schedules no nodes (it was started without "
                                  "--agents)");
    }
    const bool by_node = body.is_object() && body.contains("node") && body["node"].is_string();
    const bool by_job =
        body.is_object() && body.contains("slurm_job") && body["slurm_job"].is_string();
    if (by_node == by_job) {
        return api::api_fail(400, "name what to drain: {\"node\": \"n1\"} or "
                                  "{\"slurm_job\": \"417\"}");
    }
    const std::vector<std::string> drained =
        hub_->drain(by_node ? body["node"].get<std::string>() : "",
                    by_job ? body["slurm_job"].get<std::string>() : "");
    if (drained.empty()) {
        return api::api_fail(404, fmt::format("no node of {} reports to this daemon; see "
                                              "`carma slurm status` or GET /v1/nodes",
                                              json_excerpt(body)));
    }
    {
        std::lock_guard lock(mu_);
        event(0, "nodes-draining",
              fmt::format("node(s) {} take no new tasks; their running tasks finish",
                          fmt::join(drained, ", ")));
    }
    return nlohmann::json{{"draining", drained}};
}

api::ApiResult<nlohmann::json> Daemon::declare_node_lost(const api::Caller& caller,
                                                         const nlohmann::json& body) {
    if (auto ok = may_control_nodes(caller, "give a node up"); !ok) {
        return tl::unexpected(ok.error());
    }
    if (!hub_) {
        return api::api_fail(409, "this daemon schedules no nodes (it was started without "
                                  "--agents)");
    }
    if (!body.is_object() || !body.contains("node") || !body["node"].is_string()) {
        return api::api_fail(400, "name the node: {\"node\": \"n1\"}");
    }
    const std::string node = body["node"].get<std::string>();
    if (auto r = hub_->declare_lost(node); !r) {
        return api::api_fail(r.error().code == ErrorCode::NotFound ? 404 : 409,
                             r.error().message);
    }
    {
        std::lock_guard lock(mu_);
        event(0, "node-lost",
              fmt::format("node {} given up by {}: its tasks end as lost and are queued again",
                          node, caller.user));
    }
    return nlohmann::json{{"lost", node}};
}

std::map<TaskId, std::string> Daemon::tasks_on_unreachable_nodes() {
    std::map<TaskId, std::string> out;
    if (!hub_) {
        return out;
    }
    std::set<std::string> unreachable;
    for (const cluster::NodeInfo& n : hub_->nodes()) {
        if (n.state == "unreachable") {
            unreachable.insert(n.node);
        }
    }
    if (unreachable.empty()) {
        return out;
    }
    std::lock_guard lock(mu_);
    for (const auto& [id, live] : live_) {
        if (unreachable.contains(live.handle.node)) {
            out.emplace(id, live.handle.node);
        }
    }
    return out;
}

void Daemon::mark_unknown(nlohmann::json& task,
                          const std::map<TaskId, std::string>& unknown) const {
    auto it = unknown.find(task.value("id", TaskId{0}));
    if (it == unknown.end() || task.value("state", "") != "running") {
        return;
    }
    task["state"] = "unknown";
    task["message"] = fmt::format("node {} is unreachable: whether the task still runs is not "
                                  "known; it is kept until the node reports again or `carma "
                                  "nodes lost {}` gives it up",
                                  it->second, it->second);
}

}  // namespace carma::daemon

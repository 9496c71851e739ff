// nodes.json in the server's state directory: the server GPU index of each node's GPUs, so the
// numbering the store's attempts use survives a restart. Private to the server's user (0600).

#include "cluster/hub.h"
#include "cluster/hub_impl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace carma::cluster {

namespace fs = std::filesystem;
using nlohmann::json;

Result<void> Hub::Impl::load_slots() {
    std::ifstream in(nodes_file());
    if (!in) {
        return {};  // no node seen yet
    }
    json j;
    try {
        in >> j;
        for (const json& n : j.at("nodes")) {
            Node node;
            node.name = n.at("node").get<std::string>();
            int local = 0;
            for (const json& g : n.at("gpus")) {
                device::GpuInfo info;
                info.index = static_cast<int>(slots.size());
                info.node = node.name;
                info.node_index = local++;
                info.uuid = g.at("uuid").get<std::string>();
                info.name = g.at("name").get<std::string>();
                info.total_mib = g.at("total_mib").get<MiB>();
                node.slots.push_back(info.index);
                slots.push_back(info);
            }
            nodes[node.name] = std::move(node);
        }
    } catch (const std::exception& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} is damaged ({}); it numbers the nodes' GPUs for the "
                                "store's attempts: restore it from a backup, or remove it "
                                "only if no task is running on any node",
                                nodes_file(), e.what()));
    }
    return {};
}

void Hub::Impl::save_slots() const {
    json list = json::array();
    std::vector<const Node*> ordered;
    for (const auto& [name, node] : nodes) {
        ordered.push_back(&node);
    }
    std::sort(ordered.begin(), ordered.end(), [](const Node* a, const Node* b) {
        return a->slots.empty() || (!b->slots.empty() && a->slots[0] < b->slots[0]);
    });
    for (const Node* node : ordered) {
        json gpus = json::array();
        for (int s : node->slots) {
            const device::GpuInfo& g = slots[static_cast<std::size_t>(s)];
            gpus.push_back({{"uuid", g.uuid}, {"name", g.name}, {"total_mib", g.total_mib}});
        }
        list.push_back({{"node", node->name}, {"gpus", gpus}});
    }
    const std::string tmp = nodes_file() + ".tmp";
    // The cluster's own record: for the server's user alone, from the first byte.
    if (const int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
        fd >= 0) {
        ::fchmod(fd, 0600);
        ::close(fd);
    }
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << json{{"nodes", list}}.dump(2) << "\n";
        if (!out) {
            spdlog::error("cannot write {}: the nodes' GPU numbering is not saved", tmp);
            return;
        }
    }
    std::error_code ec;
    fs::rename(tmp, nodes_file(), ec);
    if (ec) {
        spdlog::error("cannot replace {}: {}", nodes_file(), ec.message());
    }
}

}  // namespace carma::cluster

#include "core/cluster_pack.h"

#include <algorithm>

namespace carma {

int GpuModelTable::intern(std::string_view name) {
    const int found = find(name);
    if (found >= 0) {
        return found;
    }
    names_.emplace_back(name);
    return static_cast<int>(names_.size()) - 1;
}

int GpuModelTable::find(std::string_view name) const {
    for (std::size_t i = 0; i < names_.size(); ++i) {
        if (names_[i] == name) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

PackRequest pack_request(const TaskSpec& task, const GpuModelTable& models) {
    PackRequest r;
    r.cpu_milli = requested_cpu_milli(task);
    r.mem_mib = task.host_mem_mib;
    r.gpus = task.gpus;
    r.milli_per_gpu = milli_per_gpu(task);
    for (const std::string& m : task.gpu_models) {
        r.models.push_back(models.find(m));
    }
    return r;
}

int affinity_tag(const PackRequest& r) {
    if (r.gpus == 0) {
        return -1;
    }
    return r.shares_a_gpu() ? kShareTag : std::min(r.gpus, kMaxPackGpusPerNode);
}

int PackNode::gpu_free_total() const {
    int total = 0;
    for (int g = 0; g < gpus; ++g) {
        total += gpu_free[static_cast<std::size_t>(g)];
    }
    return total;
}

int PackNode::fully_free_gpus() const {
    int n = 0;
    for (int g = 0; g < gpus; ++g) {
        n += gpu_free[static_cast<std::size_t>(g)] == kMilliPerGpu ? 1 : 0;
    }
    return n;
}

PackNode make_pack_node(const NodeSpec& spec, int model_id) {
    PackNode n;
    n.cpu_milli_total = n.cpu_milli_free = spec.cpu_milli;
    n.mem_total = n.mem_free = spec.mem_mib;
    n.gpus = std::clamp(spec.gpus, 0, kMaxPackGpusPerNode);
    n.model = n.gpus > 0 ? model_id : -1;
    for (int g = 0; g < n.gpus; ++g) {
        n.gpu_free[static_cast<std::size_t>(g)] = kMilliPerGpu;
    }
    return n;
}

bool model_allowed(const PackNode& node, const PackRequest& r) {
    if (r.models.empty()) {
        return true;
    }
    if (node.model < 0) {
        return false;
    }
    return std::find(r.models.begin(), r.models.end(), node.model) != r.models.end();
}

int gpus_with_room(const PackNode& node, int milli_per_gpu) {
    int n = 0;
    for (int g = 0; g < node.gpus; ++g) {
        n += node.gpu_free[static_cast<std::size_t>(g)] >= milli_per_gpu ? 1 : 0;
    }
    return n;
}

bool pack_fits(const PackNode& node, const PackRequest& r) {
    if (r.cpu_milli > node.cpu_milli_free || r.mem_mib > node.mem_free) {
        return false;
    }
    if (r.gpus == 0) {
        return true;
    }
    return node.gpus > 0 && model_allowed(node, r) &&
           gpus_with_room(node, r.milli_per_gpu) >= r.gpus;
}

std::vector<int> exclusive_gpus(const PackNode& node, const PackRequest& r) {
    std::vector<int> out;
    for (int g = 0; g < node.gpus && static_cast<int>(out.size()) < r.gpus; ++g) {
        if (node.gpu_free[static_cast<std::size_t>(g)] == kMilliPerGpu) {
            out.push_back(g);
        }
    }
    return out;
}

int share_gpu(const PackNode& node, const PackRequest& r, GpuChoice how, std::mt19937_64& rng) {
    int chosen = -1;
    std::uint64_t seen = 0;
    for (int g = 0; g < node.gpus; ++g) {
        const int free = node.gpu_free[static_cast<std::size_t>(g)];
        if (free < r.milli_per_gpu) {
            continue;
        }
        const int best = chosen < 0 ? 0 : node.gpu_free[static_cast<std::size_t>(chosen)];
        switch (how) {
            case GpuChoice::best_fit:
                if (chosen < 0 || free < best) {
                    chosen = g;
                }
                break;
            case GpuChoice::worst_fit:
                if (chosen < 0 || free > best) {
                    chosen = g;
                }
                break;
            case GpuChoice::random:
                ++seen;
                if (uniform_below(rng, seen) == 0) {
                    chosen = g;
                }
                break;
        }
    }
    return chosen;
}

void pack_take(PackNode& node, const PackRequest& r, const std::vector<int>& gpus) {
    node.cpu_milli_free -= r.cpu_milli;
    node.mem_free -= r.mem_mib;
    for (int g : gpus) {
        node.gpu_free[static_cast<std::size_t>(g)] -= r.milli_per_gpu;
    }
    const int tag = affinity_tag(r);
    if (tag >= 0) {
        ++node.tasks_by_tag[static_cast<std::size_t>(tag)];
    }
    ++node.version;
}

void pack_release(PackNode& node, const PackRequest& r, const std::vector<int>& gpus) {
    node.cpu_milli_free += r.cpu_milli;
    node.mem_free += r.mem_mib;
    for (int g : gpus) {
        node.gpu_free[static_cast<std::size_t>(g)] += r.milli_per_gpu;
    }
    const int tag = affinity_tag(r);
    if (tag >= 0) {
        --node.tasks_by_tag[static_cast<std::size_t>(tag)];
    }
    ++node.version;
}

std::vector<std::uint32_t> tie_order(std::size_t n, std::mt19937_64& rng) {
    std::vector<std::uint32_t> rank(n);
    for (std::size_t i = 0; i < n; ++i) {
        rank[i] = static_cast<std::uint32_t>(i);
    }
    shuffle_with(rank, rng);
    return rank;
}

void RequestKinds::number(PackRequest& r) {
    auto [it, fresh] = kinds_.try_emplace(
        std::tuple{r.cpu_milli, r.mem_mib, r.gpus, r.milli_per_gpu, r.models},
        static_cast<int>(kinds_.size()));
    r.kind = it->second;
}

std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
    // Lemire's multiply-shift with rejection: unbiased, and unlike std::uniform_int_distribution
    // it draws the same numbers with every standard library, so seeds mean the same everywhere.
    __uint128_t m = static_cast<__uint128_t>(rng()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
        const std::uint64_t threshold = (0 - n) % n;
        while (low < threshold) {
            m = static_cast<__uint128_t>(rng()) * n;
            low = static_cast<std::uint64_t>(m);
        }
    }
    return static_cast<std::uint64_t>(m >> 64);
}

}  // namespace carma

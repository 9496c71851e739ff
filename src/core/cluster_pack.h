#pragma once
// Packing declared requests onto a heterogeneous cluster, one task at a time: nodes with CPU
// (thousandths of a core), host memory and GPUs of one named model each; requests for a share of
// one GPU or for whole GPUs, restricted to some GPU models or not. This is the state the
// fragmentation-aware policies (core/pack_policies.h) score and the FGD protocol
// (sim/pack_protocol.h) drives. Pure: randomness comes in as a generator the caller seeds.

#include <array>
#include <map>
#include <tuple>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/task.h"
#include "core/units.h"

namespace carma {

// openb's largest nodes have 8 GPUs; DGX-class and HGX boards 8 or 16.
inline constexpr int kMaxPackGpusPerNode = 16;

// One node as a cluster description states it (openb's node list: sn, cpu_milli, memory_mib,
// gpu, model).
struct NodeSpec {
    std::string name;
    std::int64_t cpu_milli = 0;
    MiB mem_mib = 0;
    int gpus = 0;
    std::string gpu_model;  // "" for a node without GPUs
};

// GPU model names as small integers, so a node's model is compared without strings.
class GpuModelTable {
public:
    int intern(std::string_view name);
    int find(std::string_view name) const;  // -1 if no node has it
    const std::string& name(int id) const { return names_.at(static_cast<std::size_t>(id)); }

private:
    std::vector<std::string> names_;
};

// What one task asks of a node, in the packer's units.
struct PackRequest {
    std::int64_t cpu_milli = 0;
    MiB mem_mib = 0;
    int gpus = 0;                 // 0: CPU only
    int milli_per_gpu = 0;        // 1..999 a share of one GPU; 1000 whole GPUs; 0 CPU only
    std::vector<int> models;      // allowed GPU models by id; -1 stands for one no node has
    int kind = -1;                // index of the request's distinct shape, for scoring caches

    bool shares_a_gpu() const { return gpus == 1 && milli_per_gpu < kMilliPerGpu; }
    std::int64_t total_gpu_milli() const { return std::int64_t{gpus} * milli_per_gpu; }
};

// The request of a task: its CPU, host memory, GPU count or share and GPU models.
PackRequest pack_request(const TaskSpec& task, const GpuModelTable& models);

// Clustering (core/pack_policies.h) groups tasks by the shape of their GPU request.
inline constexpr int kShareTag = 0;  // tags 1..16: n whole GPUs
inline constexpr int kTagCount = kMaxPackGpusPerNode + 1;
int affinity_tag(const PackRequest& r);  // -1 for CPU only

// A node's state while tasks are packed onto it.
struct PackNode {
    std::int64_t cpu_milli_total = 0;
    std::int64_t cpu_milli_free = 0;
    MiB mem_total = 0;
    MiB mem_free = 0;
    int model = -1;  // -1: no GPUs
    int gpus = 0;
    std::array<int, kMaxPackGpusPerNode> gpu_free{};  // thousandths free on each GPU
    std::array<int, kTagCount> tasks_by_tag{};        // tasks placed, by affinity_tag
    std::uint32_t version = 0;                         // bumped by every take

    int gpu_free_total() const;
    int fully_free_gpus() const;
};

PackNode make_pack_node(const NodeSpec& spec, int model_id);

// A node with the wrong model, or no GPUs, for a GPU request; a CPU-only request may go anywhere.
bool model_allowed(const PackNode& node, const PackRequest& r);

// Whether the request fits now: CPU, host memory, and enough GPUs with its share free.
bool pack_fits(const PackNode& node, const PackRequest& r);

// How many GPUs could take one `milli_per_gpu` each.
int gpus_with_room(const PackNode& node, int milli_per_gpu);

// Which GPUs a fitting request gets. Whole GPUs are the lowest-numbered fully free ones; a share
// goes where the chooser says.
enum class GpuChoice { best_fit, worst_fit, random };
std::vector<int> exclusive_gpus(const PackNode& node, const PackRequest& r);
int share_gpu(const PackNode& node, const PackRequest& r, GpuChoice how, std::mt19937_64& rng);

// Takes the request's CPU, memory and the given GPUs' shares.
void pack_take(PackNode& node, const PackRequest& r, const std::vector<int>& gpus);
// Gives them back when the task ends (the timed replay: sim/pack_replay.h).
void pack_release(PackNode& node, const PackRequest& r, const std::vector<int>& gpus);

// A uniform index below n (n > 0) from the injected generator, the same on every platform.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n);

// Fisher-Yates with uniform_below: the same order for a seed on every platform.
template <typename T>
void shuffle_with(std::vector<T>& items, std::mt19937_64& rng) {
    for (std::size_t i = items.size(); i > 1; --i) {
        std::swap(items[i - 1], items[uniform_below(rng, i)]);
    }
}

// 0..n-1 in an order drawn from the generator: the nodes' tie-break order
// (core/pack_policies.h).
std::vector<std::uint32_t> tie_order(std::size_t n, std::mt19937_64& rng);

// Numbers the distinct request shapes (CPU, memory, GPUs, share, models) as they are met and
// sets PackRequest::kind, which PackScoreCache keys on.
class RequestKinds {
public:
    void number(PackRequest& r);
    int count() const { return static_cast<int>(kinds_.size()); }

private:
    std::map<std::tuple<std::int64_t, MiB, int, int, std::vector<int>>, int> kinds_;
};

}  // namespace carma

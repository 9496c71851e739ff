#pragma once
// Why a task waits, per GPU, grouped: GPUs turned down for the same reason are named once
// ("GPUs 0-3: warming up (...)") instead of one clause per GPU, which on an 8-GPU server made a
// waiting reason eight copies of one sentence. Clauses keep the order in which their first GPU
// came; the GPUs of a group are listed in ascending order, runs written as ranges. A group is one
// node's: the same clause on two nodes stays two groups ("GPUs 0-1 on a: ...; GPU 2 on b: ...").
// Pure: no I/O.

#include <string>
#include <utility>
#include <vector>

namespace carma {

class GpuClauses {
public:
    void add(int gpu, const std::string& node, std::string clause);
    bool empty() const { return groups_.empty(); }
    // "GPU 0: a; GPUs 1-3, 5: b"; "" when nothing was added.
    std::string text() const;

private:
    struct Group {
        std::string node;
        std::string clause;
        std::vector<int> gpus;
    };
    std::vector<Group> groups_;
};

// "0", "0-3", "0-1, 4, 6-7": ascending, each run of consecutive indices as a range.
std::string gpu_index_ranges(std::vector<int> gpus);

}  // namespace carma

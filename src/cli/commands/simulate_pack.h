#pragma once
// `carma simulate --cluster NODES.csv --trace PODS.csv --protocol fgd`: the cluster packing mode
// of `carma simulate` (simulate_pack.cpp).

#include <cstdint>
#include <string>

namespace carma::cli {

struct PackSimulateOptions {
    std::string cluster;
    std::string trace;
    std::string policies;
    std::string protocol = "fgd";
    double inflate = 1.3;
    std::uint64_t seed = 42;
    bool json = false;
};

int run_pack_simulation(const PackSimulateOptions& options);

}  // namespace carma::cli

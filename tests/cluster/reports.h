#pragma once
// What the hub's and the wire's tests send as a node would: a report of `gpus` emulated A100s,
// an attempt that ended, and the X-Carma-Auth header an agent holding its node key signs a body
// with.

#include <string>

#include "cluster/authenticator.h"
#include "cluster/wire.h"
#include "exec/clock.h"

namespace carma::cluster {

inline AgentReport report_of(const std::string& node, int gpus) {
    AgentReport r;
    r.node = node;
    r.slurm_job = "417";
    r.backend = "emulated:" + std::to_string(gpus) + "xA100-40GB";
    for (int i = 0; i < gpus; ++i) {
        device::GpuInfo g;
        g.index = i;
        g.uuid = "GPU-" + node + "-" + std::to_string(i);
        g.name = "A100-40GB (emulated)";
        g.total_mib = 40000;
        r.gpus.push_back(g);
        device::GpuSample s;
        s.index = i;
        s.free_mib = 30000 + i;
        s.used_mib = 10000;
        s.smact = 0.25;
        s.sources = MetricSources::all(MetricSource::Emulated);
        s.processes.push_back(device::GpuProcess{100 + i, 10000, false, 0.25});
        r.samples.push_back(s);
    }
    return r;
}

// Attempt 1 of task 12, ended with exit code 3, two processes seen.
inline AttemptReport ended_attempt() {
    AttemptReport a;
    a.name = "12-1";
    a.dir = "/state/attempts/12-1";
    a.shim_pid = 77;
    a.state = AttemptReport::State::Ended;
    a.exit = exec::ExitRecord{true, 3, std::nullopt, false, 123.5, ""};
    a.members = {5, 6};
    return a;
}

// Signed now with the key `master` gives `node`; "" when signing fails.
inline std::string signed_header(const std::string& node, const std::string& body,
                                 const std::string& master) {
    auto agent = auth::token_agent(node, auth::node_key(master, node));
    if (!agent) {
        return {};
    }
    auto signed_request = (*agent)->sign_request(body, exec::unix_now());
    return signed_request ? signed_request->header : std::string();
}

}  // namespace carma::cluster

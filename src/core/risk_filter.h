#pragma once
// The collocation risk filter (spec §1.9): a GPU whose SMs are busy and either crowded with warps
// or saturating DRAM gains nothing from another tenant, so it is dropped from the candidates.
//
// The paper's rule needs real SM activity plus SM occupancy or DRAM activity (DCGM profiling
// fields, NVML GPM, or the emulated GPUs). Real GPUs do not always give them, so the rule in force
// on a GPU follows from what its samples really measure (never from a 0 standing in for unknown):
//   paper       SMACT real, SMOCC and/or DRAMA real:
//               high iff SMACT >= T_smact and (SMOCC >= T_smocc or DRAMA >= T_drama), over the
//               terms that are known
//   smact-only  SMACT real, SMOCC and DRAMA unknown: high iff SMACT >= T_smact (busy SMs are
//               enough: the second condition cannot be checked, so it is assumed)
//   proxy       SMACT known only through NVML's utilisation rate (which is ~1.0 for almost any
//               training job) and DRAMA through the memory-controller rate: high iff
//               util >= T_smact and memory-controller rate >= T_drama (or util alone when that
//               rate is unknown). Weak: on busy GPUs it reduces to "memory interface busy".
//   blind       no activity metric at all: high iff the GPU already runs something, so nothing
//               is collocated there rather than collocated blindly.

#include <string>
#include <string_view>

#include "core/metric_window.h"

namespace carma {

struct RiskThresholds {
    double smact = 0.80;  // "SMs quite busy"
    double smocc = 0.45;  // "many resident warps"
    double drama = 0.40;  // "memory interface busy"
};

enum class RiskRule { Paper, SmactOnly, Proxy, Blind };

std::string_view to_string(RiskRule rule);

// The rule the metrics of this window allow.
RiskRule risk_rule(const WindowStats& w);

// The rule in words with its thresholds, e.g.
// "paper: SMACT >= 0.80 and (SMOCC >= 0.45 or DRAMA >= 0.40)".
std::string describe_rule(const WindowStats& w, const RiskThresholds& t);

// `in_use`: the GPU already runs a process (only the blind rule looks at it). Stats without
// order statistics (MetricWindow::stats_without_order_statistics) are high risk: the rule
// cannot be applied to risks never computed.
bool is_high_risk(const WindowStats& w, const RiskThresholds& t, bool in_use);

// Why a GPU was judged high risk, with the values the rule looked at.
std::string describe_risk(const WindowStats& w, const RiskThresholds& t);

}  // namespace carma

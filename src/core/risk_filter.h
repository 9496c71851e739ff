#pragma once
// The collocation risk filter (spec §1.9): a GPU whose SMs are busy and either crowded with warps
// or saturating DRAM gains nothing from another tenant, so it is dropped from the candidates.

#include <string>

#include "core/metric_window.h"

namespace carma {

struct RiskThresholds {
    double smact = 0.80;  // "SMs quite busy"
    double smocc = 0.45;  // "many resident warps"
    double drama = 0.40;  // "memory interface busy"
};

// High risk iff smact_risk >= T_smact AND (smocc_risk >= T_smocc OR drama_risk >= T_drama).
inline bool is_high_risk(const WindowStats& w, const RiskThresholds& t) {
    return w.smact.risk >= t.smact && (w.smocc.risk >= t.smocc || w.drama.risk >= t.drama);
}

std::string describe_risk(const WindowStats& w, const RiskThresholds& t);

}  // namespace carma

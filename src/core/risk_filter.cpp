#include "core/risk_filter.h"

#include <fmt/format.h>

namespace carma {

namespace {

bool real(const SeriesStats& s, MetricSource source) {
    return s.known > 0 && is_real_activity(source);
}

struct Terms {
    bool smocc = false;
    bool drama = false;
};

// Which second-condition terms the paper rule can use on this window.
Terms paper_terms(const WindowStats& w) {
    return {real(w.smocc, w.sources.smocc), real(w.drama, w.sources.drama)};
}

}  // namespace

std::string_view to_string(RiskRule rule) {
    switch (rule) {
        case RiskRule::Paper: return "paper";
        case RiskRule::SmactOnly: return "smact-only";
        case RiskRule::Proxy: return "proxy";
        case RiskRule::Blind: return "blind";
    }
    return "blind";
}

RiskRule risk_rule(const WindowStats& w) {
    if (real(w.smact, w.sources.smact)) {
        const Terms terms = paper_terms(w);
        return terms.smocc || terms.drama ? RiskRule::Paper : RiskRule::SmactOnly;
    }
    if (w.smact.known > 0 || w.util.known > 0) {
        return RiskRule::Proxy;
    }
    return RiskRule::Blind;
}

std::string describe_rule(const WindowStats& w, const RiskThresholds& t) {
    switch (risk_rule(w)) {
        case RiskRule::Paper: {
            const Terms terms = paper_terms(w);
            if (terms.smocc && terms.drama) {
                return fmt::format("paper: SMACT >= {:.2f} and (SMOCC >= {:.2f} or DRAMA >= {:.2f})",
                                   t.smact, t.smocc, t.drama);
            }
            return terms.smocc
                       ? fmt::format("paper: SMACT >= {:.2f} and SMOCC >= {:.2f} (DRAMA unknown)",
                                     t.smact, t.smocc)
                       : fmt::format("paper: SMACT >= {:.2f} and DRAMA >= {:.2f} (SMOCC unknown)",
                                     t.smact, t.drama);
        }
        case RiskRule::SmactOnly:
            return fmt::format("smact-only: SMACT >= {:.2f} (SMOCC and DRAMA unknown)", t.smact);
        case RiskRule::Proxy:
            return fmt::format(
                "proxy: NVML utilisation >= {:.2f} and memory-controller utilisation >= {:.2f} "
                "(no SM activity counters: install DCGM, or use a Hopper GPU for GPM)",
                t.smact, t.drama);
        case RiskRule::Blind:
            return "blind: no activity metric readable; a GPU in use takes no second task";
    }
    return {};
}

bool is_high_risk(const WindowStats& w, const RiskThresholds& t, bool in_use) {
    if (!w.order_statistics) {
        return true;  // the risks were never computed: a 0 would wave every GPU through
    }
    switch (risk_rule(w)) {
        case RiskRule::Paper: {
            const Terms terms = paper_terms(w);
            const bool crowded = (terms.smocc && w.smocc.risk >= t.smocc) ||
                                 (terms.drama && w.drama.risk >= t.drama);
            return w.smact.risk >= t.smact && crowded;
        }
        case RiskRule::SmactOnly: return w.smact.risk >= t.smact;
        case RiskRule::Proxy: {
            const SeriesStats& busy = w.smact.known > 0 ? w.smact : w.util;
            if (busy.risk < t.smact) {
                return false;
            }
            return w.drama.known == 0 || w.drama.risk >= t.drama;
        }
        case RiskRule::Blind: return in_use;
    }
    return true;
}

std::string describe_risk(const WindowStats& w, const RiskThresholds& t) {
    if (!w.order_statistics) {
        return "risk not computed (statistics without median, p95 and EMA)";
    }
    auto value = [](const SeriesStats& s) {
        return s.known > 0 ? fmt::format("{:.2f}", s.risk) : std::string("unknown");
    };
    switch (risk_rule(w)) {
        case RiskRule::Paper:
        case RiskRule::SmactOnly:
            return fmt::format("SMACT {} (>= {:.2f}) with SMOCC {} (limit {:.2f}) / DRAMA {} "
                               "(limit {:.2f}) [{}]",
                               value(w.smact), t.smact, value(w.smocc), t.smocc, value(w.drama),
                               t.drama, to_string(risk_rule(w)));
        case RiskRule::Proxy:
            return fmt::format("NVML utilisation {} (>= {:.2f}) with memory-controller {} (limit "
                               "{:.2f}) [proxy]",
                               value(w.smact.known > 0 ? w.smact : w.util), t.smact,
                               value(w.drama), t.drama);
        case RiskRule::Blind:
            return "in use and no activity metric is readable [blind]";
    }
    return {};
}

}  // namespace carma

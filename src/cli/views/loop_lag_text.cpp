#include "cli/views/loop_lag_text.h"

#include <fmt/format.h>

#include "cli/common/json_read.h"

namespace carma::cli {

namespace {

constexpr double kLateShare = 0.1;   // as the daemon's own "behind" (core/loop_lag.h)
constexpr double kFewPeriods = 100;  // fewer say nothing: a replay of seconds

}  // namespace

std::optional<std::string> replay_lag_warning(const nlohmann::json& before,
                                              const nlohmann::json& after) {
    const auto loop_of = [](const nlohmann::json& status) {
        return status.is_object() && status.contains("loop") && status["loop"].is_object()
                   ? status["loop"]
                   : nlohmann::json();
    };
    const nlohmann::json start = loop_of(before);
    const nlohmann::json end = loop_of(after);
    const std::optional<double> p0 = number_of(start, "periods");
    const std::optional<double> l0 = number_of(start, "late_periods");
    const std::optional<double> p1 = number_of(end, "periods");
    const std::optional<double> l1 = number_of(end, "late_periods");
    if (!p0 || !l0 || !p1 || !l1) {
        return std::nullopt;
    }
    const double periods = *p1 - *p0;
    const double late = *l1 - *l0;
    if (periods < kFewPeriods || late < kLateShare * periods) {
        return std::nullopt;
    }
    const double period_ms = number_of(end, "period_s").value_or(0) * 1000;
    return fmt::format(
        "the daemon fell behind its period during this replay: {:.0f} % of its {:.0f} periods "
        "({:.3g} ms each, time scale {:g}) ended half a period or more late, the worst by {:.1f} "
        "periods. Its samples, scheduling rounds and warm-up checks came less often than the "
        "scaled clock assumes, so these figures lose fidelity against `carma simulate`; restart "
        "the daemon with a lower --time-scale and replay at it",
        100 * late / periods, periods, period_ms, number_of(after, "time_scale").value_or(0),
        number_of(end, "worst_late_periods").value_or(0));
}

}  // namespace carma::cli

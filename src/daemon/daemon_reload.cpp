// A reload of the configuration (SIGHUP, systemd's ExecReload): what may change while tasks run
// changes between two ticks; what the daemon was built from (GPUs, state directory, listeners,
// the policy and its queues) is named as needing a restart and keeps its old value.

#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "daemon/config_check.h"
#include "daemon/daemon.h"

namespace carma::daemon {

namespace {

// Keys of config_keys() a reload applies. Policy knobs read afresh at each use (limits, shares,
// weights, mail, retries, grace, retention, preemption); not the policy, the GPUs, the paths or
// the listeners, which the daemon's parts were built from.
bool live_key(std::string_view key) {
    static const std::set<std::string_view> live = {
        "max_attempts",        "retry_failures",      "retention_days",
        "kill_grace_s",        "sendmail",            "shares",
        "fairshare_half_life", "fairshare_horizon",   "priority_weight_fairshare",
        "priority_weight_age", "groups_refresh",      "preemption",
        "preempt_min_run",     "preempt_margin",      "preempt_max_stops",
        "preempt_stops_window"};
    return key.starts_with("limits") || live.contains(key);
}

}  // namespace

Result<ReloadOutcome> Daemon::reload(DaemonConfig next) {
    // Filled as create() filled them: left empty, they mean what they meant at the start.
    if (next.shim_path.empty()) {
        next.shim_path = config_.shim_path;
    }
    auto checked = finalize(std::move(next));
    if (!checked) {
        return tl::unexpected(checked.error());
    }
    const DaemonConfig& n = *checked;
    ReloadOutcome out;
    for (const ConfigKey& k : config_keys()) {
        const std::string_view key = k.key;
        const std::string before = config_value(config_, key);
        const std::string after = config_value(n, key);
        if (before == after || after.empty()) {
            continue;  // unchanged, or a section's own line (its keys follow)
        }
        (live_key(key) ? out.changed : out.need_restart)
            .push_back(fmt::format("{}: {} -> {}", key, before, after));
    }
    out.warnings = share_warnings(n.shares);
    {
        // limits_mu_ first, as submit() takes them: submissions read the limits under it.
        std::lock_guard limits_lock(limits_mu_);
        std::lock_guard lock(mu_);
        config_.limits = n.limits;
        config_.max_attempts = n.max_attempts;
        config_.retry_failures = n.retry_failures;
        config_.retention_days = n.retention_days;
        config_.kill_grace_s = n.kill_grace_s;
        config_.sendmail = n.sendmail;
        config_.shares = n.shares;
        config_.fairshare_half_life_s = n.fairshare_half_life_s;
        config_.fairshare_horizon_s = n.fairshare_horizon_s;
        config_.priority_weight_fairshare = n.priority_weight_fairshare;
        config_.priority_weight_age = n.priority_weight_age;
        config_.groups_refresh_s = n.groups_refresh_s;
        config_.preemption = n.preemption;
        submit_rate_.set_limits(n.limits);
        scheduler_.retune(n.limits, n.priority_weight_fairshare, n.priority_weight_age);
        ledger_.set_half_life(n.fairshare_half_life_s);
        groups_.set_lifetime(n.groups_refresh_s);
        preemption_budget_.reconfigure(n.preemption.max_stops_per_user,
                                       n.preemption.stops_window_s);
    }
    return out;
}

void Daemon::reload_from(const std::function<Result<DaemonConfig>()>& reread) {
    Result<DaemonConfig> next = fail(ErrorCode::InvalidArgument, "no configuration to re-read");
    if (reread) {
        next = reread();
    }
    Result<ReloadOutcome> done = tl::unexpected(next ? Error{} : next.error());
    if (next) {
        done = reload(std::move(*next));
    }
    if (!done) {
        spdlog::error("reload refused, the configuration in use stays: {}", done.error().message);
        event(0, "reload-refused", done.error().message);
        return;
    }
    for (const std::string& w : done->warnings) {
        spdlog::warn("{}", w);
    }
    for (const std::string& c : done->changed) {
        spdlog::info("reload: {}", c);
    }
    for (const std::string& c : done->need_restart) {
        spdlog::warn("reload: {} needs a restart (systemctl restart carma); the old value stays "
                     "until then",
                     c);
    }
    event(0, "reloaded",
          done->changed.empty() && done->need_restart.empty()
              ? std::string("configuration re-read: nothing changed")
              : fmt::format("configuration re-read: {} key(s) changed{}", done->changed.size(),
                            done->need_restart.empty()
                                ? std::string()
                                : fmt::format(", {} need a restart: {}", done->need_restart.size(),
                                              fmt::join(done->need_restart, "; "))));
}

}  // namespace carma::daemon

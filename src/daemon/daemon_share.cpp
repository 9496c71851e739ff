// Fair share in the daemon (core/fair_share.h): what each live attempt is charged tick by tick,
// the users' standings the scheduler orders by before each round, the ledger kept in the store,
// and GET /v1/share. Everything here runs with the daemon's lock held.

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace carma::daemon {

namespace {

// Ticks between two writes of the ledger and of the running attempts' charges: a restart loses
// a few seconds of usage at most.
constexpr std::uint64_t kSaveEveryTicks = 10;

// The names of the Unix groups `user` is a member of (its primary group included); none for a
// user the system does not know.
std::vector<std::string> unix_groups(const std::string& user) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
        return {};
    }
    int count = 64;
    std::vector<gid_t> gids(static_cast<std::size_t>(count));
    if (getgrouplist(user.c_str(), pw.pw_gid, gids.data(), &count) < 0) {
        gids.resize(static_cast<std::size_t>(count));
        if (getgrouplist(user.c_str(), pw.pw_gid, gids.data(), &count) < 0) {
            return {};
        }
    }
    gids.resize(static_cast<std::size_t>(count));
    std::vector<std::string> names;
    for (gid_t gid : gids) {
        struct group gr {};
        struct group* hit = nullptr;
        std::vector<char> gbuf(65536);
        if (getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &hit) == 0 && hit != nullptr) {
            names.emplace_back(hit->gr_name);
        }
    }
    return names;
}

}  // namespace

Result<void> Daemon::load_usage() {
    ledger_ = UsageLedger(config_.fairshare_half_life_s);
    auto rows = store_->usage();
    if (!rows) {
        return fail(rows.error().code,
                    fmt::format("cannot read the fair-share usage from {}/carma.db: {}; not "
                                "started, since starting from none would overwrite it at the "
                                "first save. Check the database (sqlite3 carma.db 'PRAGMA "
                                "integrity_check'), or restore it from a backup",
                                config_.state_dir, rows.error().message));
    }
    std::map<std::string, UsageEntry> entries;
    for (const auto& [user, row] : *rows) {
        entries[user] = UsageEntry{row.gpu_s, clock_of(row.at_s)};  // decays across the restart
    }
    ledger_ = UsageLedger(config_.fairshare_half_life_s, std::move(entries));
    return {};
}

void Daemon::save_usage() {
    std::map<std::string, store::UsageRow> rows;
    const double clock = now();
    const double unix = unix_now();
    for (const auto& [user, e] : ledger_.entries()) {
        rows[user] = store::UsageRow{e.gpu_s, unix - (clock - e.at_s) / config_.time_scale};
    }
    if (auto saved = store_->save_usage(rows); !saved) {
        spdlog::warn("cannot record the fair-share usage: {}", saved.error().message);
    }
}

// An attempt pays per GPU and second the larger of its share of the GPU's memory (what its
// processes hold) and of its SM activity (its processes' own), or the whole GPU when it runs
// alone: by request (--exclusive; --max-slowdown under a policy that predicts no slowdown) or
// under a policy that never shares. A GPU its processes were never seen on is paid whole too,
// as if exclusive: it holds the GPU (a `sleep`, work in a container outside its process tree),
// and what it does there cannot be measured. A CPU-only attempt pays its cores at
// host.cpu_billing_weight per core (one for a task on the shared cores). Time is the scheduler's
// clock.
void Daemon::charge_usage() {
    const double clock = now();
    const PolicySpec& policy = scheduler_.config().policy;
    std::map<int, MiB> total_mib;
    for (const device::GpuSample& s : last_samples_) {
        total_mib[s.index] = s.free_mib + s.used_mib;
    }
    for (auto& [id, live] : live_) {
        if (live.charged_until < 0) {
            live.charged_until = clock;
            continue;
        }
        const double dt = clock - live.charged_until;
        live.charged_until = clock;
        if (!(dt > 0)) {
            continue;
        }
        const double reserved = policy.task_reserved_share(live.exclusive, live.max_slowdown, live.gpu_milli);
        double fraction = 0;
        for (int g : live.gpus) {
            const auto total = total_mib.find(g);
            const auto held = live.held_now.find(g);
            const double memory_share =
                total != total_mib.end() && total->second > 0 && held != live.held_now.end()
                    ? static_cast<double>(held->second) / static_cast<double>(total->second)
                    : 0.0;
            const auto active = live.activity_now.find(g);
            const double sm_share = active != live.activity_now.end() ? active->second : 0.0;
            // Unseen work pays the whole GPU, as `--exclusive` does.
            fraction += charge_fraction(memory_share, sm_share,
                                        live.seen_on.contains(g) ? reserved : 1.0);
        }
        if (live.gpus.empty()) {
            fraction = cpu_charge_rate(live);
        }
        live.charge_rate = fraction;
        const double gpu_s = fraction * dt;
        live.charged_gpu_s += gpu_s;
        live.charge_changed = true;
        ledger_.add(live.user, gpu_s, clock);
    }
    if (ticks_ % kSaveEveryTicks == 3) {
        for (auto& [id, live] : live_) {
            if (live.charge_changed) {
                if (auto r = store_->set_attempt_charge(id, live.number, live.charged_gpu_s); r) {
                    live.charge_changed = false;
                }
            }
        }
        save_usage();
    }
}

ChargeRates Daemon::charge_rates() const {
    ChargeRates rates;
    for (const auto& [id, live] : live_) {
        rates[live.user] += charge_rate_of(live);
    }
    return rates;
}

double Daemon::cpu_charge_rate(const LiveAttempt& live) const {
    return config_.host.cpu_billing_weight * std::max(live.host.cpus, 1);
}

double Daemon::charge_rate_of(const LiveAttempt& live) const {
    if (live.charge_rate > 0) {
        return live.charge_rate;
    }
    if (live.gpus.empty()) {
        return cpu_charge_rate(live);
    }
    MiB usable = 0;
    for (const device::GpuSample& s : last_samples_) {
        if (!live.gpus.empty() && s.index == live.gpus.front()) {
            usable = s.free_mib + s.used_mib;
        }
    }
    return expected_charge_rate(
        live.learned, usable, static_cast<int>(live.gpus.size()),
        scheduler_.config().policy.task_reserved_share(live.exclusive, live.max_slowdown, live.gpu_milli));
}

// The groups of `users` where shares name groups. Looked up again once groups_refresh old: a
// user removed from a group loses its shares within that (they were kept until the daemon
// restarted).
void Daemon::look_up_groups(const std::set<std::string>& users) {
    const bool groups = std::any_of(config_.shares.begin(), config_.shares.end(),
                                    [](const auto& kv) { return kv.first.starts_with("@"); });
    if (!groups) {
        return;
    }
    const double real = steady_now();
    for (const std::string& user : users) {
        if (groups_.stale(user, real)) {
            groups_.put(user, unix_groups(user), real);
        }
    }
}

// Every user the scheduler may ask about: those with usage or running attempts (the limits count
// what they run) and, where the order reads F, those with waiting tasks. It runs before every
// round, so the queue is not walked: the scheduler names its users from its per-user buckets.
void Daemon::stand_users() {
    std::set<std::string> users;
    for (const auto& [user, e] : ledger_.entries()) {
        users.insert(user);
    }
    std::map<std::string, RunningUse> running;
    for (const auto& [id, live] : live_) {
        users.insert(live.user);
        RunningUse& use = running[live.user];
        use.hold(live.gpus);  // physical GPUs: collocated tasks count once
        use.tasks += 1;
    }
    for (std::string& user : scheduler_.ordered_users()) {
        users.insert(std::move(user));
    }
    look_up_groups(users);
    const ShareTable shares = build_share_table(config_.shares, groups_.groups(), users);
    const std::map<std::string, double> factors =
        fair_share_factors(ledger_, shares, now(), charge_rates(), config_.fairshare_horizon_s);
    UserStandings standings;
    for (const std::string& user : users) {
        UserStanding s;
        const auto f = factors.find(user);
        s.factor = f != factors.end() ? f->second : 1.0;
        const auto r = running.find(user);
        if (r != running.end()) {
            s.running = r->second;
        }
        standings[user] = s;
    }
    scheduler_.set_standings(std::move(standings));
}

std::map<std::string, nlohmann::json> Daemon::share_rows(
    const std::vector<store::StateCount>& counts) {
    stand_users();
    const double clock = now();
    std::set<std::string> users;
    for (const auto& [user, standing] : scheduler_.standings()) {
        users.insert(user);
    }
    // Waiting as the per-user limits count it: queued (behind a dependency too), recovering,
    // held.
    std::map<std::string, std::size_t> waiting;
    for (const store::StateCount& c : counts) {
        if (c.state == store::TaskState::Queued || c.state == store::TaskState::Recovering ||
            c.state == store::TaskState::Held) {
            users.insert(c.user);
            waiting[c.user] += c.count;
        }
    }
    // A user with held tasks only is not among the scheduler's: their groups' shares too.
    look_up_groups(users);
    const ShareTable shares = build_share_table(config_.shares, groups_.groups(), users);
    double share_sum = 0;
    for (const auto& [user, n] : shares) {
        share_sum += n;
    }
    const double total = ledger_.total(clock);
    const ChargeRates rates = charge_rates();
    std::map<std::string, nlohmann::json> rows;
    for (const std::string& user : users) {
        const auto standing = scheduler_.standings().find(user);
        const bool stands = standing != scheduler_.standings().end();
        const double usage = ledger_.usage(user, clock);
        const auto n = shares.find(user);
        rows[user] = {
            {"user", user},
            {"shares", n != shares.end() ? n->second : 1.0},
            {"shares_norm", share_sum > 0 && n != shares.end() ? n->second / share_sum : 0.0},
            {"usage_gpu_hours", usage / 3600},
            {"usage_norm", total > 0 ? usage / total : 0.0},
            {"charge_now", rates.contains(user) ? rates.at(user) : 0.0},
            {"factor", stands ? standing->second.factor : 1.0},
            {"gpus_running", stands ? standing->second.running.gpus : 0},
            {"tasks_running", stands ? standing->second.running.tasks : 0},
            {"tasks_waiting", waiting[user]},
            // Stops made for the user's waiting tasks within preempt_stops_window.
            {"preemption_stops", preemption_budget_.stops_for(user, clock)}};
    }
    return rows;
}

api::ApiResult<nlohmann::json> Daemon::share(const api::Caller&) {
    auto counts = store_->live_counts();
    if (!counts) {
        return api::api_fail(500, counts.error().message);
    }
    std::lock_guard lock(mu_);
    nlohmann::json rows = nlohmann::json::array();
    for (auto& [user, row] : share_rows(*counts)) {
        rows.push_back(std::move(row));
    }
    const CarmaConfig& carma = scheduler_.config().carma;
    return nlohmann::json{
        {"fair_share", scheduler_.config().policy.carma && carma.fair_share},
        {"half_life_s", config_.fairshare_half_life_s},
        {"horizon_s", config_.fairshare_horizon_s},
        {"weights", {{"fair_share", carma.fair_share_weight}, {"age", carma.age_weight}}},
        // What usage is charged in (Slurm's TRESBillingWeights): GPU-seconds per GPU-second
        // held (its larger share of memory and SM; a GPU never seen used, whole), and per
        // core-second of a CPU-only task.
        {"billing", {{"gpu", 1.0}, {"cpu_core", config_.host.cpu_billing_weight}}},
        {"preemption",
         {{"enabled", config_.preemption.enabled},
          {"max_stops_per_user", config_.preemption.max_stops_per_user},
          {"stops_window_s", config_.preemption.stops_window_s}}},
        {"limits",
         {{"max_gpus_per_user", config_.limits.max_gpus_per_user},
          {"max_running_per_user", config_.limits.max_running_per_user}}},
        {"users", rows}};
}

}  // namespace carma::daemon

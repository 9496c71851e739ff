#pragma once
// Fair share (issue 23): what a task is charged for the GPUs it takes, usage decayed with a
// half-life, shares per user (Unix groups as accounts), Slurm's classic fair-share factor and the
// priority `carma` orders waiting tasks by. Pure: times, group membership and usage come in as
// arguments; the daemon and the simulator keep the ledger and call these.
//
// Charge: an attempt pays, per second and per GPU it holds, charge_fraction(memory share, SM
// share, exclusive): the larger of its share of the GPU's memory and its share of the GPU's SM
// activity, or the whole GPU when it runs exclusive (`--exclusive`, or a policy that never
// shares). So a task that shares a GPU pays for what it really takes, which no peer does.
//
// Usage: GPU-seconds charged, decayed by half every half_life_s: usage(t) = u * 2^(-(t - t0) / h).
//
// Shares: `shares: {alice: 2, "@phd": 3}` in the configuration; every other user has
// default_shares (1). A group account `@g` has its shares split equally among its members that
// are known users without an entry of their own; a user in several such groups gets a part of
// each. A user with an entry of their own gets exactly that.
//
// Factor (Slurm's classic): F = 2^(-U/S), U = the user's usage / every user's (0 while nobody
// used anything), S = the user's shares / the sum of the known users' shares. F is 1 for a user
// who used nothing, 0.5 for one who used exactly their share, towards 0 beyond.
//
// The usage U reads is the decayed usage plus what the user's running tasks will be charged over
// the next horizon_s at the rate they are charged now (`fairshare_horizon`, default 1 h; 0 is
// Slurm's classic, usage alone). Without it F moves only as charges accrue: while every user has
// work waiting, the user of the highest F takes every GPU that frees until their usage overtakes
// the next user's, then that one takes them all. Over an hour one user got 45 % of the GPUs and
// another 0.4 % (docs/evaluation.md section 11). With it, a user's F drops the moment their tasks
// are placed (expected_charge_rate until they are charged), so the GPUs that free next go to the
// others.
//
// Priority of a waiting task under `carma` (CarmaConfig's weights):
//   P = fair_share_weight * F(user) + age_weight * [waited >= max_wait_s] - nice
// Higher first. Among equal P, carma's own order: tasks past their bounded wait by arrival, then
// the shortest expected run first. The bounded wait is a priority component, not an override: a
// flood of overdue tasks of a heavy user does not pass a light user of higher F (with the
// default weights, 10000 * dF > 1000 once F differs by more than 0.1).

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/task.h"

namespace carma {

// The fraction of a GPU an attempt is charged for, in [0, 1]: the largest of its memory share,
// its SM share and the share it keeps from others (PolicySpec::task_reserved_share: 1 when it
// runs alone, 1/S under a slowdown bound S, its --gpu-share), clamped to [0, 1]. A task pays
// for what it denies others, not only for what it uses.
double charge_fraction(double memory_share, double sm_share, double reserved_share);

// GPUs' worth a task that has not been charged yet (starting: no reading of its own so far) is
// expected to be charged per second: per GPU it holds, charge_fraction of its learned need over
// the GPU's usable memory and its learned activity; a figure it lacks counts as the whole GPU.
// So a task counts in its user's factor from the moment it is placed, not from its first reading.
double expected_charge_rate(const Learned& learned, MiB usable_mib, int gpus,
                            double reserved_share);

// `usage` decayed over `dt_s` seconds with a half-life of `half_life_s` (<= 0 or infinite: no
// decay; dt_s <= 0: unchanged).
double decay(double usage, double dt_s, double half_life_s);

// Decayed GPU-seconds charged per user, each figure as of the time it was last brought up to
// date. Plain data: the daemon persists entries() and restores them with the constructor.
struct UsageEntry {
    double gpu_s = 0;  // decayed GPU-seconds as of at_s
    double at_s = 0;
    bool operator==(const UsageEntry&) const = default;
};

class UsageLedger {
public:
    explicit UsageLedger(double half_life_s = 7 * 24 * 3600.0,
                         std::map<std::string, UsageEntry> entries = {});

    // Charges `gpu_s` GPU-seconds to `user` at `now` (earlier usage decayed to now first).
    void add(const std::string& user, double gpu_s, double now);
    // The user's decayed usage at `now` (0 for a user never charged).
    double usage(const std::string& user, double now) const;
    // Every user's, summed.
    double total(double now) const;

    double half_life_s() const { return half_life_s_; }
    // A reload: usage decays at the new half-life from now on.
    void set_half_life(double half_life_s) { half_life_s_ = half_life_s; }
    const std::map<std::string, UsageEntry>& entries() const { return entries_; }

private:
    double half_life_s_;
    std::map<std::string, UsageEntry> entries_;
};

// User -> effective shares (groups resolved).
using ShareTable = std::map<std::string, double>;

// `configured`: the configuration's shares, users by name and groups as "@group";
// `groups_of`: the groups each user is a member of (resolved by the caller, e.g. getgrouplist);
// `users`: every user seen (submitters, users with usage). Every user in `users` gets an entry.
ShareTable build_share_table(const std::map<std::string, double>& configured,
                             const std::map<std::string, std::vector<std::string>>& groups_of,
                             const std::set<std::string>& users, double default_shares = 1);

// 2^(-usage_norm / shares_norm); 0 when shares_norm <= 0 (a user of no shares comes last).
double fair_share_factor(double usage_norm, double shares_norm);

// GPUs' worth each user's running tasks are charged per second now (their charge fractions
// times the GPUs they hold, summed), by user.
using ChargeRates = std::map<std::string, double>;

// F of every user in `shares` at `now`, from the ledger and the running tasks' charge over the
// next `horizon_s` (a user of the ledger or of `running` missing from the table counts in the
// total usage but gets no factor).
std::map<std::string, double> fair_share_factors(const UsageLedger& ledger,
                                                 const ShareTable& shares, double now,
                                                 const ChargeRates& running = {},
                                                 double horizon_s = 0);

struct PriorityWeights {
    double fair_share = 10000;
    double age = 1000;
};

// P of the header: `overdue` is whether the task waited max_wait_s or longer.
double task_priority(const PriorityWeights& weights, double factor, bool overdue, int nice);

}  // namespace carma

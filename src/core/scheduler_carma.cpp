// Scheduler::step under `carma` (core/scheduler.h): the head of the waiting tasks placed or planned
// for (steps 1-4), then the others backfilled around its plan (step 5), with the candidates of a
// busy round kept between rounds while nothing they depend on changed.

#include "core/scheduler.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/gpu_share.h"
#include "core/mps_share.h"
#include "core/scheduler_order.h"

namespace carma {

namespace {

// Waiting tasks of a round whose reason carma spells out, beyond the head: formatting costs more
// than deciding, and people read the first few.
constexpr std::size_t kExplainedWaiting = 16;

std::string rough_duration(double s) {
    if (s >= 3600) {
        return fmt::format("{:.1f} h", s / 3600);
    }
    if (s >= 60) {
        return fmt::format("{:.0f} min", s / 60);
    }
    return fmt::format("{:.0f} s", s);
}

}  // namespace

bool Scheduler::candidates_fresh(double now, TaskId head) const {
    if (candidates_version_ != queue_version_ || candidates_head_ != head) {
        return false;
    }
    if (!config_.policy.by_run_time()) {
        return true;  // arrival order: time changes nothing
    }
    // The order changes with time only when a task's bounded wait runs out between the two
    // moments (aged: queued_at + max_wait_s <= now).
    const double lo = std::min(now, candidates_now_);
    const double hi = std::max(now, candidates_now_);
    const auto next = ages_.upper_bound(lo);
    return next == ages_.end() || *next > hi;
}

void Scheduler::index_first_of_class() {
    const std::size_t count = candidates_.size();
    // First pass: 1 where a candidate's class came before it; second, from the back: where the
    // next first candidate of a class is.
    next_class_at_.assign(count, 0);
    class_seen_.assign(class_refs_.size(), 0);
    for (std::size_t k = 0; k < count; ++k) {
        char& seen = class_seen_[candidates_[k].decision_class];
        next_class_at_[k] = seen;
        seen = 1;
    }
    std::size_t next = count;
    for (std::size_t k = count; k-- > 0;) {
        const bool first = next_class_at_[k] == 0;
        next_class_at_[k] = next;
        if (first) {
            next = k;
        }
    }
}

StepResult Scheduler::step_carma(double now, const CapacitySummary& capacity) {
    StepResult result;
    const PlacementConfig& pc = config_.placement;
    const std::size_t n = scratch_.size();
    open_.assign(n, 0);
    allowed_.assign(n, 1);
    // Predictions stay from round to round while the predictor's answers do (each GPU's also
    // checks that GPU's tasks on every use); without a version, for this round only.
    predictions_.resize(n);
    readiness_.resize(n);
    const std::optional<std::uint64_t> version =
        pc.predictor_version ? std::optional<std::uint64_t>(pc.predictor_version()) : std::nullopt;
    if (!version || version != predictions_version_) {
        for (GpuPredictions& p : predictions_) {
            p.clear();
        }
    }
    predictions_version_ = version;
    ++epoch_;
    available_.resize(n);
    idle_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        open_[i] = carma_gpu_open(config_.policy, scratch_[i], pc.risk) == FilterOutcome::Pass;
        refresh_room(i);
    }

    // Per-user running limits: a task whose user is at one is passed over, its reason kept.
    const bool limited = has_running_limits(config_.limits);
    std::vector<Waiting> held;
    auto at_limit = [&](const QueuedTask& t) {
        if (!limited) {
            return false;
        }
        std::optional<std::string> why = limit_reason(t);
        if (why && pc.explain && held.size() < kExplainedWaiting &&
            std::none_of(held.begin(), held.end(),
                         [&](const Waiting& w) { return w.task == t.id; })) {
            held.push_back(Waiting{t.id, std::move(*why)});
            return true;
        }
        return why.has_value();
    };
    const QueuedTask* head = nullptr;
    bool head_recovered = false;
    CarmaNeed head_need;
    while (true) {
        head = nullptr;
        for (const QueuedTask& t : recovery_) {
            if (!at_limit(t)) {
                head = &t;
                break;
            }
        }
        head_recovered = head != nullptr;
        if (!head_recovered) {
            carma_order(now, [&](const QueuedTask& t) {
                if (at_limit(t)) {
                    return false;
                }
                head = &t;
                return true;
            });
            if (head == nullptr) {
                break;
            }
        }
        if (auto ok = feasible(head->spec, capacity, MemoryKnowledge::Learned); !ok) {
            result.rejected.push_back(Rejection{head->id, ok.error().message});
            remove(head->id);
            continue;
        }
        head_need = carma_need(head->spec, head_recovered, pc);
        if (head->spec.gpus == 0) {
            const int host = pick_host(head->spec, false, &result.pending_reason);
            if (host == kNoHostFits) {
                result.pending_task = head->id;
                result.pending_reason =
                    fmt::format("{} waits for {}", head->spec.name, result.pending_reason);
                break;
            }
            commit_host_only(*head, host);
            result.placed.push_back(Placement{head->id, {}, head_recovered, false,
                                              host < 0 ? std::string() : hosts_[host].node});
            remove(head->id);
            continue;
        }
        if (std::string why = host_wait(head->spec, false); !why.empty()) {
            result.pending_task = head->id;
            result.pending_reason = fmt::format("{} waits for {}", head->spec.name, why);
            break;
        }
        mask_hosts(head->spec, false, allowed_);
        Selection sel =
            carma_select(config_.policy, head->spec, head_need, scratch_, open_, allowed_, pc,
                         config_.carma, predictions_, available_);
        std::fill(allowed_.begin(), allowed_.end(), 1);
        if (sel.gpus.empty()) {
            result.pending_task = head->id;
            result.pending_reason = std::move(sel.pending_reason);
            break;
        }
        commit(*head, sel.gpus, now);
        std::string node = node_of(sel.gpus);
        result.placed.push_back(Placement{head->id, std::move(sel.gpus), head_recovered,
                                          sel.exclusive, std::move(node)});
        remove(head->id);
    }
    result.waiting = std::move(held);
    if (head == nullptr) {
        return result;
    }
    if (pc.explain) {
        result.waiting.insert(result.waiting.begin(), Waiting{head->id, result.pending_reason});
    }
    if (!config_.policy.backfill) {
        return result;
    }

    // Backfilling around the waiting head.
    // A CPU-only head keeps no GPU: only its cores and memory, on every node.
    const HeadPlan plan =
        head->spec.gpus == 0
            ? HeadPlan{kNeverS, std::vector<char>(n, 0)}
            : plan_head(head->spec, head_need, scratch_, open_, now, config_.warmup.settle_s,
                        readiness_);
    reserve_host_for(head->spec, plan.shadow);
    // Under fair share among several users, the first waiting task of each other user gets a
    // reservation too (on GPUs no earlier one holds), and a task behind it backfills only where
    // it delays none of them (Slurm's backfill reserves for every higher-priority job): with
    // the head's alone, a flood's tasks refilled every other GPU as it freed, and the users who
    // go first still queued behind one draining GPU.
    struct Reservation {
        const QueuedTask* task;
        CarmaNeed need;
        HeadPlan plan;
    };
    std::vector<Reservation> reserved;
    std::size_t users_waiting = 0;  // buckets_ is ordered by (user, nice)
    if (config_.carma.fair_share) {
        const std::string* last = nullptr;
        for (const auto& [key, bucket] : buckets_) {
            users_waiting += last == nullptr || *last != key.first ? 1 : 0;
            last = &key.first;
        }
    }
    std::vector<char> taken;  // GPUs the head or a reservation holds (only with several users)
    if (users_waiting > 1) {
        taken = plan.shadow;
    }
    auto some_gpu_free = [&] {
        return std::any_of(taken.begin(), taken.end(), [](char c) { return c == 0; });
    };
    // Whether a task met now may still earn a reservation: some user waits without one, and
    // some GPU is not reserved yet.
    bool reserving = users_waiting > 1 && some_gpu_free();
    auto has_reservation = [&](const std::string& user) {
        return user == head->spec.user ||
               std::any_of(reserved.begin(), reserved.end(),
                           [&](const Reservation& r) { return r.task->spec.user == user; });
    };
    // `need`: carma_need of `t`, asked only when it gets one. A task its user's running limit
    // holds back could not take a GPU kept for it.
    auto reserve = [&](const QueuedTask& t, auto need) {
        if (!reserving || t.spec.gpus == 0 || has_reservation(t.spec.user) ||
            (limited && limit_reason(t))) {
            return;
        }
        const CarmaNeed own = need();
        HeadPlan p = plan_head(t.spec, own, scratch_, open_, now, config_.warmup.settle_s, {},
                               taken);
        if (std::none_of(p.shadow.begin(), p.shadow.end(), [](char c) { return c != 0; })) {
            return;
        }
        for (std::size_t i = 0; i < n; ++i) {
            taken[i] = taken[i] != 0 || p.shadow[i] != 0 ? 1 : 0;
        }
        reserved.push_back(Reservation{&t, own, std::move(p)});
        reserving = reserved.size() + 1 < users_waiting && some_gpu_free();
    };
    // For a reason: the GPUs turned down to `t` because another user's task keeps them (the
    // head is named already), as "; GPUs 1, 3 kept for task 12 of bob". A GPU's holder is the
    // last reservation over it, as the placement loop reads it.
    auto kept_for_others = [&](const QueuedTask& t) {
        std::vector<std::pair<const Reservation*, std::vector<int>>> kept;
        for (std::size_t i = 0; i < n; ++i) {
            const Reservation* holder = nullptr;
            for (const Reservation& r : reserved) {
                holder = r.plan.shadow[i] != 0 ? &r : holder;
            }
            if (holder == nullptr || holder->task == &t || allowed_[i] != 0) {
                continue;
            }
            auto same = std::find_if(kept.begin(), kept.end(),
                                     [&](const auto& k) { return k.first == holder; });
            if (same == kept.end()) {
                same = kept.insert(kept.end(), {holder, {}});
            }
            same->second.push_back(scratch_[i].index);
        }
        std::string text;
        for (const auto& [r, gpus] : kept) {
            text += fmt::format("; GPU{} {} kept for task {}{}", gpus.size() > 1 ? "s" : "",
                                fmt::join(gpus, ", "), r->task->id,
                                r->task->spec.user.empty() ? "" : " of " + r->task->spec.user);
        }
        return text;
    };
    // What the GPUs could take now (the most planned available memory of an open one; whether
    // one is idle), after each placement: most candidates of a busy round are turned down on it
    // alone. (available_ and idle_ per GPU are kept up to date by commit.)
    auto roomiest = [&](bool& idle_open) {
        MiB most = -1;
        idle_open = false;
        for (std::size_t i = 0; i < n; ++i) {
            idle_open = idle_open || idle_[i] != 0;
            if (open_[i] != 0) {
                most = std::max(most, available_[i]);
            }
        }
        return most;
    };
    bool idle_open = false;
    MiB most = roomiest(idle_open);
    if (most < 0 && !idle_open && host_only_waiting_ == 0) {
        return result;  // every GPU is closed this round, and every task wants one
    }
    if (!candidates_fresh(now, head->id)) {
        candidates_.clear();
        if (config_.carma.backfill_depth > 0) {
            carma_order(now, [&](const QueuedTask& t) {
                if (t.id != head->id) {
                    candidates_.push_back(Candidate{&t, t.decision_class});
                }
                return candidates_.size() >= config_.carma.backfill_depth;
            });
        }
        index_first_of_class();
        candidates_version_ = queue_version_;
        candidates_now_ = now;
        candidates_head_ = head->id;
    }
    const std::string wait_text =
        !pc.explain            ? std::string()
        : plan.start == kNeverS ? fmt::format("start of {} not predictable", head->spec.name)
                                : fmt::format("predicted start of {} in {}", head->spec.name,
                                              rough_duration(plan.start - now));
    // Until the round places or rejects a task, every class met is turned down at its first
    // task, so the loop goes from one class's first task to the next class's (a backlog's 256
    // candidates hold a few dozen classes, and rounds without a placement are most of a run);
    // the tasks it passes over would each be skipped below. Not while reasons are spelled out,
    // nor while a task passed over could earn a reservation. (A reservation leaves what was
    // turned down turned down: it only takes GPUs away.)
    bool unchanged = true;
    auto next = [&](std::size_t k) {
        const bool explaining = pc.explain && result.waiting.size() <= kExplainedWaiting;
        return unchanged && !explaining && !reserving ? next_class_at_[k] : k + 1;
    };
    for (std::size_t k = 0; k < candidates_.size(); k = next(k)) {
        const Candidate& candidate = candidates_[k];
        if (most < 0 && !idle_open && host_only_waiting_ == 0) {
            break;
        }
        const bool explain = pc.explain && result.waiting.size() <= kExplainedWaiting;
        // Same answer as a task of its class turned down since the last placement; a task
        // whose reason is spelled out is examined for its own words.
        const QueuedTask& t = *candidate.task;
        if (!explain && class_waited_[candidate.decision_class] == epoch_) {
            reserve(t, [&] { return carma_need(t.spec, false, pc); });
            continue;
        }
        if (limited) {
            if (auto why = limit_reason(t)) {
                // Not a turn-down of its class: the next task of the class may be another
                // user's, so the round stops jumping from class to class.
                unchanged = false;
                if (explain) {
                    result.waiting.push_back(Waiting{t.id, std::move(*why)});
                }
                continue;
            }
        }
        // Feasibility reads only what the class key holds: checked once per class and GPU set.
        if (class_feasible_[t.decision_class] != capacity_generation_) {
            if (auto ok = feasible(t.spec, capacity, MemoryKnowledge::Learned); !ok) {
                result.rejected.push_back(Rejection{t.id, ok.error().message});
                remove(t.id);
                unchanged = false;
                continue;
            }
            class_feasible_[t.decision_class] = capacity_generation_;
        }
        // Cores and host memory first: a CPU-only task needs nothing else, and a GPU task that
        // no node has room for is turned down before any GPU is looked at.
        if (std::string why = host_wait(t.spec, true); !why.empty()) {
            class_waited_[t.decision_class] = epoch_;
            if (explain) {
                result.waiting.push_back(Waiting{
                    t.id, fmt::format("behind {} ({}): waits for {}", head->spec.name,
                                      wait_text, why)});
            }
            continue;
        }
        if (t.spec.gpus == 0) {
            const int host = pick_host(t.spec, true, nullptr);
            commit_host_only(t, host);
            unchanged = false;
            result.placed.push_back(Placement{t.id, {}, false, false,
                                              host < 0 ? std::string() : hosts_[host].node});
            remove(t.id);
            continue;
        }
        const CarmaNeed need = carma_need(t.spec, false, pc);
        if (!idle_open && (need.idle_only || need.min_available_mib > most)) {
            class_waited_[t.decision_class] = epoch_;
            reserve(t, [&] { return need; });
            if (explain) {
                result.waiting.push_back(Waiting{
                    t.id, fmt::format("behind {} ({}): {} ({})", head->spec.name, wait_text,
                                      no_room_text(need), describe(need))});
            }
            continue;
        }
        // What carma_select needs to place it: `wanted` GPUs it may use that are idle (the
        // exclusive path) or open with room (collocation). Counted here, a quiet turn-down of
        // a task short of them (most of a backlog's) costs no selection.
        const auto wanted = static_cast<std::size_t>(std::max(t.spec.gpus, 1));
        std::size_t idle_usable = 0;
        std::size_t open_usable = 0;
        for (std::size_t i = 0; i < n; ++i) {
            // A shadow GPU without room turns the task down anyway; spare the prediction.
            const bool room = available_[i] >= need.min_available_mib;
            const bool usable = idle_[i] != 0 || (open_[i] != 0 && room);
            const Reservation* other = nullptr;  // the reservation of another user's task here
            for (const Reservation& r : reserved) {
                other = r.plan.shadow[i] != 0 ? &r : other;
            }
            if (!host_ok(t.spec, gpu_host_[i], true)) {
                allowed_[i] = 0;  // its node lacks the cores or memory (the reason says which)
            } else if (plan.shadow[i] == 0 && other == nullptr) {
                allowed_[i] = 1;
            } else if (!explain && !usable) {
                allowed_[i] = 0;  // turned down there either way; only the reason would differ
            } else if (other != nullptr) {
                allowed_[i] = room && !mps_users_differ(t.spec, other->task->spec) &&
                              !shares_conflict(t.spec, other->task->spec, scratch_[i]) &&
                              may_pass_head(t.spec, scratch_[i], other->plan, other->need, now,
                                            pc.predict_speeds, &predictions_[i]);
            } else {
                // Another MPS user's task on a GPU kept for the head keeps the head out until
                // it ends.
                allowed_[i] = room && !mps_users_differ(t.spec, head->spec) &&
                              !shares_conflict(t.spec, head->spec, scratch_[i]) &&
                              may_pass_head(t.spec, scratch_[i], plan, head_need, now,
                                            pc.predict_speeds, &predictions_[i]);
            }
            idle_usable += allowed_[i] != 0 && idle_[i] != 0 ? 1 : 0;
            open_usable += allowed_[i] != 0 && open_[i] != 0 && room ? 1 : 0;
        }
        if (!explain && idle_usable < wanted && open_usable < wanted) {
            class_waited_[t.decision_class] = epoch_;
            reserve(t, [&] { return need; });
            continue;
        }
        Selection sel =
            carma_select(config_.policy, t.spec, need, scratch_, open_, allowed_,
                         explain ? pc : quiet_, config_.carma, predictions_, available_);
        if (sel.gpus.empty()) {
            class_waited_[t.decision_class] = epoch_;
            reserve(t, [&] { return need; });
            if (explain) {
                result.waiting.push_back(
                    Waiting{t.id, fmt::format("behind {} ({}): {}{}", head->spec.name, wait_text,
                                              sel.pending_reason, kept_for_others(t))});
            }
            continue;
        }
        commit(t, sel.gpus, now);
        ++epoch_;  // the GPUs changed: what turned a class down may not any more
        unchanged = false;
        std::string node = node_of(sel.gpus);
        result.placed.push_back(
            Placement{t.id, std::move(sel.gpus), false, sel.exclusive, std::move(node)});
        remove(t.id);
        most = roomiest(idle_open);
    }
    std::fill(allowed_.begin(), allowed_.end(), 1);
    return result;
}

}  // namespace carma

#include "core/scheduler.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/mps_share.h"

namespace carma {

namespace {

constexpr double kUnstamped = std::numeric_limits<double>::infinity();
// Waiting tasks of a round whose reason carma spells out, beyond the head: formatting costs more
// than deciding, and people read the first few.
constexpr std::size_t kExplainedWaiting = 16;

std::string format_duration(double s) {
    if (s >= 3600) {
        return fmt::format("{:.1f} h", s / 3600);
    }
    if (s >= 60) {
        return fmt::format("{:.0f} min", s / 60);
    }
    return fmt::format("{:.0f} s", s);
}

}  // namespace

namespace {

template <typename Gpu>
CapacitySummary summarize(std::span<const Gpu> gpus) {
    CapacitySummary c;
    c.gpus = gpus.size();
    for (const Gpu& g : gpus) {
        c.largest_mib = std::max(c.largest_mib, g.total_mib);
        c.several_nodes = c.several_nodes || g.node != gpus.front().node;
    }
    if (!c.several_nodes) {
        c.largest_node_gpus = gpus.size();
        c.largest_node = gpus.empty() ? std::string() : gpus.front().node;
        return c;
    }
    // Asking for more than any node holds: the pick never completes and counts the nodes.
    const NodePick pick = pick_on_one_node(
        gpus.size(), gpus.size() + 1, [](std::size_t) { return true; },
        [&](std::size_t i) -> const std::string& { return gpus[i].node; }, [](std::size_t) {});
    c.largest_node_gpus = pick.most_on_one_node;
    c.largest_node = gpus[pick.most_at].node;
    return c;
}

}  // namespace

CapacitySummary summarize_capacity(std::span<const GpuCapacity> gpus) { return summarize(gpus); }
CapacitySummary summarize_capacity(std::span<const GpuView> gpus) { return summarize(gpus); }

Result<void> check_feasible(const TaskSpec& task, std::span<const GpuCapacity> gpus,
                            MemoryKnowledge knowledge) {
    return check_feasible(task, summarize_capacity(gpus), knowledge);
}

Result<void> check_feasible(const TaskSpec& task, const CapacitySummary& capacity,
                            MemoryKnowledge knowledge) {
    if (task.gpus < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}' asks for {} GPUs; ask for at least 1", task.name,
                                task.gpus));
    }
    const auto asked = static_cast<std::size_t>(task.gpus);
    if (!capacity.several_nodes && asked > capacity.gpus) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' asks for {} GPUs but this server has {}; ask for at "
                                "most {}",
                                task.name, task.gpus, capacity.gpus, capacity.gpus));
    }
    if (capacity.several_nodes && asked > capacity.largest_node_gpus) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' asks for {} GPUs but the largest node, {}, has {} "
                                "(a task's GPUs are all on one node); ask for at most {}",
                                task.name, task.gpus, capacity.largest_node,
                                capacity.largest_node_gpus, capacity.largest_node_gpus));
    }
    std::optional<MiB> need;
    if (knowledge == MemoryKnowledge::Learned) {
        need = task.learned.runs > 0 ? task.learned.need_mib : task.memory.declared_mib;
    } else {
        need = known_need_mib(task, MemoryKnowledge::Oracle, Estimator::Horus);
    }
    if (need && *need > capacity.largest_mib) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' needs {} per GPU but the largest GPU here has {}; "
                                "lower its memory need or run it on a larger GPU",
                                task.name, format_mib(*need), format_mib(capacity.largest_mib)));
    }
    return {};
}

Scheduler::Scheduler(SchedulerConfig config)
    : config_(std::move(config)), quiet_(config_.placement), warmup_(config_.warmup) {
    quiet_.explain = false;
}

double Scheduler::order_key(const TaskSpec& spec) const {
    // Longest first; an unknown run time counts as the longest.
    return spec.learned.duration_s ? -*spec.learned.duration_s
                                   : -std::numeric_limits<double>::infinity();
}

void Scheduler::push(TaskId id, TaskSpec spec, std::optional<double> queued_at, bool recovery,
                     bool front) {
    if (where_.contains(id)) {
        remove(id);
    }
    Queue& q = recovery ? recovery_ : main_;
    QueuedTask t;
    t.id = id;
    t.spec = std::move(spec);
    t.queued_at = queued_at.value_or(kUnstamped);
    t.seq = front ? --front_seq_ : next_seq_++;
    t.order_key = order_key(t.spec);
    if (!queued_at) {
        unstamped_.push_back(id);
    }
    auto it = q.insert(front ? q.begin() : q.end(), std::move(t));
    where_[id] = Where{it, recovery};
    if (!recovery && config_.policy.long_first) {
        by_length_.insert(OrderKey{it->order_key, it->seq, id, it});
    }
}

void Scheduler::remove(TaskId id) {
    auto w = where_.find(id);
    if (w == where_.end()) {
        return;
    }
    const Queue::iterator it = w->second.it;
    if (!w->second.recovery && config_.policy.long_first) {
        by_length_.erase(OrderKey{it->order_key, it->seq, id, it});
    }
    (w->second.recovery ? recovery_ : main_).erase(it);
    where_.erase(w);
}

void Scheduler::enqueue(TaskId id, TaskSpec spec, std::optional<double> queued_at) {
    push(id, std::move(spec), queued_at, false, false);
}

void Scheduler::enqueue_recovery(TaskId id, TaskSpec spec, std::optional<double> queued_at) {
    push(id, std::move(spec), queued_at, true, false);
}

void Scheduler::return_to_front(TaskId id, TaskSpec spec, bool recovery) {
    warmup_.exited(id);
    push(id, std::move(spec), std::nullopt, recovery, true);
}

bool Scheduler::cancel(TaskId id) {
    if (!where_.contains(id)) {
        return false;
    }
    remove(id);
    return true;
}

bool Scheduler::relearn(TaskId id, const Learned& learned) {
    auto w = where_.find(id);
    if (w == where_.end()) {
        return false;
    }
    QueuedTask& t = *w->second.it;
    const bool indexed = !w->second.recovery && config_.policy.long_first;
    if (indexed) {
        by_length_.erase(OrderKey{t.order_key, t.seq, id, w->second.it});
    }
    t.spec.learned = learned;
    t.order_key = order_key(t.spec);
    if (indexed) {
        by_length_.insert(OrderKey{t.order_key, t.seq, id, w->second.it});
    }
    return true;
}

void Scheduler::stamp(double now) {
    for (TaskId id : unstamped_) {
        auto w = where_.find(id);
        if (w != where_.end() && w->second.it->queued_at == kUnstamped) {
            w->second.it->queued_at = now;
        }
    }
    unstamped_.clear();
}

StepResult Scheduler::step(std::span<const GpuView> gpus, double now) {
    warmup_.expire(now);
    stamp(now);
    scratch_.assign(gpus.begin(), gpus.end());
    for (GpuView& g : scratch_) {
        g.locked = warmup_.locked(g.index, now);
    }
    return config_.policy.carma ? step_carma(now, capacity()) : step_paper(now, capacity());
}

const CapacitySummary& Scheduler::capacity() {
    bool same = capacity_of_.size() == scratch_.size();
    for (std::size_t i = 0; same && i < scratch_.size(); ++i) {
        same = scratch_[i].total_mib == capacity_of_[i].second &&
               scratch_[i].node == capacity_of_[i].first;
    }
    if (!same) {
        capacity_of_.clear();
        for (const GpuView& g : scratch_) {
            capacity_of_.emplace_back(g.node, g.total_mib);
        }
        capacity_ = summarize_capacity(std::span<const GpuView>(scratch_));
    }
    return capacity_;
}

void Scheduler::commit(const QueuedTask& task, const std::vector<int>& gpus, double now) {
    warmup_.launched(task.id, gpus, now);
    for (std::size_t i = 0; i < scratch_.size(); ++i) {
        GpuView& g = scratch_[i];
        if (std::find(gpus.begin(), gpus.end(), g.index) == gpus.end()) {
            continue;
        }
        g.locked = true;
        if (config_.policy.carma) {
            const Learned& l = task.spec.learned;
            g.residents.push_back(ResidentView{
                task.id, l.activity.value_or(0.6), l.need_mib,
                l.duration_s ? std::optional<double>(now + *l.duration_s) : std::nullopt});
            open_[i] = 0;
            baselines_[i] = SharingBaseline{};
        }
    }
}

StepResult Scheduler::step_paper(double now, const CapacitySummary& capacity) {
    StepResult result;
    while (!recovery_.empty() || !main_.empty()) {
        const bool from_recovery = !recovery_.empty();
        Queue& queue = from_recovery ? recovery_ : main_;
        const QueuedTask& head = queue.front();

        if (auto feasible = check_feasible(head.spec, capacity); !feasible) {
            result.rejected.push_back(Rejection{head.id, feasible.error().message});
            remove(head.id);
            continue;
        }

        const auto wanted = static_cast<std::size_t>(head.spec.gpus);
        std::vector<int> chosen;
        const NodePick idle = pick_on_one_node(
            scratch_.size(), wanted,
            [&](std::size_t i) {
                const GpuView& g = scratch_[i];
                return g.schedulable && !g.has_processes && !g.locked;
            },
            [&](std::size_t i) -> const std::string& { return scratch_[i].node; },
            [&](std::size_t i) { chosen.push_back(scratch_[i].index); });
        const bool exclusive = idle.found;
        if (!exclusive) {
            const char* one_node = wanted > 1 && capacity.several_nodes ? " on one node" : "";
            if (from_recovery) {
                result.pending_reason = fmt::format(
                    "{} was recovered from out-of-memory and waits for {} idle GPU(s){}",
                    head.spec.name, wanted, one_node);
            } else if (!config_.policy.collocate) {
                result.pending_reason =
                    fmt::format("{} waits for {} idle GPU(s){} (policy exclusive)",
                                head.spec.name, wanted, one_node);
            } else {
                Selection sel = select_gpus(config_.policy, head.spec, scratch_,
                                            config_.placement, rr_cursor_);
                if (sel.gpus.empty()) {
                    result.pending_reason = std::move(sel.pending_reason);
                } else {
                    chosen = std::move(sel.gpus);
                    rr_cursor_ = sel.rr_cursor;
                }
            }
        }
        if (chosen.empty()) {
            result.pending_task = head.id;
            break;
        }

        commit(head, chosen, now);
        result.placed.push_back(Placement{head.id, std::move(chosen), from_recovery, exclusive});
        remove(head.id);
    }
    return result;
}

std::optional<double> Scheduler::next_order_change(double now) const {
    if (!config_.policy.long_first) {
        return std::nullopt;
    }
    for (const QueuedTask& t : main_) {
        const double ages_at = t.queued_at + config_.carma.max_wait_s;
        if (ages_at > now) {
            return ages_at == kUnstamped ? std::nullopt : std::optional<double>(ages_at);
        }
    }
    return std::nullopt;
}

void Scheduler::carma_order(double now, std::optional<TaskId> skip, std::size_t limit,
                            std::vector<TaskId>& out) const {
    const double max_wait = config_.carma.max_wait_s;
    auto aged = [&](const QueuedTask& t) { return t.queued_at + max_wait <= now; };
    auto take = [&](TaskId id) {
        if (id != skip) {
            out.push_back(id);
        }
        return out.size() >= limit;
    };
    // Arrival order is queue order, so the aged tasks are a prefix of it.
    for (const QueuedTask& t : main_) {
        if (!config_.policy.long_first) {
            if (take(t.id)) {
                return;
            }
            continue;
        }
        if (!aged(t)) {
            break;
        }
        if (take(t.id)) {
            return;
        }
    }
    if (!config_.policy.long_first) {
        return;
    }
    for (const OrderKey& k : by_length_) {
        if (!aged(*k.it) && take(k.id)) {
            return;
        }
    }
}

std::vector<TaskId> Scheduler::waiting_order(double now, std::size_t limit) const {
    std::vector<TaskId> out;
    out.reserve(std::min(limit, recovery_.size() + main_.size()));
    for (const QueuedTask& t : recovery_) {
        if (out.size() >= limit) {
            return out;
        }
        out.push_back(t.id);
    }
    if (out.size() < limit) {
        // Without long-first (every paper policy, and -fifo) carma_order is arrival order.
        carma_order(now, std::nullopt, limit, out);
    }
    return out;
}

StepResult Scheduler::step_carma(double now, const CapacitySummary& capacity) {
    StepResult result;
    const PlacementConfig& pc = config_.placement;
    const std::size_t n = scratch_.size();
    open_.assign(n, 0);
    allowed_.assign(n, 1);
    baselines_.assign(n, SharingBaseline{});
    for (std::size_t i = 0; i < n; ++i) {
        open_[i] = carma_gpu_open(config_.policy, scratch_[i], pc.risk) == FilterOutcome::Pass;
    }

    const QueuedTask* head = nullptr;
    bool head_recovered = false;
    CarmaNeed head_need;
    while (true) {
        head_recovered = !recovery_.empty();
        if (head_recovered) {
            head = &recovery_.front();
        } else {
            candidates_.clear();
            carma_order(now, std::nullopt, 1, candidates_);
            if (candidates_.empty()) {
                head = nullptr;
                break;
            }
            head = &*where_.at(candidates_.front()).it;
        }
        if (auto feasible = check_feasible(head->spec, capacity, MemoryKnowledge::Learned);
            !feasible) {
            result.rejected.push_back(Rejection{head->id, feasible.error().message});
            remove(head->id);
            continue;
        }
        head_need = carma_need(head->spec, head_recovered, pc);
        Selection sel =
            carma_select(config_.policy, head->spec, head_need, scratch_, open_, allowed_, pc,
                         config_.carma, baselines_);
        if (sel.gpus.empty()) {
            result.pending_task = head->id;
            result.pending_reason = std::move(sel.pending_reason);
            break;
        }
        commit(*head, sel.gpus, now);
        result.placed.push_back(
            Placement{head->id, std::move(sel.gpus), head_recovered, sel.exclusive});
        remove(head->id);
    }
    if (head == nullptr) {
        return result;
    }
    if (pc.explain) {
        result.waiting.push_back(Waiting{head->id, result.pending_reason});
    }
    if (!config_.policy.backfill) {
        return result;
    }

    // Backfilling around the waiting head.
    const HeadPlan plan =
        plan_head(head->spec, head_need, scratch_, open_, now, config_.warmup.settle_s);
    // What each GPU could take now (planned available memory; idle), kept up to date as tasks
    // are placed: most candidates of a busy round are turned down on it alone.
    auto roomiest = [&](bool& idle_open) {
        MiB most = -1;
        idle_open = false;
        for (std::size_t i = 0; i < n; ++i) {
            const GpuView& g = scratch_[i];
            const bool idle = g.schedulable && !g.locked && !g.has_processes && g.residents.empty();
            idle_open = idle_open || idle;
            if (open_[i] != 0) {
                most = std::max(most, planned_available_mib(g));
            }
        }
        return most;
    };
    bool idle_open = false;
    MiB most = roomiest(idle_open);
    if (most < 0 && !idle_open) {
        return result;  // every GPU is closed this round
    }
    candidates_.clear();
    carma_order(now, head->id, config_.carma.backfill_depth, candidates_);
    const std::string wait_text =
        !pc.explain            ? std::string()
        : plan.start == kNeverS ? fmt::format("start of {} not predictable", head->spec.name)
                                : fmt::format("predicted start of {} in {}", head->spec.name,
                                              format_duration(plan.start - now));
    for (TaskId id : candidates_) {
        if (most < 0 && !idle_open) {
            break;
        }
        const QueuedTask& t = *where_.at(id).it;
        if (auto feasible = check_feasible(t.spec, capacity, MemoryKnowledge::Learned);
            !feasible) {
            result.rejected.push_back(Rejection{t.id, feasible.error().message});
            remove(t.id);
            continue;
        }
        const CarmaNeed need = carma_need(t.spec, false, pc);
        const bool explain = pc.explain && result.waiting.size() <= kExplainedWaiting;
        if (!idle_open && (need.idle_only || need.min_available_mib > most)) {
            if (explain) {
                result.waiting.push_back(Waiting{
                    t.id, fmt::format("behind {} ({}): no GPU has {} available ({})",
                                      head->spec.name, wait_text,
                                      format_mib(need.min_available_mib), describe(need))});
            }
            continue;
        }
        for (std::size_t i = 0; i < n; ++i) {
            // A shadow GPU without room turns the task down anyway; spare the prediction.
            const bool room = planned_available_mib(scratch_[i]) >= need.min_available_mib;
            // Another MPS user's task on a GPU kept for the head keeps the head out until it ends.
            allowed_[i] = plan.shadow[i] == 0 ||
                          (room && !mps_users_differ(t.spec, head->spec) &&
                           may_pass_head(t.spec, scratch_[i], plan, head_need, now,
                                         pc.predict_speeds));
        }
        Selection sel = carma_select(config_.policy, t.spec, need, scratch_, open_, allowed_,
                                     explain ? pc : quiet_, config_.carma, baselines_);
        if (sel.gpus.empty()) {
            if (explain) {
                result.waiting.push_back(
                    Waiting{t.id, fmt::format("behind {} ({}): {}", head->spec.name, wait_text,
                                              sel.pending_reason)});
            }
            continue;
        }
        commit(t, sel.gpus, now);
        result.placed.push_back(Placement{t.id, std::move(sel.gpus), false, sel.exclusive});
        remove(t.id);
        most = roomiest(idle_open);
    }
    std::fill(allowed_.begin(), allowed_.end(), 1);
    return result;
}

}  // namespace carma

#include "core/scheduler.h"

#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "core/agent_user.h"
#include "core/mps_share.h"
#include "core/scheduler_order.h"

namespace carma {

namespace {

constexpr double kUnstamped = std::numeric_limits<double>::infinity();

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
    if (task.gpus < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}' asks for {} GPUs; ask for 0 (a CPU-only task) or more",
                                task.name, task.gpus));
    }
    if (task.gpus == 0) {
        return {};  // its GPU memory is never planned: it holds no GPU
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
    : config_(std::move(config)),
      quiet_(config_.placement),
      aged_upto_(main_.end()),
      warmup_(config_.warmup) {
    quiet_.explain = false;
}

double Scheduler::order_key(const TaskSpec& spec) const {
    // An unknown run time goes first: running the command is how it is learned, and it may be
    // short.
    if (!spec.learned.duration_s) {
        return -std::numeric_limits<double>::infinity();
    }
    return config_.policy.order == RunTimeOrder::LongestFirst ? -*spec.learned.duration_s
                                                              : *spec.learned.duration_s;
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
    if (config_.policy.carma && config_.policy.backfill) {
        t.decision_class = acquire_class(t.spec);
    }
    if (!queued_at) {
        unstamped_.push_back(id);
    }
    auto it = q.insert(front ? q.begin() : q.end(), std::move(t));
    Where& w = where_[id];
    w = Where{it, recovery};
    if (!recovery && (front || aged_upto_ == main_.end())) {
        aged_upto_ = front ? main_.begin() : it;  // not yet known to have aged
    }
    if (!recovery && bucketed()) {
        const BucketKey key = bucket_key(it->spec);
        auto [b, added] = buckets_.try_emplace(key);
        if (added) {
            b->second.user = key.first;
            b->second.nice = key.second;
        }
        w.bucket = &b->second;
        w.arrived = w.bucket->arrival.insert(OrderKey{0, it->seq, id, it}).first;
        if (config_.policy.by_run_time()) {
            w.ranked = w.bucket->length.insert(OrderKey{it->order_key, it->seq, id, it}).first;
        }
    }
    if (!recovery && config_.policy.by_run_time()) {
        ages_.insert(it->queued_at + config_.carma.max_wait_s);
    }
    host_only_waiting_ += it->spec.gpus == 0 ? 1 : 0;
    ++queue_version_;
}

Scheduler::BucketKey Scheduler::bucket_key(const TaskSpec& spec) const {
    const bool by_user = config_.policy.carma && config_.carma.fair_share;
    return BucketKey{by_user ? spec.user : std::string(), config_.policy.carma ? spec.nice : 0};
}

double Scheduler::bucket_base(const Bucket& b) const {
    double factor = 1;
    if (config_.carma.fair_share) {
        if (auto it = standings_.find(b.user); it != standings_.end()) {
            factor = it->second.factor;
        }
    }
    return config_.carma.fair_share_weight * factor - static_cast<double>(b.nice);
}

void Scheduler::set_standings(UserStandings standings) {
    if (standings == standings_) {
        return;
    }
    // The order across buckets reads the factors: it may change when one does.
    if (buckets_.size() > 1 && config_.carma.fair_share) {
        bool same = standings.size() == standings_.size();
        for (auto a = standings.begin(), b = standings_.begin(); same && a != standings.end();
             ++a, ++b) {
            same = a->first == b->first && a->second.factor == b->second.factor;
        }
        if (!same) {
            ++queue_version_;
        }
    }
    standings_ = std::move(standings);
}

void Scheduler::retune(const UserLimits& limits, double fair_share_weight, double age_weight) {
    config_.limits = limits;
    config_.carma.fair_share_weight = fair_share_weight;
    config_.carma.age_weight = age_weight;
    ++queue_version_;  // the merge of the users' buckets reads the weights
}

std::optional<double> Scheduler::priority(TaskId id, double now) const {
    auto w = where_.find(id);
    if (w == where_.end() || w->second.recovery || w->second.bucket == nullptr) {
        return std::nullopt;
    }
    const QueuedTask& t = *w->second.it;
    const bool overdue = t.queued_at + config_.carma.max_wait_s <= now;
    return bucket_base(*w->second.bucket) + (overdue ? config_.carma.age_weight : 0);
}

std::vector<std::string> Scheduler::ordered_users() const {
    std::vector<std::string> users;
    if (!config_.policy.carma || !config_.carma.fair_share) {
        return users;
    }
    for (const auto& [key, bucket] : buckets_) {
        if (users.empty() || users.back() != key.first) {  // keys sort by user, then nice
            users.push_back(key.first);
        }
    }
    return users;
}

std::optional<std::string> Scheduler::limit_reason(const QueuedTask& t) const {
    auto it = round_use_.find(t.spec.user);
    return running_limit(config_.limits, t.spec.user,
                         it == round_use_.end() ? RunningUse{} : it->second, t.spec.gpus);
}

void Scheduler::remove(TaskId id) {
    auto w = where_.find(id);
    if (w == where_.end()) {
        return;
    }
    const Queue::iterator it = w->second.it;
    if (Bucket* b = w->second.bucket) {
        b->arrival.erase(w->second.arrived);
        if (config_.policy.by_run_time()) {
            b->length.erase(w->second.ranked);
        }
        if (b->arrival.empty()) {
            buckets_.erase(BucketKey{b->user, b->nice});
        }
    }
    if (!w->second.recovery && config_.policy.by_run_time()) {
        ages_.erase(ages_.find(it->queued_at + config_.carma.max_wait_s));
    }
    ++queue_version_;
    host_only_waiting_ -= it->spec.gpus == 0 ? 1 : 0;
    if (config_.policy.carma && config_.policy.backfill) {
        release_class(it->decision_class);
    }
    if (!w->second.recovery && it == aged_upto_) {
        ++aged_upto_;
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
    RelearnHint hint;
    relearn_one(w->second, learned, hint);
    return true;
}

void Scheduler::relearn(std::span<const TaskId> ids, const Learned& learned) {
    RelearnHint hint;
    for (const TaskId id : ids) {
        if (auto w = where_.find(id); w != where_.end()) {
            relearn_one(w->second, learned, hint);
        }
    }
}

void Scheduler::relearn_one(Where& w, const Learned& learned, RelearnHint& hint) {
    QueuedTask& t = *w.it;
    t.spec.learned = learned;
    // A backlog relearns every waiting task of a family whenever one of them ends, and most
    // come out as they were: only a changed run time moves a task in the order, and only a
    // changed decision key changes its class.
    const double key = order_key(t.spec);
    if (std::bit_cast<std::uint64_t>(key) != std::bit_cast<std::uint64_t>(t.order_key)) {
        const bool indexed = w.bucket != nullptr && config_.policy.by_run_time();
        if (indexed) {
            w.bucket->length.erase(w.ranked);
        }
        t.order_key = key;
        if (indexed) {
            // Tasks of a group come in arrival order with one key: each goes right after the
            // one moved before it, which the hint tries first (the set is the same whatever
            // the hint; that task stays where it went, so the hint is valid in its bucket).
            const OrderKey entry{t.order_key, t.seq, t.id, w.it};
            std::set<OrderKey>& length = w.bucket->length;
            w.ranked = hint.moved && hint.moved_in == w.bucket
                           ? length.insert(std::next(*hint.moved), entry)
                           : length.insert(entry).first;
            hint.moved = w.ranked;
            hint.moved_in = w.bucket;
        }
        ++queue_version_;
    }
    if (config_.policy.carma && config_.policy.backfill) {
        const DecisionKey dk = decision_key(t.spec);
        if (dk != class_keys_[t.decision_class]) {
            release_class(t.decision_class);
            if (hint.key == dk && class_refs_[hint.decision_class] > 0) {
                ++class_refs_[hint.decision_class];  // the class the task before went to
                t.decision_class = hint.decision_class;
            } else {
                t.decision_class = acquire_class(t.spec);
            }
            hint.key = dk;
            hint.decision_class = t.decision_class;
            ++queue_version_;
        }
    }
}

Scheduler::DecisionKey Scheduler::decision_key(const TaskSpec& spec) {
    const Learned& l = spec.learned;
    auto bits = [](const std::optional<double>& v) {
        return v ? std::bit_cast<std::int64_t>(*v) : std::int64_t{0};
    };
    // Feasibility reads the declared need while nothing has run, carma_need the learned figures,
    // may_pass_head the run time and activity, the placement the GPU count, the MPS rule the
    // owner (core/mps_share.h), the placement what it may share with (exclusive, slowdown bound).
    return DecisionKey{spec.gpus,
                       spec.cpus,
                       spec.host_mem_mib,
                       l.runs > 0,
                       spec.memory.declared_mib.has_value(),
                       spec.memory.declared_mib.value_or(0),
                       l.need_mib.has_value(),
                       l.need_mib.value_or(0),
                       l.lower_bound_mib,
                       l.margin_mib,
                       l.duration_s.has_value(),
                       bits(l.duration_s),
                       l.activity.has_value(),
                       bits(l.activity),
                       static_cast<std::int64_t>(std::hash<std::string>{}(spec.mps_user)),
                       // Whom it may share with: exclusive, or a slowdown bound.
                       spec.exclusive,
                       spec.gpu_milli,
                       spec.max_slowdown ? std::bit_cast<std::int64_t>(*spec.max_slowdown)
                                         : std::int64_t{-1}};
}

std::size_t Scheduler::DecisionKeyHash::operator()(const DecisionKey& k) const {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the words
    for (const std::int64_t v : k) {
        h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ULL;
        h ^= h >> 29;
    }
    return static_cast<std::size_t>(h);
}

std::uint32_t Scheduler::acquire_class(const TaskSpec& spec) {
    const DecisionKey key = decision_key(spec);
    auto [it, added] = class_ids_.try_emplace(key, 0);
    if (added) {
        if (free_classes_.empty()) {
            it->second = static_cast<std::uint32_t>(class_refs_.size());
            class_keys_.push_back(key);
            class_refs_.push_back(0);
            class_waited_.push_back(0);
            class_feasible_.push_back(0);
        } else {
            it->second = free_classes_.back();
            free_classes_.pop_back();
            class_keys_[it->second] = key;
            class_waited_[it->second] = 0;
            class_feasible_[it->second] = 0;
        }
    }
    ++class_refs_[it->second];
    return it->second;
}

void Scheduler::release_class(std::uint32_t id) {
    if (--class_refs_[id] == 0) {
        class_ids_.erase(class_keys_[id]);
        free_classes_.push_back(id);
    }
}

void Scheduler::stamp(double now) {
    for (TaskId id : unstamped_) {
        auto w = where_.find(id);
        if (w != where_.end() && w->second.it->queued_at == kUnstamped) {
            if (!w->second.recovery && config_.policy.by_run_time()) {
                ages_.erase(ages_.find(kUnstamped + config_.carma.max_wait_s));
                ages_.insert(now + config_.carma.max_wait_s);
            }
            w->second.it->queued_at = now;
            ++queue_version_;
        }
    }
    unstamped_.clear();
}

StepResult Scheduler::step(std::span<const GpuView> gpus, std::span<const HostView> hosts,
                           double now) {
    warmup_.expire(now);
    stamp(now);
    round_use_.clear();
    if (has_running_limits(config_.limits)) {
        for (const auto& [user, standing] : standings_) {
            round_use_[user] = standing.running;
        }
    }
    scratch_.assign(gpus.begin(), gpus.end());
    for (GpuView& g : scratch_) {
        g.locked = warmup_.locked(g.index, now);
    }
    hosts_.assign(hosts.begin(), hosts.end());
    spare_hosts_.clear();
    gpu_host_.assign(scratch_.size(), -1);
    for (std::size_t i = 0; i < scratch_.size(); ++i) {
        for (std::size_t h = 0; h < hosts_.size(); ++h) {
            if (hosts_[h].node == scratch_[i].node) {
                gpu_host_[i] = static_cast<int>(h);
                break;
            }
        }
    }
    if (const HostSummary hs = summarize_hosts(hosts_);
        hs.any != host_summary_.any || hs.most_cpus != host_summary_.most_cpus ||
        hs.most_mem_mib != host_summary_.most_mem_mib || hs.several != host_summary_.several) {
        host_summary_ = hs;
        ++capacity_generation_;  // what can ever fit changed
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
        ++capacity_generation_;
    }
    return capacity_;
}

void Scheduler::commit(const QueuedTask& task, const std::vector<int>& gpus, double now) {
    warmup_.launched(task.id, gpus, now);
    if (has_running_limits(config_.limits)) {
        RunningUse& use = round_use_[task.spec.user];
        use.hold(gpus);
        use.tasks += 1;
    }
    bool host_taken = false;
    for (std::size_t i = 0; i < scratch_.size(); ++i) {
        GpuView& g = scratch_[i];
        if (std::find(gpus.begin(), gpus.end(), g.index) == gpus.end()) {
            continue;
        }
        if (!host_taken) {
            host_taken = true;  // a task's GPUs are all on one node
            commit_host_only(task, gpu_host_[i]);
        }
        g.locked = true;
        if (config_.policy.carma) {
            const Learned& l = task.spec.learned;
            g.residents.push_back(ResidentView{
                task.id, l.activity.value_or(0.6), l.need_mib,
                l.duration_s ? std::optional<double>(now + *l.duration_s) : std::nullopt,
                task.spec.exclusive, task.spec.max_slowdown, task.spec.gpu_milli});
            open_[i] = 0;
            predictions_[i].clear();
            refresh_room(i);
        }
    }
}

void Scheduler::refresh_room(std::size_t i) {
    const GpuView& g = scratch_[i];
    available_[i] = planned_available_mib(g);
    idle_[i] = g.schedulable && !g.locked && !g.has_processes && g.residents.empty();
}

StepResult Scheduler::step_paper(double now, const CapacitySummary& capacity) {
    StepResult result;
    const bool limited = has_running_limits(config_.limits);
    while (!recovery_.empty() || !main_.empty()) {
        // The head: the first task, passing over those whose user is at a running limit.
        const QueuedTask* first = nullptr;
        bool from_recovery = false;
        for (Queue* queue : {&recovery_, &main_}) {
            for (const QueuedTask& t : *queue) {
                if (!limited || !limit_reason(t)) {
                    first = &t;
                    from_recovery = queue == &recovery_;
                    break;
                }
                if (config_.placement.explain && result.waiting.size() < 16 &&
                    std::none_of(result.waiting.begin(), result.waiting.end(),
                                 [&](const Waiting& w) { return w.task == t.id; })) {
                    result.waiting.push_back(Waiting{t.id, *limit_reason(t)});
                }
            }
            if (first != nullptr) {
                break;
            }
        }
        if (first == nullptr) {
            break;
        }
        const QueuedTask& head = *first;

        if (auto ok = feasible(head.spec, capacity, MemoryKnowledge::Oracle); !ok) {
            result.rejected.push_back(Rejection{head.id, ok.error().message});
            remove(head.id);
            continue;
        }
        if (head.spec.gpus == 0) {
            const int host = pick_host(head.spec, false, &result.pending_reason);
            if (host == kNoHostFits) {
                result.pending_reason = fmt::format("{} waits for {}", head.spec.name,
                                                    result.pending_reason);
                result.pending_task = head.id;
                break;
            }
            commit_host_only(head, host);
            result.placed.push_back(Placement{head.id, {}, from_recovery, false,
                                              host < 0 ? std::string() : hosts_[host].node});
            remove(head.id);
            continue;
        }
        if (std::string why = host_wait(head.spec, false); !why.empty()) {
            result.pending_reason = fmt::format("{} waits for {}", head.spec.name, why);
            result.pending_task = head.id;
            break;
        }

        const auto wanted = static_cast<std::size_t>(head.spec.gpus);
        std::vector<int> chosen;
        const NodePick idle = pick_on_one_node(
            scratch_.size(), wanted,
            [&](std::size_t i) {
                const GpuView& g = scratch_[i];
                return g.schedulable && !g.has_processes && !g.locked &&
                       !holds_task_alone(g, false) && agent_admits(head.spec, g) &&
                       host_ok(head.spec, gpu_host_[i], false);
            },
            [&](std::size_t i) -> const std::string& { return scratch_[i].node; },
            [&](std::size_t i) { chosen.push_back(scratch_[i].index); });
        const bool exclusive = idle.found;
        if (!exclusive) {
            const char* one_node = wanted > 1 && capacity.several_nodes ? " on one node" : "";
            const std::string refused =
                config_.placement.explain ? idle_gpus_refused_by_agents(head.spec, scratch_)
                                          : std::string();
            if (from_recovery) {
                result.pending_reason = fmt::format(
                    "{} was recovered from out-of-memory and waits for {} idle GPU(s){}{}",
                    head.spec.name, wanted, one_node, refused);
            } else if (!config_.policy.collocate) {
                result.pending_reason =
                    fmt::format("{} waits for {} idle GPU(s){} (policy exclusive){}",
                                head.spec.name, wanted, one_node, refused);
            } else if (runs_alone(head.spec, false)) {
                result.pending_reason = fmt::format(
                    "{} waits for {} idle GPU(s){} ({}){}", head.spec.name, wanted, one_node,
                    head.spec.exclusive ? "--exclusive"
                                        : "--max-slowdown: this policy predicts no slowdown, so "
                                          "it runs alone",
                    refused);
            } else {
                // Only the GPUs of nodes with room for its cores and memory.
                std::vector<char> room(scratch_.size(), 1);
                mask_hosts(head.spec, false, room);
                std::vector<GpuView> masked;
                if (std::find(room.begin(), room.end(), 0) != room.end()) {
                    masked = scratch_;
                    for (std::size_t i = 0; i < masked.size(); ++i) {
                        if (room[i] == 0) {
                            masked[i].schedulable = false;
                            masked[i].unschedulable_reason =
                                "its node lacks " +
                                host_shortfall(head.spec, hosts_[gpu_host_[i]]);
                        }
                    }
                }
                Selection sel = select_gpus(config_.policy, head.spec,
                                            masked.empty() ? scratch_ : masked,
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
        std::string node = node_of(chosen);
        result.placed.push_back(
            Placement{head.id, std::move(chosen), from_recovery, exclusive, std::move(node)});
        remove(head.id);
    }
    return result;
}

std::optional<double> Scheduler::next_order_change(double now) const {
    if (!config_.policy.by_run_time()) {
        return std::nullopt;
    }
    if (now < aged_now_) {
        aged_upto_ = main_.begin();  // the clock went back: check them all again
    }
    aged_now_ = now;
    for (; aged_upto_ != main_.end(); ++aged_upto_) {
        const double ages_at = aged_upto_->queued_at + config_.carma.max_wait_s;
        if (ages_at > now) {
            return ages_at == kUnstamped ? std::nullopt : std::optional<double>(ages_at);
        }
    }
    return std::nullopt;
}

void Scheduler::carma_order(double now, std::optional<TaskId> skip, std::size_t limit,
                            std::vector<TaskId>& out) const {
    if (limit == 0) {
        return;
    }
    carma_order(now, [&](const QueuedTask& t) {
        if (t.id != skip) {
            out.push_back(t.id);
        }
        return out.size() >= limit;
    });
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
        // Without an order by run time (every paper policy, and -fifo) carma_order is arrival
        // order.
        carma_order(now, std::nullopt, limit, out);
    }
    return out;
}

}  // namespace carma

#include "core/scheduler.h"

#include <algorithm>

#include <fmt/format.h>

namespace carma {

Result<void> check_feasible(const TaskSpec& task, std::span<const GpuCapacity> gpus) {
    if (task.gpus < 1) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task '{}' asks for {} GPUs; ask for at least 1", task.name,
                                task.gpus));
    }
    if (static_cast<std::size_t>(task.gpus) > gpus.size()) {
        return fail(ErrorCode::Infeasible,
                    fmt::format("task '{}' asks for {} GPUs but this server has {}; ask for at "
                                "most {}",
                                task.name, task.gpus, gpus.size(), gpus.size()));
    }
    std::optional<MiB> need = known_need_mib(task, MemoryKnowledge::Oracle, Estimator::Horus);
    if (need) {
        MiB largest = 0;
        for (const GpuCapacity& g : gpus) {
            largest = std::max(largest, g.total_mib);
        }
        if (*need > largest) {
            return fail(ErrorCode::Infeasible,
                        fmt::format("task '{}' needs {} per GPU but the largest GPU here has {}; "
                                    "lower its memory need or run it on a larger GPU",
                                    task.name, format_mib(*need), format_mib(largest)));
        }
    }
    return {};
}

Scheduler::Scheduler(SchedulerConfig config)
    : config_(std::move(config)), warmup_(config_.warmup) {}

void Scheduler::enqueue(TaskId id, TaskSpec spec) {
    main_.push_back(QueuedTask{id, std::move(spec)});
}

void Scheduler::enqueue_recovery(TaskId id, TaskSpec spec) {
    recovery_.push_back(QueuedTask{id, std::move(spec)});
}

void Scheduler::return_to_front(TaskId id, TaskSpec spec, bool recovery) {
    warmup_.exited(id);
    (recovery ? recovery_ : main_).push_front(QueuedTask{id, std::move(spec)});
}

bool Scheduler::cancel(TaskId id) {
    for (auto* queue : {&recovery_, &main_}) {
        auto it = std::find_if(queue->begin(), queue->end(),
                               [&](const QueuedTask& t) { return t.id == id; });
        if (it != queue->end()) {
            queue->erase(it);
            return true;
        }
    }
    return false;
}

StepResult Scheduler::step(std::span<const GpuView> gpus, double now) {
    StepResult result;
    warmup_.expire(now);
    scratch_.assign(gpus.begin(), gpus.end());
    std::vector<GpuCapacity> capacity;
    capacity.reserve(scratch_.size());
    for (GpuView& g : scratch_) {
        g.locked = warmup_.locked(g.index, now);
        capacity.push_back(GpuCapacity{g.index, g.total_mib});
    }

    while (!recovery_.empty() || !main_.empty()) {
        const bool from_recovery = !recovery_.empty();
        std::deque<QueuedTask>& queue = from_recovery ? recovery_ : main_;
        const QueuedTask& head = queue.front();

        if (auto feasible = check_feasible(head.spec, capacity); !feasible) {
            result.rejected.push_back(Rejection{head.id, feasible.error().message});
            queue.pop_front();
            continue;
        }

        const auto wanted = static_cast<std::size_t>(head.spec.gpus);
        std::vector<int> chosen;
        bool exclusive = false;
        for (const GpuView& g : scratch_) {
            if (g.schedulable && !g.has_processes && !g.locked) {
                chosen.push_back(g.index);
                if (chosen.size() == wanted) {
                    break;
                }
            }
        }
        if (chosen.size() == wanted) {
            exclusive = true;
        } else {
            chosen.clear();
            if (from_recovery) {
                result.pending_reason = fmt::format(
                    "{} was recovered from out-of-memory and waits for {} idle GPU(s)",
                    head.spec.name, wanted);
            } else if (!config_.policy.collocate) {
                result.pending_reason =
                    fmt::format("{} waits for {} idle GPU(s) (policy exclusive)",
                                head.spec.name, wanted);
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

        warmup_.launched(head.id, chosen, now);
        for (GpuView& g : scratch_) {
            if (std::find(chosen.begin(), chosen.end(), g.index) != chosen.end()) {
                g.locked = true;
            }
        }
        result.placed.push_back(Placement{head.id, std::move(chosen), from_recovery, exclusive});
        queue.pop_front();
    }
    return result;
}

}  // namespace carma

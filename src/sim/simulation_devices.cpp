// What the residents of a GPU do to it in a simulated run (sim/simulation.h): before a change,
// samples and integrals are brought up to now; after it, every affected task's speed in the
// world and its finish time, the GPU's activity and power, and the next out-of-memory crash are
// derived anew.

#include <algorithm>
#include <cmath>

#include "sim/simulation.h"

namespace carma::sim::engine {

std::vector<std::size_t> Simulation::affected_gpus(const std::vector<int>& changed) const {
    std::vector<std::size_t> out;
    auto add = [&](std::size_t g) {
        if (std::find(out.begin(), out.end(), g) == out.end()) {
            out.push_back(g);
        }
    };
    for (int g : changed) {
        add(static_cast<std::size_t>(g));
        for (std::size_t i : gpus_[static_cast<std::size_t>(g)].residents) {
            for (int other : tasks_[i].gpus) {
                add(static_cast<std::size_t>(other));
            }
        }
    }
    return out;
}

void Simulation::before_change(const std::vector<std::size_t>& gpus) {
    for (std::size_t g : gpus) {
        flush_samples(g, std::nextafter(now_, -kNever));
        integrate(g, now_);
    }
}

void Simulation::after_change(const std::vector<std::size_t>& gpus) {
    std::vector<std::size_t> touched_tasks;
    for (std::size_t g : gpus) {
        for (std::size_t i : gpus_[g].residents) {
            if (tasks_[i].phase == Phase::Active &&
                std::find(touched_tasks.begin(), touched_tasks.end(), i) == touched_tasks.end()) {
                touched_tasks.push_back(i);
            }
        }
    }
    for (std::size_t i : touched_tasks) {
        SimTask& t = tasks_[i];
        account_segment(t);
        charge(t);
        advance_progress(t);
        double speed = 1;
        t.shared_now = false;
        t.predicted_now = 1;
        t.others_now = 0;
        t.sharers_now = 0;
        for (int g : t.gpus) {
            speed = std::min(speed, world_speed(i, static_cast<std::size_t>(g)));
            if (learning_) {
                predict_for(i, static_cast<std::size_t>(g));
            }
        }
        t.speed = speed;
        set_charge_rate(t);
        ++t.version;
        push_event(now_ + t.work_left / std::max(speed, 1e-9), EventKind::Finish, i, t.version);
    }
    for (std::size_t g : gpus) {
        SimGpu& gpu = gpus_[g];
        contributions_.clear();
        for (std::size_t i : gpu.residents) {
            const SimTask& t = tasks_[i];
            if (t.phase == Phase::Active) {
                contributions_.push_back(model::Contribution{
                    t.profile.util, t.profile.smact, t.profile.smocc, t.profile.drama, t.speed});
            }
        }
        gpu.activity = model::aggregate_activity(contributions_);
        gpu.power_w = model::gpu_power_w(gpu.activity, config_.gpus.type, config_.power_scale);
        ++gpu.version;
        record_timeline(g);
        check_oom(g);
    }
    request_tick(now_);
}

double Simulation::world_speed(std::size_t i, std::size_t g) {
    world_tasks_.clear();
    std::size_t self = 0;
    for (std::size_t j : gpus_[g].residents) {
        if (tasks_[j].phase == Phase::Active) {
            if (j == i) {
                self = world_tasks_.size();
            }
            const model::WorkloadProfile& p = tasks_[j].profile;
            // As the daemon does under --mps, a share runs with its share of the SMs as its cap.
            const int milli = tasks_[j].spec.gpu_milli;
            const bool capped = config_.sharing == model::SharingMode::Mps && milli > 0;
            const double cap = capped ? static_cast<double>(milli) / kMilliPerGpu : 1.0;
            world_tasks_.push_back(
                model::WorldTask{tasks_[j].world_id, p.util, p.smact, p.smocc, p.drama, cap});
        }
    }
    world_speeds_.assign(world_tasks_.size(), 1.0);
    world_.speeds(world_tasks_, world_speeds_);
    return world_speeds_.empty() ? 1.0 : world_speeds_[self];
}

void Simulation::check_oom(std::size_t g) {
    SimGpu& gpu = gpus_[g];
    residents_mem_.clear();
    for (std::size_t i : gpu.residents) {
        if (tasks_[i].phase == Phase::Active) {
            residents_mem_.push_back(resident_memory(i));
        }
    }
    if (auto crash = model::next_oom(residents_mem_, config_.gpus.type.usable_mib, now_)) {
        push_event(crash->at, EventKind::Oom, g, gpu.version);
    }
}

void Simulation::remove_from_gpus(std::size_t i) {
    if (SimTask& t = tasks_[i]; t.host >= 0) {
        take_host(hosts_[static_cast<std::size_t>(t.host)], t.spec, -1);
        t.host = -1;
    }
    for (int g : tasks_[i].gpus) {
        SimGpu& gpu = gpus_[static_cast<std::size_t>(g)];
        gpu.residents.erase(std::remove(gpu.residents.begin(), gpu.residents.end(), i),
                            gpu.residents.end());
        gpu.residents_changed = true;
    }
}

model::ResidentMemory Simulation::resident_memory(std::size_t i) const {
    const SimTask& t = tasks_[i];
    model::ResidentMemory r;
    r.task = static_cast<TaskId>(i);
    r.active_at = t.phase == Phase::Active ? t.active_at : kNever;
    r.context_mib = model::kContextMiB;
    r.peak_mib = t.world_peak_mib;
    r.ramp_s = model::kRampSeconds;
    r.order = t.launch_order;
    return r;
}

}  // namespace carma::sim::engine

// What a deployment learns in a simulated run (sim/simulation.h): the history of finished
// attempts by command and family, the learned figures (TaskSpec::learned) of the tasks as they
// are queued and while they wait, and, for carma, the error of its speed predictor on shared
// GPUs (core/speed_correction.h).

#include <algorithm>
#include <bit>
#include <optional>

#include <fmt/format.h>

#include "sim/simulation.h"

namespace carma::sim::engine {

SimHistory Simulation::history() const {
    SimHistory h;
    for (const auto& [key, index] : exact_keys_) {
        if (!exact_[index].empty()) {
            h.exact[key] = exact_[index];
        }
        if (index < solo_.size() && !solo_[index].empty()) {
            h.solo_s[key] = solo_[index];
        }
    }
    h.speed_corrections = correction_->entries();
    for (const auto& [key, index] : family_keys_) {
        if (!family_[index].empty()) {
            h.family[key] = family_[index];
        }
    }
    return h;
}

std::size_t Simulation::key_index(std::unordered_map<std::string, std::size_t>& keys,
                                  std::vector<std::vector<RunFacts>>& runs,
                                  const std::string& key) {
    auto [it, added] = keys.emplace(key, runs.size());
    if (added) {
        runs.emplace_back();
    }
    return it->second;
}

void Simulation::learn(std::size_t i) {
    SimTask& t = tasks_[i];
    t.spec.learned = derive_knowledge(t.spec, exact_[t.exact_key], family_[t.family_key],
                                      std::nullopt, config_.knowledge);
    if (t.phase == Phase::Starting || t.phase == Phase::Active) {
        for (int g : t.gpus) {
            gpus_[static_cast<std::size_t>(g)].residents_changed = true;  // its view changed
        }
    }
    if (learning_) {
        correction_->bind(learned_activity(i), family_names_[t.family_key]);
    }
}

void Simulation::mark_queued(std::size_t i, bool queued) {
    if (!learning_) {
        return;
    }
    const SimTask& t = tasks_[i];
    const int step = queued ? 1 : -1;
    if (queued ? queued_by_learn_[t.learn_key].insert(i).second
               : queued_by_learn_[t.learn_key].erase(i) > 0) {
        for (auto* by :
             {&learn_keys_by_exact_[t.exact_key], &learn_keys_by_family_[t.family_key]}) {
            if (((*by)[t.learn_key] += step) == 0) {
                by->erase(t.learn_key);
            }
        }
    }
}

void Simulation::remember(std::size_t i, const RunFacts& facts) {
    const SimTask& t = tasks_[i];
    exact_[t.exact_key].push_back(facts);
    family_[t.family_key].push_back(facts);
    if (!learning_) {
        return;
    }
    // Waiting tasks of the same command or family learn at once, as a deployment's would.
    // Tasks of one command with the same family and memory information learn the same
    // figures from the same histories: derived once per such group, not once per waiting
    // task (a backlog holds hundreds of each, and every end re-derived them all). When a
    // group's figures come out as they were, none of its tasks is touched (at 20,000 tasks
    // most groups keep theirs, and relearning every waiting task was most of the run).
    std::vector<std::size_t> groups;
    for (const auto* by :
         {&learn_keys_by_exact_[t.exact_key], &learn_keys_by_family_[t.family_key]}) {
        for (const auto& [key, count] : *by) {
            groups.push_back(key);
        }
    }
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    for (std::size_t key : groups) {
        const std::set<std::size_t>& members = queued_by_learn_[key];
        const std::size_t first = *members.begin();
        Learned before = std::move(tasks_[first].spec.learned);
        learn(first);
        if (same_learned(before, tasks_[first].spec.learned)) {
            continue;
        }
        relearned_.clear();
        for (std::size_t j : members) {
            if (j != first) {
                tasks_[j].spec.learned = tasks_[first].spec.learned;
            }
            relearned_.push_back(static_cast<TaskId>(j));
        }
        scheduler_.relearn(relearned_, tasks_[first].spec.learned);
    }
}

bool Simulation::same_learned(const Learned& a, const Learned& b) {
    auto same = [](const std::optional<double>& x, const std::optional<double>& y) {
        return x.has_value() == y.has_value() &&
               (!x || std::bit_cast<std::uint64_t>(*x) == std::bit_cast<std::uint64_t>(*y));
    };
    return a.need_mib == b.need_mib && a.margin_mib == b.margin_mib &&
           a.lower_bound_mib == b.lower_bound_mib && a.runs == b.runs &&
           same(a.duration_s, b.duration_s) && same(a.activity, b.activity) && a.basis == b.basis;
}

std::size_t Simulation::learn_key_of(const SimTask& t) {
    const MemoryInfo& m = t.spec.memory;
    auto opt = [](const std::optional<MiB>& v) {
        return v ? fmt::format("{}", *v) : std::string("-");
    };
    std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", t.exact_key, t.family_key,
                                  opt(m.declared_mib), opt(m.profiled_mib), opt(m.horus_mib),
                                  opt(m.faketensor_mib), opt(m.gpumemnet_mib));
    if (m.model) {
        key += fmt::format("|{}|{}|{}", std::bit_cast<std::uint64_t>(m.model->parameters),
                           std::bit_cast<std::uint64_t>(m.model->activations_per_sample),
                           m.model->batch_size);
    }
    const std::size_t next = learn_keys_.size();
    return learn_keys_.try_emplace(std::move(key), next).first->second;
}

double Simulation::learned_activity(std::size_t j) const {
    return tasks_[j].spec.learned.activity.value_or(config_.knowledge.default_activity);
}

void Simulation::predict_for(std::size_t i, std::size_t g) {
    SimTask& t = tasks_[i];
    predict_in_.clear();
    std::size_t self = 0;
    double others = 0;
    for (std::size_t j : gpus_[g].residents) {
        if (tasks_[j].phase == Phase::Active) {
            if (j == i) {
                self = predict_in_.size();
            } else {
                others += learned_activity(j);
            }
            predict_in_.push_back(learned_activity(j));
        }
    }
    if (predict_in_.size() < 2) {
        return;
    }
    predict_out_.assign(predict_in_.size(), 1.0);
    raw_predict_(predict_in_, predict_out_);
    t.shared_now = true;
    t.predicted_now = std::min(t.predicted_now, predict_out_[self]);
    t.others_now = std::max(t.others_now, others);
    t.sharers_now = std::max(t.sharers_now, static_cast<double>(predict_in_.size()));
}

void Simulation::account_segment(SimTask& t) {
    if (t.phase != Phase::Active || !t.shared_now) {
        return;
    }
    const double dt = now_ - t.progress_at;
    t.shared_s += dt;
    t.predicted_shared_s += t.predicted_now * dt;
    t.others_activity_s += t.others_now * dt;
    t.sharers_s += t.sharers_now * dt;
}

void Simulation::learn_speed_error(std::size_t i, double run_s) {
    SimTask& t = tasks_[i];
    if (t.exact_key >= solo_.size()) {
        solo_.resize(exact_.size());
    }
    std::vector<double>& solo = solo_[t.exact_key];
    if (t.shared_s <= 0) {
        solo.push_back(run_s);
        if (solo.size() > 20) {
            solo.erase(solo.begin());
        }
        return;
    }
    if (solo.empty() || !learning_) {
        return;
    }
    std::vector<double> sorted = solo;
    std::sort(sorted.begin(), sorted.end());
    SpeedObservation o;
    o.family = family_names_[t.family_key];
    o.sharing_class = sharing_class(model::to_string(config_.sharing),
                                    t.others_activity_s / t.shared_s, t.sharers_s / t.shared_s);
    o.solo_s = quantile_sorted(sorted, 0.5);
    o.run_s = run_s;
    o.shared_s = t.shared_s;
    o.predicted_shared_progress_s = t.predicted_shared_s;
    correction_->observe(o);
}

}  // namespace carma::sim::engine

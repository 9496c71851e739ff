// What the daemon learns from the attempts it ran: the own SM activity of each live attempt, one
// history row per attempt that ran (store/history.h), and the knowledge rule (core/knowledge.h)
// over a task's history before the task is queued, and again for waiting tasks whenever a run of
// their command or family ends. accumulate_activity() and record_history() run with the
// daemon's lock held; learn() and relearn_waiting() use only the store, which has its own.

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "core/exit_classify.h"
#include "core/fingerprint.h"
#include "core/knowledge.h"
#include "daemon/daemon.h"

namespace carma::daemon {

namespace {

// Attempts that say something about what the command needs: a cancelled or lost one was cut
// short by something else.
bool teaches(const std::string& outcome) {
    return outcome == to_string(AttemptOutcome::Succeeded) ||
           outcome == to_string(AttemptOutcome::Failed) ||
           outcome == to_string(AttemptOutcome::OutOfMemory);
}

}  // namespace

// Each tick, the attempt's own SM activity, averaged over the GPUs it was seen on in this
// sample (core/knowledge.h sample_activity): its processes' per-process readings where the
// backend has them for every process on the GPU, else the GPU's SMACT but only while it ran
// alone there. A co-runner's work is not the task's: learned as its own, the predictor would
// over-state the interference of its next run. A tick without a reading of its own adds nothing.
void Daemon::accumulate_activity() {
    for (auto& [id, live] : live_) {
        double sum = 0;
        int known = 0;
        for (const device::GpuSample& s : last_samples_) {
            const auto seen = live.activity_now.find(s.index);
            if (!s.error.empty() || seen == live.activity_now.end()) {
                continue;
            }
            bool per_process = true;
            for (const device::GpuProcess& p : s.processes) {
                per_process =
                    per_process && (p.mps_server || (p.activity && std::isfinite(*p.activity)));
            }
            // Alone: no process of others listed beside it, and no other attempt placed there
            // (one still starting, or hidden from the process list, would soon add to SMACT).
            bool alone = !live.crowded_now.contains(s.index);
            for (const auto& [other_id, other] : live_) {
                if (other_id != id &&
                    std::find(other.gpus.begin(), other.gpus.end(), s.index) != other.gpus.end()) {
                    alone = false;
                }
            }
            const std::optional<double> gpu =
                s.smact && std::isfinite(*s.smact) ? s.smact : std::nullopt;
            if (const std::optional<double> a = sample_activity(
                    per_process ? std::optional<double>(seen->second) : std::nullopt, gpu, alone)) {
                sum += *a;
                ++known;
            }
        }
        if (known > 0) {
            live.activity_sum += sum / known;
            live.activity_samples += 1;
        }
    }
}

// The simulator's bookkeeping (sim/simulation_knowledge.cpp), on the daemon's ticks: the state found at a
// tick holds until the next. An attempt is GPU-active once seen on all its GPUs (settled); on
// each of its GPUs with other such attempts the raw predictor is asked, from the learned
// activities (as the `carma` policy plans with them), and the slowest GPU counts.
void Daemon::accumulate_sharing() {
    const double clock = now();
    for (auto& [id, live] : live_) {
        if (live.sharing_at >= 0 && live.shared_now) {
            const double dt = std::max(0.0, clock - live.sharing_at);
            live.shared_s += dt;
            live.predicted_shared_s += live.predicted_now * dt;
            live.others_activity_s += live.others_now * dt;
            live.sharers_s += live.sharers_now * dt;
        }
        live.sharing_at = clock;
        live.shared_now = false;
        live.predicted_now = 1;
        live.others_now = 0;
        live.sharers_now = 0;
        if (!live.settled || !raw_predict_) {
            continue;
        }
        for (int g : live.gpus) {
            std::vector<double> activities;
            std::size_t self = 0;
            double others = 0;
            for (const auto& [other_id, other] : live_) {
                if (!other.settled ||
                    std::find(other.gpus.begin(), other.gpus.end(), g) == other.gpus.end()) {
                    continue;
                }
                const double a = other.learned.activity.value_or(knowledge_config().default_activity);
                if (other_id == id) {
                    self = activities.size();
                } else {
                    others += a;
                }
                activities.push_back(a);
            }
            if (activities.size() < 2) {
                continue;
            }
            std::vector<double> speeds(activities.size(), 1.0);
            raw_predict_(activities, speeds);
            live.shared_now = true;
            live.predicted_now = std::min(live.predicted_now, speeds[self]);
            live.others_now = std::max(live.others_now, others);
            live.sharers_now = std::max(live.sharers_now, static_cast<double>(activities.size()));
        }
    }
}

void Daemon::bind_correction(const store::TaskRow& task) const {
    if (!correction_) {
        return;
    }
    const TaskFingerprint fp = store::fingerprint_of(task);
    correction_->bind(task.spec.learned.activity.value_or(knowledge_config().default_activity),
                      fp.family);
}

nlohmann::json Daemon::correction_json(const std::string& family) {
    std::lock_guard lock(mu_);
    nlohmann::json classes = nlohmann::json::array();
    std::size_t observations = 0;
    std::map<std::string, std::size_t> own;
    for (const SpeedCorrection::Entry& e : correction_->entries()) {
        if (e.family == family) {
            own[e.sharing_class] = e.k.size();
            observations += e.k.size();
        }
    }
    for (const std::string& cls : correction_->classes()) {
        const SpeedCorrection::Factor f = correction_->factor(family, cls);
        classes.push_back({{"sharing_class", cls},
                           {"k", f.k},
                           {"cautious_k", f.cautious_k},
                           {"basis", f.basis},
                           {"samples", f.samples},
                           {"observations", own.contains(cls) ? own[cls] : 0}});
    }
    return {{"mode", correction_->mode()}, {"observations", observations}, {"classes", classes}};
}

namespace {

// A successful, seen attempt that shared its GPUs, against the command's solo history: the
// predictor's error it shows goes into the row and the correction (core/speed_correction.h).
void learn_speed_error_of(store::Store& store, SpeedCorrection& correction,
                          const store::TaskRow& task, const TaskFingerprint& fp,
                          double others_activity_s, double sharers_s, double predicted_shared_s,
                          store::HistoryRow& row) {
    if (row.outcome != to_string(AttemptOutcome::Succeeded) || !row.unobserved.empty() ||
        row.shared_s.value_or(0) <= 0) {
        return;
    }
    auto mine = store.command_history(fp.exact, static_cast<int>(knowledge_config().max_runs));
    if (!mine) {
        spdlog::warn("task={}: cannot read its history to learn the predictor's error: {}",
                     task.id, mine.error().message);
        return;
    }
    const std::optional<double> solo = store::solo_run_s(*mine);
    if (!solo) {
        return;  // nothing to compare with: it never ran alone yet
    }
    SpeedObservation o;
    o.family = fp.family;
    o.sharing_class = sharing_class(correction.mode(), others_activity_s / *row.shared_s,
                                    sharers_s / *row.shared_s);
    o.solo_s = *solo;
    o.run_s = row.run_s;
    o.shared_s = *row.shared_s;
    o.predicted_shared_progress_s = predicted_shared_s;
    const std::optional<double> k = observed_factor(o, correction.config());
    if (!k) {
        return;
    }
    row.sharing_class = o.sharing_class;
    row.speed_k = *k;
    correction.add(o.family, o.sharing_class, *k);
    spdlog::info("task={}: attempt {} shared {:.0f} s of {:.0f} s ({}): slowdown {:.2f}x the "
                 "predicted (solo {:.0f} s)",
                 task.id, row.attempt, o.shared_s, o.run_s, o.sharing_class, *k, o.solo_s);
}

}  // namespace

void Daemon::learn_speed_error(const store::TaskRow& task, const TaskFingerprint& fp,
                               const LiveAttempt& live, store::HistoryRow& row) {
    if (correction_) {
        learn_speed_error_of(*store_, *correction_, task, fp, live.others_activity_s,
                             live.sharers_s, live.predicted_shared_s, row);
    }
}

// A row that cannot be written costs this one lesson, never the attempt's end: it is logged.
void Daemon::record_history(const store::TaskRow& task, const store::AttemptRow& attempt,
                            const LiveAttempt& live) {
    if (!teaches(attempt.outcome)) {
        return;
    }
    const TaskFingerprint fp = store::fingerprint_of(task);
    store::HistoryRow row;
    row.task = task.id;
    row.attempt = attempt.number;
    row.fingerprint = fp.exact;
    row.family = fp.family;
    row.uid = task.uid;
    row.gpus = task.spec.gpus;
    // The attempt's peaks: what was sampled, and for an out-of-memory end what its error said.
    row.peak_per_gpu = attempt.peak_mib;
    for (const auto& [gpu, mib] : attempt.peak_mib) {
        row.peak_mib = std::max(row.peak_mib, mib);
    }
    // Never seen holding memory: a peak of 0 is what CARMA saw, not what the task needed.
    const Observation seen = observation_of(attempt.peak_mib);
    if (seen != Observation::Seen) {
        row.unobserved = std::string(to_string(seen));
        spdlog::info("task={}: attempt {} was unobserved ({}): {}", task.id, attempt.number,
                     row.unobserved, unobserved_why(seen));
    }
    const double ended = attempt.ended_at.value_or(unix_now());
    // On the scheduler's clock, like durations the policy plans with: emulated jobs run
    // time_scale times faster than the model they follow.
    row.run_s = std::max(0.0, ended - attempt.started_at) * config_.time_scale;
    if (live.activity_samples > 0 && seen == Observation::Seen) {
        row.activity = live.activity_sum / live.activity_samples;
    }
    row.outcome = attempt.outcome;
    row.ended_at = ended;
    if (live.sharing_known) {
        row.shared_s = live.shared_s;
    }
    learn_speed_error(task, fp, live, row);
    if (auto r = store_->add_history(row); !r) {
        spdlog::warn("task={}: cannot record attempt {} in the history: {}", task.id,
                     attempt.number, r.error().message);
        return;
    }
    lessons_.exact.insert(fp.exact);
    lessons_.family.insert(fp.family);
}

std::optional<double> Daemon::observed_slowdown(const store::TaskRow& task,
                                                const store::AttemptRow& attempt,
                                                const LiveAttempt& live) {
    if (!live.sharing_known) {
        return std::nullopt;  // re-attached after a restart: its time before is unknown
    }
    if (live.shared_s <= 0) {
        return 1.0;
    }
    auto mine = store_->command_history(store::fingerprint_of(task).exact,
                                        static_cast<int>(knowledge_config().max_runs));
    if (!mine) {
        return std::nullopt;
    }
    const std::optional<double> solo = store::solo_run_s(*mine);
    const double run_s =
        std::max(0.0, attempt.ended_at.value_or(unix_now()) - attempt.started_at) *
        config_.time_scale;
    if (!solo || *solo <= 0) {
        return std::nullopt;
    }
    return run_s / *solo;
}

KnowledgeConfig knowledge_config() { return KnowledgeConfig{}; }

namespace {

struct HistoryFacts {
    std::vector<RunFacts> mine;  // the same command
    std::vector<RunFacts> kin;   // its family, other arguments
};

HistoryFacts read_history(store::Store& store, const store::TaskRow& task,
                          const TaskFingerprint& fp) {
    const int newest = static_cast<int>(knowledge_config().max_runs);
    auto mine = store.command_history(fp.exact, newest);
    auto kin = store.family_history(fp.family, fp.exact, newest);
    if (!mine || !kin) {
        spdlog::warn("task={}: cannot read its history, planning without it: {}", task.id,
                     (!mine ? mine.error() : kin.error()).message);
    }
    return {mine ? store::run_facts(*mine) : std::vector<RunFacts>{},
            kin ? store::run_facts(*kin) : std::vector<RunFacts>{}};
}

Learned derive(const store::TaskRow& task, const HistoryFacts& h) {
    return derive_knowledge(task.spec, h.mine, h.kin, task.spec.time_limit_s, knowledge_config());
}

}  // namespace

Learned Daemon::learn(const store::TaskRow& task) {
    const TaskFingerprint fp = store::fingerprint_of(task);
    return derive(task, read_history(*store_, task, fp));
}

std::optional<TaskId> Daemon::relearn_waiting(const RelearnPass& pass,
                                              std::vector<std::pair<TaskId, Learned>>& changed,
                                              std::vector<std::string>& families) {
    const Lessons& lessons = pass.lessons;
    auto rows = store_->waiting_tasks_without_env(pass.after, kRelearnPage);
    if (!rows) {
        spdlog::warn("cannot read the waiting tasks to update what they know: {}",
                     rows.error().message);
        return std::nullopt;
    }
    // The same command line has the same history: an array's members read it once.
    std::map<std::string, HistoryFacts> by_command;
    for (const store::TaskRow& t : *rows) {
        const TaskFingerprint fp = store::fingerprint_of(t);
        if (!lessons.exact.contains(fp.exact) && !lessons.family.contains(fp.family)) {
            continue;
        }
        auto it = by_command.find(fp.exact);
        if (it == by_command.end()) {
            it = by_command.emplace(fp.exact, read_history(*store_, t, fp)).first;
        }
        if (Learned fresh = derive(t, it->second); !same_learned(fresh, t.spec.learned)) {
            changed.emplace_back(t.id, std::move(fresh));
            families.push_back(fp.family);
        }
    }
    if (auto r = store_->set_learned_if_waiting(changed); !r) {
        spdlog::warn("cannot record what {} waiting task(s) learned: {}", changed.size(),
                     r.error().message);
    }
    if (rows->size() < kRelearnPage) {
        return std::nullopt;
    }
    return rows->back().id;
}

}  // namespace carma::daemon

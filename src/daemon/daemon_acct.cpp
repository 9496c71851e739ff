// The daemon's accounting: the GPU energy of each live attempt, accumulated tick by tick, and
// the answer to GET /v1/acct. accumulate_energy() runs with the daemon's lock held; acct() reads
// only the store, which has its own.

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <spdlog/spdlog.h>

#include "core/energy_split.h"
#include "core/text.h"
#include "daemon/acct_json.h"
#include "daemon/daemon.h"
#include "daemon/task_json.h"

namespace carma::daemon {

// Each GPU's energy since its previous good sample is shared among the attempts placed on it
// (core/energy_split.h), by the SM activity of their processes in this sample: processes are
// matched to attempts in notice_sightings(), as for peak memory. The interval ending now belongs
// to the attempts live now, so an attempt gets the interval in which it started and the one in
// which it ended (collect_exits() runs after this). Not attributed: a GPU's first interval after
// the daemon starts (energy used while no daemon watched), and intervals of failed reads, which
// the next good one covers.
void Daemon::accumulate_energy() {
    for (const device::GpuSample& s : last_samples_) {
        if (s.index < 0 || !s.error.empty() || !s.energy_j || !std::isfinite(*s.energy_j)) {
            continue;
        }
        const auto idx = static_cast<std::size_t>(s.index);
        if (energy_seen_.size() <= idx) {
            energy_seen_.resize(idx + 1);
        }
        const std::optional<double> before = std::exchange(energy_seen_[idx], *s.energy_j);
        if (!before || *s.energy_j <= *before) {
            continue;  // the first reading, nothing used, or a counter that started again
        }
        // Per-process activity is known on this GPU when every task process on it has one.
        bool known = true;
        double total = 0;
        for (const device::GpuProcess& p : s.processes) {
            if (p.mps_server) {
                continue;
            }
            known = known && p.activity && std::isfinite(*p.activity);
            total += p.activity && std::isfinite(*p.activity) ? std::clamp(*p.activity, 0.0, 1.0)
                                                               : 0.0;
        }
        std::vector<LiveAttempt*> on_gpu;
        std::vector<std::optional<double>> activity;
        double attributed = 0;
        bool any_seen = false;
        for (auto& [id, live] : live_) {
            if (std::find(live.gpus.begin(), live.gpus.end(), s.index) == live.gpus.end()) {
                continue;
            }
            on_gpu.push_back(&live);
            const auto seen = live.activity_now.find(s.index);
            any_seen = any_seen || seen != live.activity_now.end();
            const double a = seen == live.activity_now.end() ? 0.0 : seen->second;
            attributed += a;
            activity.push_back(known ? std::optional<double>(a) : std::nullopt);
        }
        // Activity of processes that belong to no attempt stays theirs, but only when some
        // attempt was found on the GPU: with none found (all starting, or the process table
        // unreadable) the processes cannot be told apart, and the GPU's holders share it.
        const double others = known && any_seen ? std::max(0.0, total - attributed) : 0.0;
        const std::vector<double> shares =
            split_gpu_energy(*s.energy_j - *before, activity, others);
        for (std::size_t i = 0; i < on_gpu.size(); ++i) {
            on_gpu[i]->energy_j = on_gpu[i]->energy_j.value_or(0) + shares[i];
            on_gpu[i]->energy_changed = true;
        }
    }
    // Written every few seconds (with the GPU samples), so a restart loses little.
    const bool write = ticks_ % 10 == 1;
    for (auto& [id, live] : live_) {
        live.activity_now.clear();
        if (write && live.energy_changed && live.energy_j) {
            if (auto r = store_->set_attempt_energy(id, live.number, *live.energy_j); r) {
                live.energy_changed = false;
            }
        }
    }
}

// Accounting is not secret: a row holds no environment and no command line beyond the task's
// name (the rule visible_task_json applies to tasks hides only the environment), so every
// caller sees every user's rows, as everyone may list the queue.
api::ApiResult<std::string> Daemon::acct(const api::Caller&, const api::AcctQuery& query) {
    store::FinishedQuery q;
    q.since = query.since;
    q.user = query.user;
    std::vector<std::string> final_names;
    for (store::TaskState s : store::all_task_states()) {
        if (store::is_final(s)) {
            final_names.emplace_back(store::to_string(s));
        }
    }
    for (const std::string& name : query.states) {
        const std::optional<store::TaskState> state = store::parse_task_state(name);
        if (!state || !store::is_final(*state)) {
            const std::string near = closest_match(name, final_names);
            return api::api_fail(
                400, fmt::format("query parameter state='{}' is not a final state{}; give one or "
                                 "more of {}, separated by commas",
                                 name, near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                                 fmt::join(final_names, ", ")));
        }
        q.states.push_back(*state);
    }
    q.after = query.page.after;
    q.limit = query.page.limit;
    auto rows = store_->finished_tasks(q);
    if (!rows) {
        return api::api_fail(500, rows.error().message);
    }
    // One row's JSON tree at a time, appended as text, as list_tasks does.
    std::string out = "{\"tasks\":[";
    for (std::size_t i = 0; i < rows->size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        out += acct_task_json((*rows)[i]).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace);
    }
    out += "],\"next\":" +
           next_page_json(rows->size(), rows->empty() ? 0 : rows->back().task.id, query.page);
    // The totals are of the whole query, not of the page: with its last page, summed a page at
    // a time from the first, so memory stays one page whatever the query covers.
    if (is_last_page(rows->size(), query.page)) {
        AcctTotals totals;
        store::FinishedQuery all = q;
        all.after = 0;
        all.limit = api::kPageMax;
        for (;;) {
            auto page = store_->finished_tasks(all);
            if (!page) {
                return api::api_fail(500, page.error().message);
            }
            for (const store::FinishedTask& t : *page) {
                totals.add(acct_task_json(t));
            }
            if (page->size() < all.limit) {
                break;
            }
            all.after = page->back().task.id;
        }
        out += ",\"totals\":";
        out += totals.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    out += '}';
    return out;
}

}  // namespace carma::daemon

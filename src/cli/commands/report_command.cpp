// `carma report`: asks the daemon for its history over a window (GET /v1/timeline), turns it into
// the record the simulator's report draws (cli/views/timeline_record.h) and writes the same page.

#include "cli/commands.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "cli/common/local_time.h"
#include "cli/views/cells.h"
#include "cli/views/timeline_record.h"
#include "core/time_text.h"
#include "sim/report.h"

namespace carma::cli {

namespace {

using nlohmann::json;

constexpr double kDefaultWindowS = 24 * 3600.0;
// Samples per GPU asked for: about one per horizontal unit of a chart (sim/report_charts.h).
constexpr int kTimelinePoints = 1000;
// History that starts this far after the window's start (at least kMinLeadS) is drawn from just
// before its first record, with that share of the span (at least kMinLeadS / 2) left before it.
constexpr double kMinLeadS = 60;
constexpr double kLeadShare = 0.02;

struct ReportOptions {
    std::string socket;
    std::string since;
    std::string until;
    std::string dir;
};

double time_flag(const std::string& flag, const std::string& text, double now) {
    auto t = parse_time_point(text, now, local_to_unix);
    if (!t) {
        throw std::runtime_error(flag + ": " + t.error().message);
    }
    return *t;
}

// One page of the timeline: the GPUs' samples and the first tasks, or the tasks after `after`.
json fetch_timeline_page(const api::ApiClient& client, double since, double until,
                         std::int64_t after) {
    std::string target = fmt::format("/v1/timeline?since={:.3f}&until={:.3f}&points={}&limit={}",
                                     since, until, kTimelinePoints, api::kPageMax);
    if (after > 0) {
        target += fmt::format("&after={}", after);
    }
    auto reply = client.exchange("GET", target);
    if (!reply) {
        throw std::runtime_error(reply.error().message);
    }
    const json doc = json::parse(reply->body, nullptr, false);
    if (reply->status < 200 || reply->status > 299) {
        const std::string said =
            doc.is_object() && doc.contains("error") && doc["error"].is_string()
                ? doc["error"].get<std::string>()
                : reply->body.substr(0, 200);
        throw std::runtime_error(fmt::format(
            "the CARMA daemon at {} answered HTTP {} to GET /v1/timeline: {}{}",
            client.socket_path(), reply->status, said,
            reply->status == 404 ? "; a daemon older than this carma has no history endpoint: "
                                   "restart it from the same version"
                                 : ""));
    }
    if (doc.is_discarded()) {
        throw std::runtime_error(
            fmt::format("the CARMA daemon's answer to GET /v1/timeline is not JSON: '{}'; are the "
                        "daemon and carma the same version?",
                        reply->body.substr(0, 80)));
    }
    return doc;
}

// Every page of the timeline as one answer: the first page's GPUs and every page's tasks.
json fetch_timeline(const std::string& socket, double since, double until) {
    api::ApiClient client(api::resolve_socket_path(socket));
    json doc = fetch_timeline_page(client, since, until, 0);
    std::int64_t after = 0;
    for (json next = doc.value("next", json()); next.is_number_integer() &&
                                                next.get<std::int64_t>() > after;) {
        after = next.get<std::int64_t>();
        json page = fetch_timeline_page(client, since, until, after);
        if (page.contains("tasks") && page["tasks"].is_array() && doc.contains("tasks") &&
            doc["tasks"].is_array()) {
            for (json& t : page["tasks"]) {
                doc["tasks"].push_back(std::move(t));
            }
        }
        next = page.value("next", json());
    }
    doc.erase("next");
    return doc;
}

int run_report(const ReportOptions& o) {
    const double now = now_epoch();
    const double until = o.until.empty() ? now : time_flag("--until", o.until, now);
    const double since =
        o.since.empty() ? until - kDefaultWindowS : time_flag("--since", o.since, now);
    if (!(until > since)) {
        throw std::runtime_error(fmt::format(
            "--since ({:.0f}) must be before --until ({:.0f}); e.g. --since 2d --until 1d", since,
            until));
    }
    json answer = fetch_timeline(o.socket, since, until);
    // Drawn from a little before the first record on: the window asked for may be a day, the
    // daemon's history a few minutes of it.
    if (auto first = first_recorded(answer);
        first && *first - since > std::max(kMinLeadS, kLeadShare * (until - since))) {
        const double from = *first - std::max(kMinLeadS / 2, kLeadShare * (until - *first));
        answer = fetch_timeline(o.socket, from, until);
    }
    auto comparison = comparison_from_timeline(answer);
    if (!comparison) {
        throw std::runtime_error(comparison.error().message);
    }
    auto path = sim::write_html_report(*comparison, o.dir);
    if (!path) {
        throw std::runtime_error(path.error().message);
    }
    const std::size_t tasks =
        comparison->results.empty() ? 0 : comparison->results.front().tasks.size();
    fmt::print("report written to {} ({} task{}, {} of history)\n", *path, tasks,
               tasks == 1 ? "" : "s", format_duration(comparison->span_s));
    return 0;
}

}  // namespace

Action add_report_command(CLI::App& app) {
    auto o = std::make_shared<ReportOptions>();
    CLI::App* cmd = app.add_subcommand(
        "report",
        "Write an HTML report of the daemon's history into DIR: GPU activity and memory "
        "over time, every attempt per GPU with out-of-memory crashes, waits, queue");
    cmd->add_option("dir", o->dir, "Folder for index.html, results.csv and tasks.csv")->required();
    const std::string forms =
        "a unix time, an ISO date or time (2026-11-29, 2026-11-29T10:00, Z for UTC) or how long "
        "ago (2h, 3d)";
    cmd->add_option("-S,--since", o->since,
                    "Start of the window (default: 24 h before --until): " + forms);
    cmd->add_option("-U,--until", o->until, "End of the window (default: now): " + forms);
    cmd->add_option(
        "--socket", o->socket,
        api::socket_option_help());
    return [o] { return run_report(*o); };
}

}  // namespace carma::cli

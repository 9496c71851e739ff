// Load generator for bench/daemon_bench.sh: drives a running `carma serve` over its Unix socket
// through the project's own client (api::ApiClient, one connection per request as every `carma`
// command does), so the figures include our client as well as the daemon. See bench/README.md,
// section "Daemon".
//
//   submit_load submit  --socket S -n N [-c C] [--command ARG...]   N POST /v1/tasks from C threads
//   submit_load healthz --socket S -n N [-c C]                      N GET /healthz (the HTTP floor)
//   submit_load probe --socket S -n N [--interval-ms I]   N GET /v1/status, I ms apart: the API's
//                                                          latency while the daemon works
//   submit_load wait-window  --socket S [--samples W] [--timeout T] every GPU's window holds W
//   submit_load wait-running --socket S --count K [--timeout T]     /v1/status says K running
//   submit_load status --socket S                                   print GET /v1/status (JSON)
//   submit_load list   --socket S                                   GET /v1/tasks: count, bytes
//   submit_load get --socket S --path P -n N [--interval-ms I]   N GET P: latency and bytes
//   submit_load timeline --socket S [-c C] [--since T]   C clients at once each read the whole
//                                       GET /v1/timeline from T (every page, following "next")
//   submit_load metric --socket S --name NAME            print one value of GET /metrics
// submit takes --array SPEC (one request, an array of tasks) and --arg-bytes N (one argument of
// N bytes appended to the command: what a submission makes the daemon store).
//
// submit/healthz print one line of key=value pairs (rate in requests per second of wall time,
// from the moment all threads are released until the last answer; per-request latency
// percentiles, nearest rank) and exit 1 if any request failed. A submitted task must come back
// "queued" unless --any-state is given: the benchmark measures submissions that stay queued.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string mode;
    std::string socket;
    long requests = 1000;
    int clients = 1;
    int gpus = 1;
    long samples = 30;
    long count = 0;
    double timeout_s = 120;
    bool any_state = false;
    double interval_ms = 0;
    std::string array;
    long arg_bytes = 0;
    std::string path;
    std::string name;
    double since = 0;
    std::vector<std::string> command{"/bin/sleep", "3600"};
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "submit_load: %s\n"
                 "usage: submit_load submit|healthz|probe --socket S -n N [-c C] [--gpus G] "
                 "[--any-state] [--interval-ms I] [--command ARG...]\n"
                 "       submit_load wait-window --socket S [--samples W] [--timeout SECONDS]\n"
                 "       submit_load wait-running --socket S --count K [--timeout SECONDS]\n"
                 "       submit_load status|list --socket S\n",
                 why.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    if (argc < 2) {
        usage("missing mode");
    }
    o.mode = argv[1];
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--socket") {
            o.socket = value();
        } else if (a == "-n" || a == "--requests") {
            o.requests = std::stol(value());
        } else if (a == "-c" || a == "--clients") {
            o.clients = std::stoi(value());
        } else if (a == "--gpus") {
            o.gpus = std::stoi(value());
        } else if (a == "--samples") {
            o.samples = std::stol(value());
        } else if (a == "--count") {
            o.count = std::stol(value());
        } else if (a == "--timeout") {
            o.timeout_s = std::stod(value());
        } else if (a == "--interval-ms") {
            o.interval_ms = std::stod(value());
        } else if (a == "--array") {
            o.array = value();
        } else if (a == "--arg-bytes") {
            o.arg_bytes = std::stol(value());
        } else if (a == "--path") {
            o.path = value();
        } else if (a == "--name") {
            o.name = value();
        } else if (a == "--since") {
            o.since = std::stod(value());
        } else if (a == "--any-state") {
            o.any_state = true;
        } else if (a == "--command") {
            o.command.assign(argv + i + 1, argv + argc);
            if (o.command.empty()) {
                usage("--command needs at least one argument");
            }
            break;
        } else {
            usage("unknown argument " + a);
        }
    }
    if (o.socket.empty()) {
        usage("--socket is required");
    }
    if (o.requests < 1 || o.clients < 1 || o.clients > 256) {
        usage("need -n >= 1 and 1 <= -c <= 256");
    }
    return o;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) {
        return 0;
    }
    // Nearest rank: the smallest value with at least p of the samples at or below it.
    auto rank =
        static_cast<std::size_t>(std::max(1.0, std::ceil(p * static_cast<double>(sorted.size()))));
    return sorted[std::min(rank, sorted.size()) - 1];
}

int run_load(const Options& o) {
    const bool submit = o.mode == "submit";
    std::vector<std::string> command = o.command;
    if (o.arg_bytes > 0) {
        command.emplace_back(static_cast<std::size_t>(o.arg_bytes), 'x');
    }
    nlohmann::json body_json = {{"command", command}, {"workdir", "/tmp"}, {"gpus", o.gpus}};
    if (!o.array.empty()) {
        body_json["array"] = o.array;
    }
    std::atomic<long> bytes{0};

    std::vector<std::vector<double>> latencies(static_cast<std::size_t>(o.clients));
    std::atomic<long> errors{0}, not_queued{0};
    std::mutex first_error_mu;
    std::string first_error;
    std::latch ready(o.clients + 1);
    std::atomic<bool> go{false};
    std::vector<Clock::time_point> finished(static_cast<std::size_t>(o.clients));

    auto worker = [&](int index) {
        const long share = o.requests / o.clients + (index < o.requests % o.clients ? 1 : 0);
        carma::api::ApiClient client(o.socket);
        std::vector<double>& lat = latencies[static_cast<std::size_t>(index)];
        lat.reserve(static_cast<std::size_t>(share));
        ready.count_down();
        while (!go.load(std::memory_order_acquire)) {
            std::this_thread::yield();
        }
        for (long i = 0; i < share; ++i) {
            const auto t0 = Clock::now();
            std::string error;
            if (submit) {
                auto r = client.submit(body_json);
                if (!r) {
                    error = r.error().message;
                } else if (!o.any_state && r->value("state", "") != "queued") {
                    not_queued.fetch_add(1);
                    error = fmt::format("task {} came back '{}', not queued", r->value("id", 0),
                                        r->value("state", ""));
                }
            } else if (o.mode == "probe") {
                auto r = client.status();
                if (!r) {
                    error = r.error().message;
                }
            } else if (o.mode == "get") {
                auto r = client.exchange("GET", o.path);
                if (!r) {
                    error = r.error().message;
                } else if (r->status != 200) {
                    error = fmt::format("HTTP {}: {}", r->status, r->body.substr(0, 200));
                } else {
                    bytes.fetch_add(static_cast<long>(r->body.size()));
                }
            } else {
                auto r = client.healthz();
                if (!r) {
                    error = r.error().message;
                }
            }
            lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            if (o.interval_ms > 0) {
                std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.interval_ms));
            }
            if (!error.empty()) {
                errors.fetch_add(1);
                std::lock_guard lock(first_error_mu);
                if (first_error.empty()) {
                    first_error = error;
                }
            }
        }
        finished[static_cast<std::size_t>(index)] = Clock::now();
    };

    std::vector<std::thread> threads;
    for (int i = 0; i < o.clients; ++i) {
        threads.emplace_back(worker, i);
    }
    ready.arrive_and_wait();
    const auto start = Clock::now();
    go.store(true, std::memory_order_release);
    for (std::thread& t : threads) {
        t.join();
    }
    const auto end = *std::max_element(finished.begin(), finished.end());
    const double wall = std::chrono::duration<double>(end - start).count();

    std::vector<double> all;
    for (const auto& l : latencies) {
        all.insert(all.end(), l.begin(), l.end());
    }
    std::sort(all.begin(), all.end());
    fmt::print(
        "mode={} clients={} requests={} errors={} wall_s={:.3f} rate={:.1f} p50_ms={:.3f} "
        "p99_ms={:.3f} max_ms={:.3f} mean_bytes={}\n",
        o.mode, o.clients, o.requests, errors.load(), wall, static_cast<double>(o.requests) / wall,
        percentile(all, 0.50), percentile(all, 0.99), all.empty() ? 0.0 : all.back(),
        bytes.load() / o.requests);
    if (errors.load() > 0) {
        std::fprintf(stderr,
                     "submit_load: %ld of %ld requests failed (%ld not queued); first: %s\n",
                     errors.load(), o.requests, not_queued.load(), first_error.c_str());
        return 1;
    }
    return 0;
}

// Polls the daemon twice a second until `done` says so or the timeout passes.
template <class Done>
int wait_for(const Options& o, const char* what, Done done) {
    carma::api::ApiClient client(o.socket);
    const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_s);
    std::string last = "no answer yet";
    while (Clock::now() < deadline) {
        if (auto r = done(client, last); r) {
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    std::fprintf(stderr, "submit_load: timed out after %.0f s waiting for %s (%s)\n", o.timeout_s,
                 what, last.c_str());
    return 1;
}

int wait_window(const Options& o) {
    return wait_for(o, "every GPU's first window",
                    [&](carma::api::ApiClient& c, std::string& last) {
                        auto g = c.gpus();
                        if (!g) {
                            last = g.error().message;
                            return false;
                        }
                        long least = -1;
                        for (const auto& gpu : (*g)["gpus"]) {
                            const long n = gpu["window"].value("samples", 0L);
                            least = least < 0 ? n : std::min(least, n);
                        }
                        last = fmt::format("fewest samples {}", least);
                        return least >= o.samples;
                    });
}

int wait_running(const Options& o) {
    return wait_for(o, "running tasks", [&](carma::api::ApiClient& c, std::string& last) {
        auto s = c.status();
        if (!s) {
            last = s.error().message;
            return false;
        }
        const long running = s->value("running", 0L);
        last = fmt::format("{} running, {} queued, pending: {}", running, s->value("queued", 0L),
                           s->value("pending_reason", ""));
        return running >= o.count;
    });
}

// Clients at once, each reading the whole timeline from `since` (every page) as `carma report`
// does; prints the wall time and what came.
int read_timelines(const Options& o) {
    std::atomic<long> errors{0}, tasks{0}, pages{0}, bytes{0};
    std::vector<std::thread> threads;
    const auto start = Clock::now();
    for (int c = 0; c < o.clients; ++c) {
        threads.emplace_back([&] {
            carma::api::ApiClient client(o.socket);
            std::int64_t after = 0;
            for (;;) {
                std::string target = fmt::format("/v1/timeline?since={:.3f}&points=600&limit={}",
                                                 o.since, carma::api::kPageMax);
                if (after > 0) {
                    target += fmt::format("&after={}", after);
                }
                auto r = client.exchange("GET", target);
                if (!r || r->status != 200) {
                    errors.fetch_add(1);
                    return;
                }
                pages.fetch_add(1);
                bytes.fetch_add(static_cast<long>(r->body.size()));
                const nlohmann::json doc = nlohmann::json::parse(r->body, nullptr, false);
                if (doc.is_discarded()) {
                    errors.fetch_add(1);
                    return;
                }
                tasks.fetch_add(static_cast<long>(doc.value("tasks", nlohmann::json::array()).size()));
                const nlohmann::json next = doc.value("next", nlohmann::json());
                if (!next.is_number_integer() || next.get<std::int64_t>() <= after) {
                    return;
                }
                after = next.get<std::int64_t>();
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    fmt::print("mode=timeline clients={} errors={} wall_s={:.3f} pages={} tasks={} bytes={}\n",
               o.clients, errors.load(),
               std::chrono::duration<double>(Clock::now() - start).count(), pages.load(),
               tasks.load(), bytes.load());
    return errors.load() > 0 ? 1 : 0;
}

// One value of GET /metrics (the first line that starts with the name).
int print_metric(const Options& o) {
    carma::api::ApiClient client(o.socket);
    auto text = client.metrics();
    if (!text) {
        std::fprintf(stderr, "submit_load: %s\n", text.error().message.c_str());
        return 1;
    }
    std::size_t pos = 0;
    while (pos < text->size()) {
        const std::size_t end = std::min(text->find('\n', pos), text->size());
        const std::string line = text->substr(pos, end - pos);
        if (line.rfind(o.name + " ", 0) == 0) {
            fmt::print("{}\n", line.substr(o.name.size() + 1));
            return 0;
        }
        pos = end + 1;
    }
    std::fprintf(stderr, "submit_load: no metric %s\n", o.name.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.mode == "submit" || o.mode == "healthz" || o.mode == "probe" || o.mode == "get") {
        return run_load(o);
    }
    if (o.mode == "timeline") {
        return read_timelines(o);
    }
    if (o.mode == "metric") {
        return print_metric(o);
    }
    if (o.mode == "wait-window") {
        return wait_window(o);
    }
    if (o.mode == "wait-running") {
        return wait_running(o);
    }
    if (o.mode == "status" || o.mode == "list") {
        carma::api::ApiClient client(o.socket);
        auto r = o.mode == "status" ? client.status() : client.list_tasks(false);
        if (!r) {
            std::fprintf(stderr, "submit_load: %s\n", r.error().message.c_str());
            return 1;
        }
        if (o.mode == "status") {
            fmt::print("{}\n", r->dump());
        } else {
            fmt::print("tasks={} bytes={}\n", (*r)["tasks"].size(), r->dump().size());
        }
        return 0;
    }
    usage("unknown mode " + o.mode);
}

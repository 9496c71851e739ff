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
    const std::string body =
        nlohmann::json{{"command", o.command}, {"workdir", "/tmp"}, {"gpus", o.gpus}}.dump();
    const nlohmann::json body_json = nlohmann::json::parse(body);

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
        "p99_ms={:.3f} max_ms={:.3f}\n",
        o.mode, o.clients, o.requests, errors.load(), wall, static_cast<double>(o.requests) / wall,
        percentile(all, 0.50), percentile(all, 0.99), all.empty() ? 0.0 : all.back());
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

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.mode == "submit" || o.mode == "healthz" || o.mode == "probe") {
        return run_load(o);
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

#pragma once
// Fluent builders for test fixtures: MakeTask().Gpus(2).Profiled(13236), MakeGpu(0).Free(20000).

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "core/metric_window.h"
#include "core/policy.h"
#include "core/task.h"

namespace carma::testing {

// A simple device model for the tests: every task on a GPU runs at 1 / max(1, summed activity).
inline void simple_model(std::span<const double> activities, std::span<double> speeds) {
    double total = 0;
    for (double a : activities) {
        total += a;
    }
    for (std::size_t i = 0; i < activities.size(); ++i) {
        speeds[i] = 1.0 / std::max(1.0, total);
    }
}

class MakeTask {
public:
    explicit MakeTask(std::string name = "task") { spec_.name = std::move(name); }
    MakeTask& Gpus(int n) {
        spec_.gpus = n;
        return *this;
    }
    MakeTask& Profiled(MiB mib) {
        spec_.memory.profiled_mib = mib;
        return *this;
    }
    MakeTask& Declared(MiB mib) {
        spec_.memory.declared_mib = mib;
        return *this;
    }
    MakeTask& Horus(MiB mib) {
        spec_.memory.horus_mib = mib;
        return *this;
    }
    MakeTask& FakeTensor(MiB mib) {
        spec_.memory.faketensor_mib = mib;
        return *this;
    }
    MakeTask& GpuMemNet(MiB mib) {
        spec_.memory.gpumemnet_mib = mib;
        return *this;
    }
    MakeTask& Model(double params, double acts, int batch) {
        spec_.memory.model = ModelDescriptor{params, acts, batch};
        return *this;
    }
    // What core/knowledge derived (the `carma` policy reads only this).
    MakeTask& Knows(std::optional<MiB> need, std::optional<double> duration_s,
                    double activity = 0.6, MiB margin = 2048) {
        spec_.learned.need_mib = need;
        spec_.learned.margin_mib = margin;
        spec_.learned.duration_s = duration_s;
        spec_.learned.activity = activity;
        spec_.learned.runs = need ? 1 : 0;
        return *this;
    }
    // Fair share and what it may share with (issue 23).
    MakeTask& User(std::string user) {
        spec_.user = std::move(user);
        return *this;
    }
    MakeTask& Exclusive() {
        spec_.exclusive = true;
        return *this;
    }
    MakeTask& MaxSlowdown(double x) {
        spec_.max_slowdown = x;
        return *this;
    }
    // Cores and host memory (core/host.h).
    MakeTask& Host(int cpus, MiB mem_mib) {
        spec_.cpus = cpus;
        spec_.host_mem_mib = mem_mib;
        return *this;
    }
    MakeTask& Nice(int n) {
        spec_.nice = n;
        return *this;
    }
    TaskSpec Obj() const { return spec_; }
    operator TaskSpec() const { return spec_; }

private:
    TaskSpec spec_;
};

// A GPU whose window statistics are constant (every sample identical), so mean = median = p95
// = EMA = risk. Every metric is known and emulated (real) unless a test says otherwise.
class MakeGpu {
public:
    explicit MakeGpu(int index, MiB total = 40441) {
        view_.index = index;
        view_.total_mib = total;
        view_.stats.sources = MetricSources::all(MetricSource::Emulated);
        for (SeriesStats* s : {&view_.stats.smact, &view_.stats.smocc, &view_.stats.drama,
                               &view_.stats.util, &view_.stats.power_w}) {
            s->known = 30;
        }
        Free(total);
    }
    // Where SMACT, SMOCC, DRAMA and utilisation come from, e.g. MetricSource::Nvml (proxies).
    MakeGpu& Sources(MetricSource smact, MetricSource smocc, MetricSource drama) {
        view_.stats.sources.smact = smact;
        view_.stats.sources.smocc = smocc;
        view_.stats.sources.drama = drama;
        for (auto [series, source] : {std::pair{&view_.stats.smact, smact},
                                      std::pair{&view_.stats.smocc, smocc},
                                      std::pair{&view_.stats.drama, drama}}) {
            if (source == MetricSource::Unavailable) {
                *series = SeriesStats{};
            }
        }
        return *this;
    }
    MakeGpu& Util(double v) {
        Set(view_.stats.util, v);
        return *this;
    }
    MakeGpu& Unschedulable(std::string reason) {
        view_.schedulable = false;
        view_.unschedulable_reason = std::move(reason);
        return *this;
    }
    MakeGpu& Free(MiB free) {
        view_.stats.last_free_mib = free;
        view_.stats.available_mib = std::max<MiB>(0, free - kFreeMemoryReserveMiB);
        view_.stats.samples = 30;
        return *this;
    }
    MakeGpu& Busy() {
        view_.has_processes = true;
        return *this;
    }
    // A task placed here, as the `carma` policy sees it; the measured free memory drops by its
    // need (or to nothing when unknown) and the GPU is busy.
    MakeGpu& Resident(TaskId task, std::optional<MiB> need, std::optional<double> end,
                      double activity = 0.6) {
        view_.residents.push_back(ResidentView{task, activity, need, end});
        view_.has_processes = true;
        Free(view_.stats.last_free_mib - need.value_or(view_.stats.last_free_mib));
        return *this;
    }
    // The last resident asked for its GPU alone, or for a slowdown bound.
    MakeGpu& ResidentExclusive() {
        view_.residents.back().exclusive = true;
        return *this;
    }
    MakeGpu& ResidentMaxSlowdown(double x) {
        view_.residents.back().max_slowdown = x;
        return *this;
    }
    MakeGpu& ResidentShare(int milli) {
        view_.residents.back().gpu_milli = milli;
        return *this;
    }
    MakeGpu& Smact(double v) {
        Set(view_.stats.smact, v);
        return *this;
    }
    MakeGpu& Smocc(double v) {
        Set(view_.stats.smocc, v);
        return *this;
    }
    MakeGpu& Drama(double v) {
        Set(view_.stats.drama, v);
        return *this;
    }
    GpuView Obj() const { return view_; }
    operator GpuView() const { return view_; }

private:
    static void Set(SeriesStats& s, double v) {
        s.mean = s.median = s.p95 = s.ema = s.risk = v;
        s.known = 30;
    }
    GpuView view_;
};

}  // namespace carma::testing

#include "device/emulated.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "device/emulator_file.h"

namespace carma::device {

namespace {

// Reads the GPUs' state from the emulator file; the device model does the rest (emulator_file.h).
class EmulatedBackend final : public GpuBackend {
  public:
    explicit EmulatedBackend(std::unique_ptr<emu::EmulatorFile> file) : file_(std::move(file)) {
        const model::GpuType& type = file_->gpu_type();
        for (int i = 0; i < file_->gpu_count(); ++i) {
            GpuInfo info;
            info.index = i;
            info.uuid = emulated_gpu_uuid(i);
            info.name = type.name + " (emulated)";
            info.total_mib = type.usable_mib;
            info.node_index = i;
            info.emulated = true;
            gpus_.push_back(std::move(info));
        }
        name_ = fmt::format("emulated:{}x{}", file_->gpu_count(), type.name);
    }

    std::string name() const override { return name_; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }

    // Taking the lock frees dead jobs' memory and integrates energy up to now.
    Result<std::vector<GpuSample>> sample() override {
        auto locked = file_->lock(emu::Reap::Now);
        if (!locked) {
            return tl::unexpected(locked.error());
        }
        const emu::State& s = locked->state();
        std::vector<GpuSample> out;
        out.reserve(gpus_.size());
        for (const GpuInfo& gpu : gpus_) {
            out.push_back(sample_gpu(s, gpu.index));
        }
        return out;
    }

    std::vector<std::pair<std::string, std::string>> task_environment() const override {
        return {{kEmulatorFileEnv, file_->path()}};
    }

    std::vector<TaskFile> task_files() const override {
        return {TaskFile{file_->path(), kEmulatorFdEnv}};
    }

  private:
    static GpuSample sample_gpu(const emu::State& s, int g) {
        GpuSample out;
        out.index = g;
        out.used_mib = emu::used_mib(s, g);
        out.free_mib = std::max<MiB>(0, s.header.usable_mib - out.used_mib);
        const model::GpuActivity activity = emu::gpu_activity(s, g);
        out.util = activity.util;
        out.smact = activity.smact;
        out.smocc = activity.smocc;
        out.drama = activity.drama;
        out.power_w = s.gpus[g].power_w;
        out.energy_j = s.gpus[g].energy_j;
        out.sources = MetricSources::all(MetricSource::Emulated);
        out.processes = processes_on(s, g);
        return out;
    }

    // Like the driver: a process with memory on the GPU, once, however many handles it holds.
    // Its activity is what it adds to the GPU's SMACT: its solo SM activity times its current
    // speed among its co-runners (emu::gpu_activity sums exactly these terms), and 0 while it is
    // starting up. Not the solo smact alone, which would give a slowed-down job the share of one
    // running at full speed, nor its utilisation, which is the slowdown model's demand rather
    // than what the SMs did; so the shares of a GPU's jobs add up to its measured SMACT (below
    // the GPU's cap of 1).
    static std::vector<GpuProcess> processes_on(const emu::State& s, int g) {
        std::map<int, GpuProcess> by_pid;
        for (const emu::Slot& slot : s.slots) {
            if (emu::on_gpu(slot, g) && slot.memory_mib > 0 && slot.hidden == 0) {
                GpuProcess& p = by_pid[slot.pid];
                p.pid = slot.pid;
                p.used_mib += slot.memory_mib;
                const double active =
                    slot.phase == emu::Phase::Active ? slot.smact * slot.speed : 0.0;
                p.activity = std::min(1.0, p.activity.value_or(0.0) + active);
            }
        }
        std::vector<GpuProcess> out;
        for (auto& [pid, process] : by_pid) {
            out.push_back(std::move(process));
        }
        return out;
    }

    std::unique_ptr<emu::EmulatorFile> file_;
    std::vector<GpuInfo> gpus_;
    std::string name_;
};

}  // namespace

std::string emulated_gpu_uuid(int index) {
    return fmt::format("GPU-emu00000-0000-4000-8000-{:012d}", index);
}

Result<std::unique_ptr<GpuBackend>> open_emulated(const EmulatorOptions& options) {
    // Jobs start in other working directories: they must get a path that works from anywhere.
    EmulatorOptions absolute = options;
    if (!absolute.file.empty()) {
        std::error_code ec;
        const auto path = std::filesystem::absolute(options.file, ec);
        if (!ec) {
            absolute.file = path.lexically_normal().string();
        }
    }
    auto file = emu::EmulatorFile::open_for_backend(absolute);
    if (!file) {
        return tl::unexpected(file.error());
    }
    return std::unique_ptr<GpuBackend>(std::make_unique<EmulatedBackend>(std::move(*file)));
}

}  // namespace carma::device

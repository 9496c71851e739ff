#include "cuda_job.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "core/units.h"
#include "cuda_driver.h"
#include "device/emulated_job.h"
#include "job_common.h"
#include "model/constants.h"
#include "torch_oom.h"

namespace carma::fakejob {

namespace {

namespace cu = cuda;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // out of memory, or the driver failed while running
constexpr int kExitSetup = 2;   // no usable GPU
// One busy kernel's solo run time: short enough for a fine-grained duty cycle and a prompt
// reaction to signals, long enough that launch overhead does not count.
constexpr double kKernelTargetS = 0.01;
constexpr unsigned kFirstLoops = 1024;
constexpr unsigned kMaxLoops = 1U << 30;  // bounds a kernel whose time cannot be measured
constexpr unsigned kThreadsPerBlock = 256;
constexpr unsigned kBlocksPerSm = 4;  // enough resident warps to keep every SM issuing
constexpr MiB kMinStepMiB = 64;       // fewer, larger cuMemAlloc calls along the ramp
constexpr double kMinDutyCycle = 0.05;
constexpr std::size_t kJitLogBytes = 4096;

constexpr const char* kKernelName = "carma_busy";

// The PTX headers to try, in order. The driver JIT-compiles PTX for the GPU it finds, and PTX
// for sm_50 (ISA 6.0, CUDA 10.0) loads on any driver from then on. Should a driver ever refuse
// targets that old (CUDA 13 dropped them from offline compilation), sm_75 with ISA 7.8 (CUDA
// 11.8) is the oldest target CUDA 13 still builds for.
struct PtxTarget {
    const char* isa;
    const char* target;
};
constexpr PtxTarget kPtxTargets[] = {{"6.0", "sm_50"}, {"7.8", "sm_75"}};

// What the driver answers when it cannot compile or load the PTX for this GPU: worth another
// target. (CUDA_ERROR_INVALID_IMAGE, _NO_BINARY_FOR_GPU, _INVALID_PTX, _UNSUPPORTED_PTX_VERSION)
bool is_jit_refusal(cu::CUresult rc) {
    return rc == 200 || rc == 209 || rc == 218 || rc == 222;
}

// carma_busy(float* out, unsigned loops): every thread runs `loops` dependent FMAs starting from
// its own index and stores the result, so the loop cannot be optimised away. Laid out as LLVM's
// NVPTX back end emits the same loop; the header comes from kPtxTargets.
constexpr const char kBusyKernel[] = R"(
.visible .entry carma_busy(
    .param .u64 carma_busy_out,
    .param .u32 carma_busy_loops
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [carma_busy_out];
    ld.param.u32 %r1, [carma_busy_loops];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    cvt.rn.f32.u32 %f1, %r5;
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra DONE;
    mov.u32 %r6, 0;
LOOP:
    fma.rn.f32 %f1, %f1, 0f3F7FFFEF, 0f3A83126F;
    add.s32 %r6, %r6, 1;
    setp.lt.u32 %p2, %r6, %r1;
    @%p2 bra LOOP;
DONE:
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.f32 [%rd4], %f1;
    ret;
}
)";

MiB bytes_to_mib(std::size_t bytes) {
    return static_cast<MiB>(bytes >> 20);
}

std::string busy_ptx(const PtxTarget& t) {
    return fmt::format(".version {}\n.target {}\n.address_size 64\n{}", t.isa, t.target,
                       kBusyKernel);
}

std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    while (!text.empty() && text.back() == ' ') {
        text.pop_back();
    }
    return text;
}

// One visible GPU and what the job holds on it.
struct Gpu {
    int ordinal = 0;  // CUDA ordinal: position among the visible devices
    cu::CUdevice device = 0;
    std::string name;
    cu::CUcontext context = nullptr;  // the primary context, retained while the job is active
    cu::CUfunction kernel = nullptr;
    cu::CUdeviceptr scratch = 0;  // where the kernel's threads store their results
    unsigned blocks = 0;
    std::vector<cu::CUdeviceptr> buffers;  // the ramp's allocations
    MiB allocated_mib = 0;                 // their sum
};

enum class Start { Ok, OutOfMemory };

// The job's hold on the visible GPUs. Frees everything and releases the contexts when destroyed
// (the driver would at exit too; this keeps a stopped job's exit quick and tidy).
class CudaJob {
  public:
    static Result<std::unique_ptr<CudaJob>> open() {
        auto driver = cu::Driver::open();
        if (!driver) {
            return tl::unexpected(driver.error());
        }
        std::unique_ptr<CudaJob> job(new CudaJob(std::move(*driver)));
        if (auto ok = job->find_gpus(); !ok) {
            return tl::unexpected(ok.error());
        }
        return job;
    }

    CudaJob(const CudaJob&) = delete;
    CudaJob& operator=(const CudaJob&) = delete;

    ~CudaJob() {
        const cu::Api& a = api();
        for (Gpu& g : gpus_) {
            if (g.context == nullptr) {
                continue;
            }
            a.ctx_set_current(g.context);
            for (cu::CUdeviceptr p : g.buffers) {
                a.mem_free(p);
            }
            if (g.scratch != 0) {
                a.mem_free(g.scratch);
            }
            a.ctx_set_current(nullptr);
            if (a.primary_ctx_release != nullptr) {
                a.primary_ctx_release(g.device);
            }
        }
    }

    const std::vector<Gpu>& gpus() const { return gpus_; }
    MiB allocated_mib() const { return gpus_.empty() ? 0 : gpus_.front().allocated_mib; }

    // The first GPU activity: a context, the kernel and its scratch buffer on every GPU.
    Result<Start> activate() {
        for (Gpu& g : gpus_) {
            auto started = activate(g);
            if (!started || *started != Start::Ok) {
                return started;
            }
        }
        return Start::Ok;
    }

    // Grows the allocation on every GPU to `mib` besides the context (of `context_mib`). A
    // refusal (ok == false) carries the numbers PyTorch reports; errors are other failures.
    Result<device::Allocation> grow_to(MiB mib, MiB context_mib) {
        const cu::Api& a = api();
        for (Gpu& g : gpus_) {
            if (mib <= g.allocated_mib) {
                continue;
            }
            if (auto ok = check(g, "cuCtxSetCurrent", a.ctx_set_current(g.context)); !ok) {
                return tl::unexpected(ok.error());
            }
            const MiB step = mib - g.allocated_mib;
            cu::CUdeviceptr p = 0;
            const cu::CUresult rc = a.mem_alloc(&p, static_cast<std::size_t>(step) << 20);
            if (rc == cu::kErrorOutOfMemory) {
                std::size_t free = 0;
                std::size_t total = 0;
                if (auto ok = check(g, "cuMemGetInfo_v2", a.mem_get_info(&free, &total)); !ok) {
                    return tl::unexpected(ok.error());
                }
                return device::Allocation{.ok = false,
                                          .device = g.ordinal,
                                          .requested_mib = step,
                                          .total_mib = bytes_to_mib(total),
                                          .free_mib = bytes_to_mib(free),
                                          .held_mib = g.allocated_mib + context_mib};
            }
            if (auto ok = check(g, "cuMemAlloc_v2", rc); !ok) {
                return tl::unexpected(ok.error());
            }
            g.buffers.push_back(p);
            g.allocated_mib = mib;
        }
        return device::Allocation{};
    }

    // One busy kernel on every GPU at once; the wall seconds until all have finished.
    Result<double> run_kernels(unsigned loops) {
        const cu::Api& a = api();
        const double start = now_s();
        for (Gpu& g : gpus_) {
            void* params[] = {&g.scratch, &loops};
            if (auto ok = check(g, "cuCtxSetCurrent", a.ctx_set_current(g.context)); !ok) {
                return tl::unexpected(ok.error());
            }
            const cu::CUresult rc = a.launch_kernel(g.kernel, g.blocks, 1, 1, kThreadsPerBlock, 1,
                                                    1, 0, nullptr, params, nullptr);
            if (auto ok = check(g, "cuLaunchKernel", rc); !ok) {
                return tl::unexpected(ok.error());
            }
        }
        for (Gpu& g : gpus_) {
            if (auto ok = check(g, "cuCtxSetCurrent", a.ctx_set_current(g.context)); !ok) {
                return tl::unexpected(ok.error());
            }
            if (auto ok = check(g, "cuCtxSynchronize", a.ctx_synchronize()); !ok) {
                return tl::unexpected(ok.error());
            }
        }
        return now_s() - start;
    }

  private:
    explicit CudaJob(cu::Driver driver) : driver_(std::move(driver)) {}

    const cu::Api& api() const { return driver_.api(); }

    Result<void> check(const Gpu& g, const char* call, cu::CUresult rc) const {
        if (rc == cu::kSuccess) {
            return {};
        }
        return fail(ErrorCode::Io, fmt::format("CUDA GPU {} ({}): {}", g.ordinal, g.name,
                                               driver_.describe(call, rc)));
    }

    Result<void> find_gpus() {
        const cu::Api& a = api();
        int count = 0;
        if (const cu::CUresult rc = a.device_get_count(&count); rc != cu::kSuccess) {
            return fail(ErrorCode::Io, driver_.describe("cuDeviceGetCount", rc));
        }
        if (count <= 0) {
            const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
            return fail(ErrorCode::NotFound,
                        fmt::format("the driver shows no device (CUDA_VISIBLE_DEVICES='{}')",
                                    visible != nullptr ? visible : "unset"));
        }
        for (int i = 0; i < count; ++i) {
            Gpu g;
            g.ordinal = i;
            if (const cu::CUresult rc = a.device_get(&g.device, i); rc != cu::kSuccess) {
                return fail(ErrorCode::Io, fmt::format("CUDA GPU {}: {}", i,
                                                       driver_.describe("cuDeviceGet", rc)));
            }
            char name[256] = {};
            if (a.device_get_name(name, sizeof name - 1, g.device) == cu::kSuccess) {
                g.name = name;
            }
            gpus_.push_back(std::move(g));
        }
        return {};
    }

    Result<Start> activate(Gpu& g) {
        const cu::Api& a = api();
        const cu::CUresult retained = a.primary_ctx_retain(&g.context, g.device);
        if (retained == cu::kErrorOutOfMemory) {
            g.context = nullptr;
            return Start::OutOfMemory;
        }
        if (auto ok = check(g, "cuDevicePrimaryCtxRetain", retained); !ok) {
            g.context = nullptr;
            return tl::unexpected(ok.error());
        }
        if (auto ok = check(g, "cuCtxSetCurrent", a.ctx_set_current(g.context)); !ok) {
            return tl::unexpected(ok.error());
        }
        cu::CUmodule module = nullptr;
        std::vector<std::string> refusals;
        for (const PtxTarget& target : kPtxTargets) {
            std::vector<char> log(kJitLogBytes, '\0');
            cu::CUjit_option options[] = {cu::kJitErrorLogBuffer,
                                          cu::kJitErrorLogBufferSizeBytes};
            // The size travels in the pointer-sized slot itself, as the driver API specifies.
            void* values[] = {log.data(),
                              reinterpret_cast<void*>(std::uintptr_t{kJitLogBytes - 1})};
            const std::string ptx = busy_ptx(target);
            const cu::CUresult rc =
                a.module_load_data_ex(&module, ptx.c_str(), 2, options, values);
            if (rc == cu::kSuccess) {
                break;
            }
            if (rc == cu::kErrorOutOfMemory) {
                return Start::OutOfMemory;
            }
            module = nullptr;
            const std::string jit = one_line(log.data());
            refusals.push_back(fmt::format("{}: {}{}", target.target,
                                           driver_.describe("cuModuleLoadDataEx", rc),
                                           jit.empty() ? "" : ": " + jit));
            if (!is_jit_refusal(rc)) {
                break;
            }
        }
        if (module == nullptr) {
            return fail(ErrorCode::Io, fmt::format("CUDA GPU {} ({}): the busy kernel's PTX did "
                                                   "not load: {}",
                                                   g.ordinal, g.name, fmt::join(refusals, "; ")));
        }
        if (auto ok = check(g, "cuModuleGetFunction",
                            a.module_get_function(&g.kernel, module, kKernelName));
            !ok) {
            return tl::unexpected(ok.error());
        }
        int sms = 0;
        if (auto ok = check(g, "cuDeviceGetAttribute",
                            a.device_get_attribute(&sms, cu::kAttributeMultiprocessorCount,
                                                   g.device));
            !ok) {
            return tl::unexpected(ok.error());
        }
        g.blocks = static_cast<unsigned>(std::max(sms, 1)) * kBlocksPerSm;
        const std::size_t scratch_bytes = std::size_t{g.blocks} * kThreadsPerBlock * sizeof(float);
        const cu::CUresult scratch = a.mem_alloc(&g.scratch, scratch_bytes);
        if (scratch == cu::kErrorOutOfMemory) {
            g.scratch = 0;
            return Start::OutOfMemory;
        }
        if (auto ok = check(g, "cuMemAlloc_v2", scratch); !ok) {
            g.scratch = 0;
            return tl::unexpected(ok.error());
        }
        return Start::Ok;
    }

    cu::Driver driver_;  // first member: unloaded last
    std::vector<Gpu> gpus_;
};

// The kernel's loop count for about kKernelTargetS alone on the GPU, and that solo time: the
// reference the job's speed is measured against. Co-runners already there slow it too; the job
// then reads its speed relative to the sharing it started into.
struct Calibration {
    unsigned loops = 1;
    double solo_s = 0;
};

Result<Calibration> calibrate(CudaJob& job) {
    // The first launch pays for loading the kernel: not timed.
    if (auto warm = job.run_kernels(1); !warm) {
        return tl::unexpected(warm.error());
    }
    unsigned loops = kFirstLoops;
    double took = 0;
    for (;;) {
        auto t = job.run_kernels(loops);
        if (!t) {
            return tl::unexpected(t.error());
        }
        took = *t;
        if (took >= kKernelTargetS / 8 || loops > kMaxLoops / 8) {
            break;
        }
        loops *= 8;
    }
    const double scaled = static_cast<double>(loops) * kKernelTargetS / std::max(took, 1e-9);
    Calibration c;
    c.loops = static_cast<unsigned>(std::clamp(scaled, 1.0, static_cast<double>(kMaxLoops)));
    auto t = job.run_kernels(c.loops);
    if (!t) {
        return tl::unexpected(t.error());
    }
    c.solo_s = *t;
    return c;
}

int fail_run(const Error& e) {
    fmt::print(stderr, "carma-fakejob: {}\n", e.message);
    return kExitFailed;
}

// What PyTorch prints when even its CUDA context does not fit.
void print_context_oom() {
    fmt::print(stderr,
               "Traceback (most recent call last):\n"
               "  File \"train.py\", line 1, in <module>\n"
               "RuntimeError: CUDA error: out of memory\n");
}

void print_start(const model::WorkloadProfile& p, double time_scale, double duty,
                 const CudaJob& job) {
    std::vector<std::string> names;
    for (const Gpu& g : job.gpus()) {
        names.push_back(g.name.empty() ? "unnamed" : g.name);
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    fmt::print(
        "carma-fakejob: {} on CUDA GPU(s) {} ({}): t_solo {:.1f} s, start-up {:.1f} s, peak {}, "
        "time scale {}, duty cycle {:.0f}%\n",
        p.name, visible != nullptr && *visible != '\0' ? visible : "all",
        fmt::join(names, ", "), p.t_solo_s, p.t_start_s, format_mib(p.m_peak_mib), time_scale,
        100 * duty);
    std::fflush(stdout);
}

// The GPU-active phase: memory ramp, busy kernels and progress until the work is done.
int run_active(CudaJob& job, const model::WorkloadProfile& p, double k, double duty,
               const JobControl& control, double active_at, const Calibration& cal) {
    const double work_s = std::max(0.0, p.t_solo_s - p.t_start_s);
    const MiB context = std::min(model::kContextMiB, p.m_peak_mib);
    const MiB peak_alloc = std::max<MiB>(0, p.m_peak_mib - context);
    double last = now_s();
    double last_report = active_at;
    double done_s = 0;
    double speed = 1;
    for (;;) {
        const double now = now_s();
        done_s += speed * (now - last) * k;  // the speed measured since the last tick
        last = now;
        // The context holds its own memory on a real GPU: allocate the rest of the ramp.
        const MiB want = std::max<MiB>(0, ramp_memory(p, (now - active_at) * k) - context);
        const MiB have = job.allocated_mib();
        if (want > have && (want - have >= kMinStepMiB || want == peak_alloc)) {
            auto a = job.grow_to(want, context);
            if (!a) {
                return fail_run(a.error());
            }
            if (!a->ok) {
                print_torch_oom(*a);
                return kExitFailed;
            }
        }
        const double fraction = work_s > 0 ? std::min(1.0, done_s / work_s) : 1.0;
        if (report_progress(fraction, speed, now, last_report)) {
            return kExitOk;
        }
        auto busy = job.run_kernels(cal.loops);
        if (!busy) {
            return fail_run(busy.error());
        }
        speed = std::min(1.0, cal.solo_s / std::max(*busy, 1e-9));
        // Idle long enough that the kernel's share of the wall time is the duty cycle, but not
        // past the end of the work.
        const double idle = *busy * (1 - duty) / duty;
        const double left_wall = (work_s - done_s) / std::max(speed * k, 1e-9);
        if (!control.sleep_for(std::max(0.0, std::min(idle, left_wall)))) {
            return control.stopped_exit_code();
        }
    }
}

}  // namespace

int run_cuda_job(const model::WorkloadProfile& profile, double time_scale,
                 const JobControl& control) {
    auto opened = CudaJob::open();
    if (!opened) {
        fmt::print(stderr, "carma-fakejob: --cuda needs an NVIDIA GPU: {}\n",
                   one_line(opened.error().message));
        return kExitSetup;
    }
    CudaJob& job = **opened;
    const double duty = std::clamp(profile.util, kMinDutyCycle, 1.0);
    print_start(profile, time_scale, duty, job);
    // CPU-side start-up: data loading, model construction; nothing on the GPU yet.
    if (!control.sleep_for(profile.t_start_s / time_scale)) {
        return control.stopped_exit_code();
    }
    const double active_at = now_s();
    auto started = job.activate();
    if (!started) {
        fmt::print(stderr, "carma-fakejob: cannot start on the GPU: {}\n",
                   one_line(started.error().message));
        return kExitSetup;
    }
    if (*started == Start::OutOfMemory) {
        print_context_oom();
        return kExitFailed;
    }
    auto calibration = calibrate(job);
    if (!calibration) {
        return fail_run(calibration.error());
    }
    return run_active(job, profile, time_scale, duty, control, active_at, *calibration);
}

}  // namespace carma::fakejob

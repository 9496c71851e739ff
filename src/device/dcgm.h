#pragma once
// Real NVIDIA GPUs through DCGM, loaded at run time with dlopen (no NVIDIA header or library is
// needed to build). DCGM gives what NVML cannot: the profiling counters SM active (SMACT), SM
// occupancy (SMOCC) and DRAM active (DRAMA), measured rather than approximated.
//
// The backend composes the NVML one: NVML lists the GPUs (index, UUID, name, total memory, MIG)
// and their processes, which DCGM can only give through job statistics; DCGM's fields, watched at
// 1 Hz, are laid over each GPU's sample, matched by UUID. A GPU DCGM does not report keeps NVML's
// sample. Where the profiling fields cannot be watched (not a data-centre GPU, another profiler
// holds the counters, no privilege) the other fields still come from DCGM and SMACT/SMOCC/DRAMA
// are unavailable; the reason is reported once through DcgmOptions::on_note.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "device/gpu_backend.h"

namespace carma::device {

// Names the DCGM library to load instead of libdcgm.so.4 / libdcgm.so.3 (tests point it at a fake).
inline constexpr const char* kDcgmLibraryEnv = "CARMA_DCGM_LIBRARY";

struct DcgmOptions {
    // Empty: DCGM runs inside this process (embedded host engine). Otherwise the address of a
    // running nv-hostengine: "host", "host:port" (default port 5555), or a Unix socket given as
    // an absolute path or "unix:PATH".
    std::string host;
    // Empty: CARMA_DCGM_LIBRARY if set, else libdcgm.so.4, then libdcgm.so.3.
    std::string library;
    // Told, once each, what the backend cannot do on this machine (profiling fields unavailable
    // and why; GPUs DCGM does not report). One line each, meant for a warning log.
    std::function<void(std::string_view)> on_note;
};

Result<std::unique_ptr<GpuBackend>> open_dcgm(const DcgmOptions& options);

}  // namespace carma::device

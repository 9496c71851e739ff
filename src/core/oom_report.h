#pragma once
// What a framework's out-of-memory error says the crashed process held. Pure.
//
// A run that dies of out-of-memory within a second or two is often never sampled holding its
// memory (on an H200 under MPS, one was seen at 14 MiB; its error said 4.03 GiB), yet the
// framework's own message names the figure. Forms read (PyTorch's CUDA caching allocator):
//   2.1 and later: "... GPU 0 has a total capacity of 79.15 GiB of which 2.56 MiB is free. ...
//                   Including non-PyTorch memory, this process has 39.00 GiB memory in use. ..."
//                  (releases before 2.2 spell it "capacty")
//   before 2.1:    "... (GPU 0; 6.00 GiB total capacity; 781.59 MiB already allocated; 3.03 GiB
//                   free; 1.24 GiB reserved in total by PyTorch)" (what PyTorch had reserved:
//                   the process held at least that)
// Sizes are PyTorch's format_size: "N bytes", "N.NN KiB", "N.NN MiB", "N.NN GiB".

#include <map>
#include <span>
#include <string_view>

#include "core/units.h"

namespace carma {

// The CUDA ordinal a message names none for (no "GPU N" beside its figure).
inline constexpr int kUnknownOrdinal = -1;

// The most each CUDA ordinal (position in the process's CUDA_VISIBLE_DEVICES) was reported held,
// in MiB rounded up; empty when no message gives a figure.
std::map<int, MiB> reported_oom_usage(std::string_view stderr_tail);

// An attempt's per-GPU peaks as sampled (GPU index -> MiB), raised where `reported` (CUDA
// ordinal -> MiB) says more. `gpus`: the attempt's GPU indices in CUDA ordinal order (the order
// of the CUDA_VISIBLE_DEVICES it ran with). A figure of unknown ordinal counts only for an
// attempt on one GPU; an ordinal beyond `gpus` counts nowhere.
std::map<int, MiB> raise_by_reported(std::map<int, MiB> peak_per_gpu, std::span<const int> gpus,
                                     const std::map<int, MiB>& reported);

}  // namespace carma

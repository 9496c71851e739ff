#include "torch_oom.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "model/constants.h"

namespace carma::fakejob {

std::string torch_size(MiB mib) {
    const double bytes = static_cast<double>(mib) * 1024.0 * 1024.0;
    if (bytes <= 1024.0) {
        return fmt::format("{:.0f} bytes", bytes);
    }
    if (bytes <= 1048576.0) {
        return fmt::format("{:.2f} KiB", bytes / 1024.0);
    }
    if (bytes <= 1073741824.0) {
        return fmt::format("{:.2f} MiB", bytes / 1048576.0);
    }
    return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

// PyTorch 2.x wording.
void print_torch_oom(const device::Allocation& a) {
    const MiB tensors = std::max<MiB>(0, a.held_mib - model::kContextMiB);
    fmt::print(stderr,
               "Traceback (most recent call last):\n"
               "  File \"train.py\", line 1, in <module>\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {}. GPU {} has a "
               "total capacity of {} of which {} is free. Including non-PyTorch memory, this "
               "process has {} memory in use. Of the allocated memory {} is allocated by "
               "PyTorch, and {} is reserved by PyTorch but unallocated. If reserved but "
               "unallocated memory is large try setting "
               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
               "documentation for Memory Management  "
               "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n",
               torch_size(a.requested_mib), a.device, torch_size(a.total_mib),
               torch_size(a.free_mib), torch_size(a.held_mib), torch_size(tensors), torch_size(0));
}

}  // namespace carma::fakejob

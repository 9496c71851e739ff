#pragma once
// PyTorch's out-of-memory error as an uncaught torch.OutOfMemoryError leaves it on stderr: the
// text CARMA's exit classification recognises, shared by the emulated and the CUDA fake job.

#include <string>

#include "core/units.h"
#include "device/emulated_job.h"

namespace carma::fakejob {

// PyTorch's c10::CachingAllocator format_size: bytes, KiB, MiB or GiB with two decimals.
std::string torch_size(MiB mib);

// Prints the traceback and error for the refused allocation `a` (a.ok == false).
void print_torch_oom(const device::Allocation& a);

}  // namespace carma::fakejob

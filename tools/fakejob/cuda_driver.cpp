#include "cuda_driver.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

namespace carma::fakejob::cuda {

namespace {

// Where container runtimes mount the driver when the loader's cache does not list it; tried
// only after the plain name, and never when the path is given explicitly.
constexpr const char* kMountedDriver = "/usr/local/nvidia/lib64/libcuda.so.1";

std::vector<std::string> library_candidates() {
    const char* env = std::getenv(kCudaLibraryEnv);
    if (env != nullptr && *env != '\0') {
        return {env};
    }
    return {kCudaLibraryName, kMountedDriver};
}

}  // namespace

Result<Driver> Driver::open() {
    auto library = device::SharedLibrary::open(library_candidates());
    if (!library) {
        return tl::unexpected(library.error());
    }
    Driver d(std::move(*library));
    device::SymbolTable s(d.library_);
    Api& a = d.api_;
    s.require("cuInit", a.init);
    s.require("cuDeviceGetCount", a.device_get_count);
    s.require("cuDeviceGet", a.device_get);
    s.require("cuDeviceGetName", a.device_get_name);
    s.require("cuDeviceGetAttribute", a.device_get_attribute);
    s.require("cuDevicePrimaryCtxRetain", a.primary_ctx_retain);
    // Drivers before CUDA 11 have only the unversioned release.
    a.primary_ctx_release = s.find_first<decltype(a.primary_ctx_release)>(
        {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
    s.require("cuCtxSetCurrent", a.ctx_set_current);
    s.require("cuCtxSynchronize", a.ctx_synchronize);
    s.require("cuMemAlloc_v2", a.mem_alloc);
    s.require("cuMemFree_v2", a.mem_free);
    s.require("cuMemGetInfo_v2", a.mem_get_info);
    s.require("cuModuleLoadDataEx", a.module_load_data_ex);
    s.require("cuModuleGetFunction", a.module_get_function);
    s.require("cuLaunchKernel", a.launch_kernel);
    s.require("cuGetErrorString", a.get_error_string);
    if (!s.missing().empty()) {
        return fail(ErrorCode::Io, fmt::format("{} lacks {} (not a CUDA driver, or one too old)",
                                               d.path(), fmt::join(s.missing(), ", ")));
    }
    if (const CUresult rc = a.init(0); rc != kSuccess) {
        return fail(ErrorCode::Io, d.describe("cuInit", rc));
    }
    return d;
}

std::string Driver::describe(const char* call, CUresult rc) const {
    const char* text = nullptr;
    if (api_.get_error_string == nullptr || api_.get_error_string(rc, &text) != kSuccess ||
        text == nullptr) {
        text = "unknown error";
    }
    return fmt::format("{}: {} (CUDA error {})", call, text, rc);
}

}  // namespace carma::fakejob::cuda

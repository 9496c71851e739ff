#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

namespace carma::fakejob::cuda {

namespace {

// Where container runtimes mount the driver when the loader's cache does not list it; tried
// only after the plain name, and never when the path is given explicitly.
constexpr const char* kMountedDriver = "/usr/local/nvidia/lib64/libcuda.so.1";

// The library and its dlerror() text when it cannot be loaded.
struct Loaded {
    void* handle = nullptr;
    std::string path;
    std::string error;
};

Loaded load_library() {
    const char* env = std::getenv(kCudaLibraryEnv);
    const bool given = env != nullptr && *env != '\0';
    std::vector<std::string> paths = {given ? env : kCudaLibraryName};
    if (!given) {
        paths.emplace_back(kMountedDriver);
    }
    Loaded first;
    for (const std::string& path : paths) {
        // RTLD_LOCAL: the driver's symbols stay out of anything loaded later.
        void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle != nullptr) {
            return {handle, path, ""};
        }
        if (first.path.empty()) {
            const char* why = ::dlerror();
            first.path = path;
            first.error = why != nullptr ? why : "cannot load it";
            if (first.error.find(path) == std::string::npos) {  // dlerror usually names it
                first.error = fmt::format("{}: {}", path, first.error);
            }
        }
    }
    return first;
}

// Looks entry points up and remembers the required ones that are missing.
class Symbols {
  public:
    explicit Symbols(void* handle) : handle_(handle) {}

    template <typename Fn>
    void find(const char* name, Fn& slot) {
        // POSIX guarantees a data pointer from dlsym can hold a function's address.
        slot = reinterpret_cast<Fn>(::dlsym(handle_, name));
    }
    template <typename Fn>
    void require(const char* name, Fn& slot) {
        find(name, slot);
        if (slot == nullptr) {
            missing_.emplace_back(name);
        }
    }
    const std::vector<std::string>& missing() const { return missing_; }

  private:
    void* handle_;
    std::vector<std::string> missing_;
};

}  // namespace

void Driver::Close::operator()(void* handle) const {
    ::dlclose(handle);
}

Result<Driver> Driver::open() {
    Loaded loaded = load_library();
    if (loaded.handle == nullptr) {
        return fail(ErrorCode::Io, loaded.error);
    }
    Driver d;
    d.handle_.reset(loaded.handle);
    d.path_ = loaded.path;
    Symbols s(loaded.handle);
    Api& a = d.api_;
    s.require("cuInit", a.init);
    s.require("cuDeviceGetCount", a.device_get_count);
    s.require("cuDeviceGet", a.device_get);
    s.require("cuDeviceGetName", a.device_get_name);
    s.require("cuDeviceGetAttribute", a.device_get_attribute);
    s.require("cuDevicePrimaryCtxRetain", a.primary_ctx_retain);
    s.find("cuDevicePrimaryCtxRelease_v2", a.primary_ctx_release);
    if (a.primary_ctx_release == nullptr) {
        s.find("cuDevicePrimaryCtxRelease", a.primary_ctx_release);  // drivers before CUDA 11
    }
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
                                               d.path_, fmt::join(s.missing(), ", ")));
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

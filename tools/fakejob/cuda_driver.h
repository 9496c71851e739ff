#pragma once
// The few entry points of NVIDIA's CUDA driver API that `carma-fakejob --cuda` uses, loaded at
// run time with dlopen: building needs nothing from NVIDIA, and a machine without the driver
// gets a one-line reason instead of a loader error. Types and values are those of cuda.h (the
// driver API's ABI); nothing else of it is declared.

#include <cstddef>
#include <string>
#include <utility>

#include "core/result.h"
#include "device/dl_library.h"

namespace carma::fakejob::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2, what the _v2 memory calls take
using CUjit_option = int;
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUmod_st;
using CUmodule = CUmod_st*;
struct CUfunc_st;
using CUfunction = CUfunc_st*;
struct CUstream_st;
using CUstream = CUstream_st*;

// The _v2 memory entry points take 64-bit device addresses and size_t byte counts.
static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr_v2 is 64 bits");
static_assert(sizeof(std::size_t) == 8, "the _v2 memory calls take 64-bit sizes");

inline constexpr CUresult kSuccess = 0;             // CUDA_SUCCESS
inline constexpr CUresult kErrorOutOfMemory = 2;    // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr CUresult kErrorNoDevice = 100;     // CUDA_ERROR_NO_DEVICE
inline constexpr CUjit_option kJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
inline constexpr CUjit_option kJitErrorLogBufferSizeBytes = 6;  // ..._SIZE_BYTES
inline constexpr int kAttributeMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

// Where the driver comes from: this variable's path, else libcuda.so.1 as the loader finds it.
inline constexpr const char* kCudaLibraryEnv = "CARMA_CUDA_LIBRARY";
inline constexpr const char* kCudaLibraryName = "libcuda.so.1";

struct Api {
    CUresult (*init)(unsigned int flags) = nullptr;
    CUresult (*device_get_count)(int* count) = nullptr;
    CUresult (*device_get)(CUdevice* device, int ordinal) = nullptr;
    CUresult (*device_get_name)(char* name, int length, CUdevice device) = nullptr;
    CUresult (*device_get_attribute)(int* value, int attribute, CUdevice device) = nullptr;
    CUresult (*primary_ctx_retain)(CUcontext* context, CUdevice device) = nullptr;
    CUresult (*primary_ctx_release)(CUdevice device) = nullptr;  // optional
    CUresult (*ctx_set_current)(CUcontext context) = nullptr;
    CUresult (*ctx_synchronize)() = nullptr;
    CUresult (*mem_alloc)(CUdeviceptr* pointer, std::size_t bytes) = nullptr;
    CUresult (*mem_free)(CUdeviceptr pointer) = nullptr;
    CUresult (*mem_get_info)(std::size_t* free, std::size_t* total) = nullptr;
    CUresult (*module_load_data_ex)(CUmodule* module, const void* image, unsigned int count,
                                    CUjit_option* options, void** values) = nullptr;
    CUresult (*module_get_function)(CUfunction* function, CUmodule module,
                                    const char* name) = nullptr;
    CUresult (*launch_kernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                              unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                              unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                              void** params, void** extra) = nullptr;
    CUresult (*get_error_string)(CUresult error, const char** text) = nullptr;
};

// The loaded, initialised driver. Move-only; unloads when destroyed.
class Driver {
  public:
    // Loads the library, resolves the entry points and calls cuInit(0). The error says why
    // not, naming the library (missing, not a CUDA driver) or the failed call.
    static Result<Driver> open();

    const Api& api() const { return api_; }
    const std::string& path() const { return library_.path(); }
    // "cuMemAlloc_v2: out of memory (CUDA error 2)"
    std::string describe(const char* call, CUresult rc) const;

  private:
    explicit Driver(device::SharedLibrary library) : library_(std::move(library)) {}

    device::SharedLibrary library_;
    Api api_;
};

}  // namespace carma::fakejob::cuda

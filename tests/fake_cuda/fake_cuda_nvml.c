/* The NVML view of fake_cuda.c's GPUs, for tests that run a daemon on them: the entry points
 * CARMA's NVML backend requires, answering from the memory every process holds through
 * FAKE_CUDA_SHARED_FILE (fake_gpu_state.h). A GPU with a holder is 90 % busy (30 % memory
 * busy, 300 W); an empty one is idle (60 W). Names and counts follow the same knobs as the
 * CUDA side (FAKE_CUDA_DEVICES, FAKE_CUDA_MEMORY_MIB).
 */

#define _GNU_SOURCE  // dladdr

#include "../fake_nvml/nvml_types.h"
#include "fake_gpu_state.h"

typedef struct FakeNvmlGpu {
    int index;
} FakeNvmlGpu;
typedef FakeNvmlGpu* nvmlDevice_t;

static FakeNvmlGpu gpus[MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static int valid(nvmlDevice_t d) {
    return d != NULL && d->index >= 0 && d->index < device_count();
}

static unsigned long long used_on(int device) {
    int shared = 0;
    return shared_used(device, &shared);
}

nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char* nvmlErrorString(nvmlReturn_t result) {
    return result == NVML_SUCCESS ? "Success" : "Invalid Argument";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
    *count = (unsigned int)device_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
    if ((int)index >= device_count()) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
    if (!valid(d)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    snprintf(uuid, length, "GPU-fcda0000-0000-4000-8000-%012d", d->index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
    if (!valid(d)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    snprintf(name, length, "Fake GPU %d", d->index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* memory) {
    if (!valid(d)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    const unsigned long long used = used_on(d->index);
    memory->total = total_bytes();
    memory->used = used;
    memory->free = used < memory->total ? memory->total - used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
    if (!valid(d)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    const int busy = used_on(d->index) > 0;
    u->gpu = busy ? 90 : 0;
    u->memory = busy ? 30 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* milliwatts) {
    if (!valid(d)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *milliwatts = used_on(d->index) > 0 ? 300000 : 60000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
    if (!valid(d) || count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    Holder holders[MAX_HOLDERS];
    const int n = shared_holders(d->index, holders, MAX_HOLDERS);
    if (*count < (unsigned int)n) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < n; ++i) {
        infos[i].pid = (unsigned int)holders[i].pid;
        infos[i].usedGpuMemory = holders[i].bytes;
        infos[i].gpuInstanceId = 0xFFFFFFFFU;
        infos[i].computeInstanceId = 0xFFFFFFFFU;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

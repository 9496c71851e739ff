/* A fake NVML for the tests: the entry points CARMA's NVML backend loads, with two GPUs.
 *
 *   GPU 0  "NVIDIA A100-SXM4-40GB", 40 GiB, 10 GiB used, 50 % busy, 25 % memory busy, 150 W,
 *          one process (pid 4242) holding the 10 GiB.
 *   GPU 1  "NVIDIA A100-SXM4-80GB", 80 GiB, idle: nothing used, 0 %, 60 W, no process.
 *
 * The energy counters start at an arbitrary large value (as a driver's do) and advance by a
 * tenth of a second of the GPU's power at every read, so they move whether or not time passes.
 *
 * Knobs, read at every call so a test can change them after opening:
 *   FAKE_NVML_FAIL_INIT=1       nvmlInit_v2 fails with "Driver Not Loaded".
 *   FAKE_NVML_GPU0_USED_MIB=N   GPU 0's used memory, shared evenly by its processes.
 *   FAKE_NVML_GPU0_PROCS=N      GPU 0's process count (pids 4242, 4243, ...), to make callers
 *                               go through the INSUFFICIENT_SIZE protocol.
 *   FAKE_NVML_NO_ENERGY=1       the energy counter answers NOT_SUPPORTED (pre-Volta GPUs).
 *   FAKE_NVML_LOST_GPU=i        GPU i's memory, utilisation, power and process reads answer
 *                               "GPU is lost".
 *
 * Built with FAKE_NVML_OLD_DRIVER defined it plays a driver from before _v3 process queries and
 * energy counters: those two entry points are not exported at all.
 */

#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15
};

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define MIB (1024ULL * 1024ULL)
#define GPU_COUNT 2U
#define MAX_PROCESSES 4096U
#define FIRST_PID 4242U

typedef struct FakeGpu {
    const char* uuid;
    const char* name;
    unsigned long long total_mib;
    unsigned long long used_mib;
    unsigned int util_percent;
    unsigned int memory_util_percent;
    unsigned int power_mw;
    unsigned int processes;
    unsigned long long energy_mj;
} FakeGpu;

typedef FakeGpu* nvmlDevice_t;

static FakeGpu gpus[GPU_COUNT] = {
    {"GPU-fa4e0000-0000-4000-8000-000000000000", "NVIDIA A100-SXM4-40GB", 40 * 1024, 10 * 1024,
     50, 25, 150000, 1, 987654321ULL},
    {"GPU-fa4e0000-0000-4000-8000-000000000001", "NVIDIA A100-SXM4-80GB", 80 * 1024, 0, 0, 0,
     60000, 0, 123456789ULL},
};

static int init_count = 0;

/* --- knobs ---------------------------------------------------------------------------------- */

static long env_long(const char* name, long fallback) {
    const char* text = getenv(name);
    char* end = NULL;
    long value = 0;
    if (text == NULL || *text == '\0') {
        return fallback;
    }
    value = strtol(text, &end, 10);
    return *end == '\0' ? value : fallback;
}

static unsigned long long used_mib(const FakeGpu* gpu) {
    long used = 0;
    if (gpu != &gpus[0]) {
        return gpu->used_mib;
    }
    used = env_long("FAKE_NVML_GPU0_USED_MIB", (long)gpu->used_mib);
    if (used < 0 || (unsigned long long)used > gpu->total_mib) {
        return gpu->used_mib;
    }
    return (unsigned long long)used;
}

static unsigned int process_count(const FakeGpu* gpu) {
    long count = 0;
    if (gpu != &gpus[0]) {
        return gpu->processes;
    }
    count = env_long("FAKE_NVML_GPU0_PROCS", (long)gpu->processes);
    if (count < 0 || count > (long)MAX_PROCESSES) {
        return gpu->processes;
    }
    return (unsigned int)count;
}

/* --- checks every device call makes --------------------------------------------------------- */

static int is_device(nvmlDevice_t device) {
    return device == &gpus[0] || device == &gpus[1];
}

static nvmlReturn_t check_device(nvmlDevice_t device) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return is_device(device) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Like check_device, for the reads a lost GPU can no longer answer. */
static nvmlReturn_t check_readable(nvmlDevice_t device) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    return env_long("FAKE_NVML_LOST_GPU", -1) == (long)(device - gpus) ? NVML_ERROR_GPU_IS_LOST
                                                                       : NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char* value, char* out, unsigned int length) {
    size_t needed = strlen(value) + 1;
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (length < needed) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, value, needed);
    return NVML_SUCCESS;
}

/* --- the entry points ----------------------------------------------------------------------- */

nvmlReturn_t nvmlInit_v2(void) {
    if (env_long("FAKE_NVML_FAIL_INIT", 0) == 1) {
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    ++init_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    --init_count;
    return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = GPU_COUNT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (index >= GPU_COUNT || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
    nvmlReturn_t rc = check_device(device);
    return rc != NVML_SUCCESS ? rc : copy_string(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
    nvmlReturn_t rc = check_device(device);
    return rc != NVML_SUCCESS ? rc : copy_string(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
    nvmlReturn_t rc = check_readable(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    memory->total = device->total_mib * MIB;
    memory->used = used_mib(device) * MIB;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* rates) {
    nvmlReturn_t rc = check_readable(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (rates == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    rates->gpu = device->util_percent;
    rates->memory = device->memory_util_percent;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
    nvmlReturn_t rc = check_readable(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (power_mw == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *power_mw = device->power_mw;
    return NVML_SUCCESS;
}

/* The protocol NVML documents: with *count too small (callers may ask with 0 and no buffer) the
 * call answers INSUFFICIENT_SIZE and sets *count to what is needed; otherwise it fills the buffer
 * and sets *count to the entries written. */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int* count,
                                      nvmlProcessInfo_t* infos) {
    nvmlReturn_t rc = check_readable(device);
    unsigned int n = 0;
    unsigned int i = 0;
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    n = process_count(device);
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n > 0 && infos == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (i = 0; i < n; ++i) {
        infos[i].pid = FIRST_PID + i;
        infos[i].usedGpuMemory = used_mib(device) * MIB / n;
        infos[i].gpuInstanceId = 0xFFFFFFFFU; /* not a MIG instance */
        infos[i].computeInstanceId = 0xFFFFFFFFU;
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
    return running_processes(device, count, infos);
}

#ifndef FAKE_NVML_OLD_DRIVER

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
    return running_processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                 unsigned long long* energy_mj) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (energy_mj == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (env_long("FAKE_NVML_NO_ENERGY", 0) == 1) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    device->energy_mj += device->power_mw / 10U; /* a tenth of a second at the current power */
    *energy_mj = device->energy_mj;
    return NVML_SUCCESS;
}

#endif

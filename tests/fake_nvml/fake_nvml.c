/* A fake NVML for the tests: the entry points CARMA's NVML backend loads, with two GPUs.
 *
 *   GPU 0  "NVIDIA A100-SXM4-40GB", 40 GiB, 10 GiB used, 50 % busy, 25 % memory busy, 150 W,
 *          one process (pid 4242) holding the 10 GiB.
 *   GPU 1  "NVIDIA A100-SXM4-80GB", 80 GiB, idle: nothing used, 0 %, 60 W, no process.
 *
 * The energy counters start at an arbitrary large value (as a driver's do) and advance by a
 * tenth of a second of the GPU's power at every read, so they move whether or not time passes.
 *
 * Knobs, read at every call so a test can change them after opening (i is 0 or 1):
 *   FAKE_NVML_FAIL_INIT=1       nvmlInit_v2 fails with "Driver Not Loaded";
 *                               =rm-mismatch: with NVML_ERROR_LIB_RM_VERSION_MISMATCH, as after
 *                               a driver update until the reboot (the kernel module is older
 *                               than the library).
 *   FAKE_NVML_GPUi_HANDLE=lost  nvmlDeviceGetHandleByIndex_v2(i) answers NVML_ERROR_GPU_IS_LOST
 *                               (the GPU fell off the bus), =no-permission: NO_PERMISSION; the
 *                               count still includes the GPU, as on a real driver.
 *   FAKE_NVML_GPUi_UUID=lost    GPU i's handle is given but nvmlDeviceGetUUID answers
 *                               NVML_ERROR_GPU_IS_LOST.
 *   FAKE_NVML_GPU0_USED_MIB=N   GPU 0's used memory, shared evenly by its processes.
 *   FAKE_NVML_GPU0_PROCS=N      GPU 0's process count (pids 4242, 4243, ...), to make callers
 *                               go through the INSUFFICIENT_SIZE protocol.
 *   FAKE_NVML_NO_ENERGY=1       the energy counter answers NOT_SUPPORTED (pre-Volta GPUs).
 *   FAKE_NVML_LOST_GPU=i        GPU i's memory, utilisation, power and process reads answer
 *                               "GPU is lost".
 *   FAKE_NVML_GPUi_FAIL=1       an error storm: every call about GPU i (identity, memory,
 *                               utilisation, power, energy, processes, MIG mode, GPM) answers
 *                               NVML_ERROR_UNKNOWN.
 *   FAKE_NVML_GPUi_NO_UTIL=1    GPU i's utilisation answers NOT_SUPPORTED.
 *   FAKE_NVML_GPUi_COMPUTE_PROCS=pid:mib,...   GPU i's compute processes, instead of the above
 *                               (under MPS that list holds the MPS server).
 *   FAKE_NVML_GPUi_MPS_PROCS=pid:mib,...       GPU i's MPS client processes (default none).
 *   FAKE_NVML_GPUi_MIG=1        MIG mode is on (and, as on a real driver, utilisation then
 *                               answers NOT_SUPPORTED); =unsupported: the MIG mode query answers
 *                               NOT_SUPPORTED. Default: MIG off.
 *   FAKE_NVML_GPM=1             the GPUs have GPM, as Hopper and later do; FAKE_NVML_GPUi_GPM=0
 *                               or 1 decides for GPU i alone.
 *   FAKE_NVML_GPUi_SM_UTIL, FAKE_NVML_GPUi_SM_OCCUPANCY, FAKE_NVML_GPUi_DRAM_BW_UTIL
 *                               the GPM metrics, in percent (default GPU 0: 40, 20, 30; GPU 1:
 *                               0); "fail" makes that metric answer NOT_SUPPORTED.
 *   FAKE_NVML_GPUi_GPM_FAIL=1   GPU i's GPM samples cannot be taken (NVML_ERROR_UNKNOWN), the
 *                               rest of the GPU reads as usual.
 *   FAKE_NVML_GPUi_PROC_UTIL=pid:sm,...  GPU i's per-process utilisation samples
 *                               (nvmlDeviceGetProcessUtilization), smUtil in percent; a pid may
 *                               repeat (one sample per driver period). Absent: no process was
 *                               busy (NOT_FOUND); "unsupported": NOT_SUPPORTED. Every call stamps
 *                               its samples later than any before; fakeNvmlLastSeenTimeStamp(i)
 *                               (not NVML) says what the last call about GPU i asked to be newer
 *                               than.
 *
 * GPM here checks what a caller must get right: the structure versions, samples allocated and
 * taken on the same GPU, sample1 taken before sample2. fakeNvmlLiveGpmSamples() (not NVML) says
 * how many GPM samples are allocated and not freed.
 *
 * Built with FAKE_NVML_OLD_DRIVER defined it plays a driver from before _v3 process queries,
 * energy counters, MIG and GPM: those entry points are not exported at all (the _v2 process
 * queries, compute and MPS, are).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_types.h"

#define MIB (1024ULL * 1024ULL)
#define GPU_COUNT 2U
#define MAX_PROCESSES 4096U
#define FIRST_PID 4242U
#define NO_INSTANCE 0xFFFFFFFFU /* not a MIG instance */

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
    double gpm_percent[3]; /* SM_UTIL, SM_OCCUPANCY, DRAM_BW_UTIL */
} FakeGpu;

typedef FakeGpu* nvmlDevice_t;

static FakeGpu gpus[GPU_COUNT] = {
    {"GPU-fa4e0000-0000-4000-8000-000000000000", "NVIDIA A100-SXM4-40GB", 40 * 1024, 10 * 1024,
     50, 25, 150000, 1, 987654321ULL, {40.0, 20.0, 30.0}},
    {"GPU-fa4e0000-0000-4000-8000-000000000001", "NVIDIA A100-SXM4-80GB", 80 * 1024, 0, 0, 0,
     60000, 0, 123456789ULL, {0.0, 0.0, 0.0}},
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

static unsigned int gpu_index(const FakeGpu* gpu) {
    return (unsigned int)(gpu - gpus);
}

/* The value of FAKE_NVML_GPU<i>_<suffix>, or NULL. */
static const char* gpu_env(const FakeGpu* gpu, const char* suffix) {
    char name[64];
    const char* value = NULL;
    snprintf(name, sizeof name, "FAKE_NVML_GPU%u_%s", gpu_index(gpu), suffix);
    value = getenv(name);
    return value != NULL && *value != '\0' ? value : NULL;
}

static int gpu_flag(const FakeGpu* gpu, const char* suffix) {
    const char* value = gpu_env(gpu, suffix);
    return value != NULL && strcmp(value, "1") == 0;
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

static int mig_enabled(const FakeGpu* gpu) {
    return gpu_flag(gpu, "MIG");
}

/* Parses "pid:mib,pid:mib,..." into out (when not NULL, at most max entries); returns how many
 * entries the text has. Parsing stops at the first malformed entry. */
static unsigned int parse_processes(const char* text, nvmlProcessInfo_t* out, unsigned int max) {
    unsigned int n = 0;
    while (text != NULL && *text != '\0' && n < MAX_PROCESSES) {
        char* end = NULL;
        unsigned long pid = strtoul(text, &end, 10);
        unsigned long long mib = 0;
        if (end == text || *end != ':') {
            break;
        }
        text = end + 1;
        mib = strtoull(text, &end, 10);
        if (end == text || (*end != ',' && *end != '\0')) {
            break;
        }
        if (out != NULL && n < max) {
            out[n].pid = (unsigned int)pid;
            out[n].usedGpuMemory = mib * MIB;
            out[n].gpuInstanceId = NO_INSTANCE;
            out[n].computeInstanceId = NO_INSTANCE;
        }
        ++n;
        text = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* --- checks every device call makes --------------------------------------------------------- */

static int is_device(nvmlDevice_t device) {
    return device == &gpus[0] || device == &gpus[1];
}

static nvmlReturn_t check_device(nvmlDevice_t device) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!is_device(device)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return gpu_flag(device, "FAIL") ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

/* Like check_device, for the reads a lost GPU can no longer answer. */
static nvmlReturn_t check_readable(nvmlDevice_t device) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    return env_long("FAKE_NVML_LOST_GPU", -1) == (long)gpu_index(device) ? NVML_ERROR_GPU_IS_LOST
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
    const char* fail = getenv("FAKE_NVML_FAIL_INIT");
    if (fail != NULL && strcmp(fail, "rm-mismatch") == 0) {
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    }
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
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
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
    const char* handle = NULL;
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (index >= GPU_COUNT || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    handle = gpu_env(&gpus[index], "HANDLE");
    if (handle != NULL && strcmp(handle, "lost") == 0) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    if (handle != NULL && strcmp(handle, "no-permission") == 0) {
        return NVML_ERROR_NO_PERMISSION;
    }
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
    nvmlReturn_t rc = check_device(device);
    const char* knob = rc == NVML_SUCCESS ? gpu_env(device, "UUID") : NULL;
    if (knob != NULL && strcmp(knob, "lost") == 0) {
        return NVML_ERROR_GPU_IS_LOST;
    }
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
    if (gpu_flag(device, "NO_UTIL") || mig_enabled(device)) {
        return NVML_ERROR_NOT_SUPPORTED;
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
 * and sets *count to the entries written. `list` is a "pid:mib,..." knob's value; without one,
 * `fallback` processes share the GPU's used memory. */
static nvmlReturn_t list_processes(nvmlDevice_t device, unsigned int* count,
                                   nvmlProcessInfo_t* infos, const char* list,
                                   unsigned int fallback) {
    nvmlReturn_t rc = check_readable(device);
    unsigned int n = 0;
    unsigned int i = 0;
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    n = list != NULL ? parse_processes(list, NULL, 0) : fallback;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n > 0 && infos == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (list != NULL) {
        parse_processes(list, infos, n);
    } else {
        for (i = 0; i < n; ++i) {
            infos[i].pid = FIRST_PID + i;
            infos[i].usedGpuMemory = used_mib(device) * MIB / n;
            infos[i].gpuInstanceId = NO_INSTANCE;
            infos[i].computeInstanceId = NO_INSTANCE;
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t compute_processes(nvmlDevice_t device, unsigned int* count,
                                      nvmlProcessInfo_t* infos) {
    const char* list = is_device(device) ? gpu_env(device, "COMPUTE_PROCS") : NULL;
    return list_processes(device, count, infos, list,
                          is_device(device) ? process_count(device) : 0);
}

static nvmlReturn_t mps_processes(nvmlDevice_t device, unsigned int* count,
                                  nvmlProcessInfo_t* infos) {
    const char* list = is_device(device) ? gpu_env(device, "MPS_PROCS") : NULL;
    return list_processes(device, count, infos, list, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
    return compute_processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) {
    return mps_processes(device, count, infos);
}

/* fakeNvmlLiveGpmSamples is exported by both builds, so tests can always look it up. */
static int live_gpm_samples = 0;

int fakeNvmlLiveGpmSamples(void) {
    return live_gpm_samples;
}

#ifndef FAKE_NVML_OLD_DRIVER

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
    return compute_processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) {
    return mps_processes(device, count, infos);
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

/* --- per-process utilisation ---------------------------------------------------------------- */

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

static unsigned long long util_clock = 1000000ULL; /* microseconds, only ever forward */
static unsigned long long last_seen_asked[GPU_COUNT] = {0, 0};

unsigned long long fakeNvmlLastSeenTimeStamp(unsigned int gpu) {
    return gpu < GPU_COUNT ? last_seen_asked[gpu] : 0;
}

/* Parses "pid:sm,pid:sm,..." into out (when not NULL); returns how many entries the text has. */
static unsigned int parse_util(const char* text, nvmlProcessUtilizationSample_t* out,
                               unsigned long long stamp) {
    unsigned int n = 0;
    while (text != NULL && *text != '\0' && n < MAX_PROCESSES) {
        char* end = NULL;
        unsigned long pid = strtoul(text, &end, 10);
        unsigned long sm = 0;
        if (end == text || *end != ':') {
            break;
        }
        text = end + 1;
        sm = strtoul(text, &end, 10);
        if (end == text || (*end != ',' && *end != '\0')) {
            break;
        }
        if (out != NULL) {
            memset(&out[n], 0, sizeof out[n]);
            out[n].pid = (unsigned int)pid;
            out[n].timeStamp = stamp;
            out[n].smUtil = (unsigned int)sm;
        }
        ++n;
        text = *end == ',' ? end + 1 : end;
    }
    return n;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* count,
                                             unsigned long long last_seen_time_stamp) {
    nvmlReturn_t rc = check_readable(device);
    const char* list = NULL;
    unsigned int n = 0;
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    last_seen_asked[gpu_index(device)] = last_seen_time_stamp;
    list = gpu_env(device, "PROC_UTIL");
    if (list != NULL && strcmp(list, "unsupported") == 0) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    n = list != NULL ? parse_util(list, NULL, 0) : 0;
    if (n == 0) {
        return NVML_ERROR_NOT_FOUND;
    }
    if (utilization == NULL || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    util_clock += 100000ULL;
    parse_util(list, utilization, util_clock);
    *count = n;
    return NVML_SUCCESS;
}

/* --- MIG ------------------------------------------------------------------------------------ */

enum { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

/* The minor number of /dev/nvidiaN: the GPU's index here, as on most servers. */
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (minor == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *minor = gpu_index(device);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
    nvmlReturn_t rc = check_device(device);
    const char* mode = NULL;
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (current == NULL || pending == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    mode = gpu_env(device, "MIG");
    if (mode != NULL && strcmp(mode, "unsupported") == 0) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *current = mig_enabled(device) ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pending = *current;
    return NVML_SUCCESS;
}

/* --- GPM ------------------------------------------------------------------------------------ */

#define GPM_SUPPORT_VERSION 1U     /* NVML_GPM_SUPPORT_VERSION */
#define GPM_METRICS_GET_VERSION 1U /* NVML_GPM_METRICS_GET_VERSION */
#define GPM_METRIC_MAX 98U         /* NVML_GPM_METRIC_MAX of the R525 header */
#define GPM_SAMPLE_MAGIC 0x47504d53U

enum { GPM_SM_UTIL = 2, GPM_SM_OCCUPANCY = 3, GPM_DRAM_BW_UTIL = 10 };

typedef struct FakeGpmSample {
    unsigned int magic;
    FakeGpu* gpu;            /* NULL until taken */
    unsigned long long seq;  /* when it was taken, in samples */
} FakeGpmSample;

typedef FakeGpmSample* nvmlGpmSample_t;

typedef struct {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char* shortName;
        char* longName;
        char* unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

static unsigned long long gpm_seq = 0;

static int gpm_enabled(const FakeGpu* gpu) {
    const char* own = gpu_env(gpu, "GPM");
    if (own != NULL) {
        return strcmp(own, "1") == 0;
    }
    return env_long("FAKE_NVML_GPM", 0) == 1;
}

static int is_gpm_sample(const FakeGpmSample* sample) {
    return sample != NULL && sample->magic == GPM_SAMPLE_MAGIC;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
    nvmlReturn_t rc = check_device(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (support == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (support->version != GPM_SUPPORT_VERSION) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    support->isSupportedDevice = gpm_enabled(device) ? 1U : 0U;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
    FakeGpmSample* fresh = NULL;
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (sample == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    fresh = calloc(1, sizeof *fresh);
    if (fresh == NULL) {
        return NVML_ERROR_UNKNOWN;
    }
    fresh->magic = GPM_SAMPLE_MAGIC;
    ++live_gpm_samples;
    *sample = fresh;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (!is_gpm_sample(sample)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    sample->magic = 0;
    free(sample);
    --live_gpm_samples;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
    nvmlReturn_t rc = check_readable(device);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (!is_gpm_sample(sample)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!gpm_enabled(device)) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (gpu_flag(device, "GPM_FAIL")) {
        return NVML_ERROR_UNKNOWN;
    }
    sample->gpu = device;
    sample->seq = ++gpm_seq;
    return NVML_SUCCESS;
}

/* The metrics the fake measures: their ids, knobs and places in FakeGpu.gpm_percent. */
static const struct {
    unsigned int id;
    const char* knob;
} gpm_metrics[3] = {{GPM_SM_UTIL, "SM_UTIL"}, {GPM_SM_OCCUPANCY, "SM_OCCUPANCY"},
                    {GPM_DRAM_BW_UTIL, "DRAM_BW_UTIL"}};

/* One metric of a GPU over the period: its knob, else its default. */
static void gpm_metric(const FakeGpu* gpu, nvmlGpmMetric_t* metric) {
    const char* knob = NULL;
    char* end = NULL;
    double value = 0;
    int slot = 0;
    while (slot < 3 && gpm_metrics[slot].id != metric->metricId) {
        ++slot;
    }
    if (slot == 3) {
        metric->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
    metric->metricInfo.shortName = (char*)gpm_metrics[slot].knob;
    metric->metricInfo.longName = (char*)gpm_metrics[slot].knob;
    metric->metricInfo.unit = (char*)"%";
    value = gpu->gpm_percent[slot];
    knob = gpu_env(gpu, gpm_metrics[slot].knob);
    if (knob != NULL && strcmp(knob, "fail") == 0) {
        metric->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
    if (knob != NULL) {
        value = strtod(knob, &end);
        if (*end != '\0') {
            value = gpu->gpm_percent[slot];
        }
    }
    metric->nvmlReturn = NVML_SUCCESS;
    metric->value = value;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* request) {
    unsigned int i = 0;
    nvmlReturn_t rc = NVML_SUCCESS;
    if (init_count == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (request == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (request->version != GPM_METRICS_GET_VERSION) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    if (request->numMetrics == 0 || request->numMetrics > GPM_METRIC_MAX ||
        !is_gpm_sample(request->sample1) || !is_gpm_sample(request->sample2) ||
        request->sample1->gpu == NULL || request->sample1->gpu != request->sample2->gpu ||
        request->sample1->seq >= request->sample2->seq) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    rc = check_readable(request->sample2->gpu);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    for (i = 0; i < request->numMetrics; ++i) {
        gpm_metric(request->sample2->gpu, &request->metrics[i]);
    }
    return NVML_SUCCESS;
}

#endif

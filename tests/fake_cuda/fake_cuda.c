/* A fake CUDA driver (libcuda) for the tests of carma-fakejob --cuda: the entry points it loads,
 * with GPUs that have memory and run kernels but do nothing.
 *
 * Every call the job makes that matters is appended to a log, one line each, so a test can see
 * what happened on the "GPU":
 *   init | ctx DEV | release DEV | module ok|bad | alloc DEV BYTES ok|oom | free DEV BYTES
 *   | launch DEV GRID BLOCK LOOPS
 *
 * Knobs (fake_gpu_state.h says where they are read from):
 *   FAKE_CUDA_LOG=PATH           where the log goes (none if unset).
 *   FAKE_CUDA_FAIL_INIT=1        cuInit fails with CUDA_ERROR_NO_DEVICE.
 *   FAKE_CUDA_DEVICES=N          how many GPUs (default 1). CUDA_VISIBLE_DEVICES picks and orders
 *                                them as the driver does: indices, or the UUIDs of the NVML view.
 *   FAKE_CUDA_MEMORY_MIB=N       each GPU's memory (default 81920); a context takes 500 MiB.
 *   FAKE_CUDA_SHARED_FILE=PATH   GPU memory is shared by every process using this file, so one
 *                                process's allocations leave less for the others (and
 *                                fake_cuda_nvml.c shows them).
 *   FAKE_CUDA_NS_PER_LOOP=N      a kernel's run time per loop iteration (default 1 ns).
 *   FAKE_CUDA_BAD_PTX=1          the JIT refuses the PTX, with a line in the error log.
 *   FAKE_CUDA_MIN_TARGET=NN      the JIT refuses PTX for targets below sm_NN (as a driver that
 *                                dropped old GPUs might).
 *
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1G,1=512MB": CUDA device ordinals as this process sees
 * them through CUDA_VISIBLE_DEVICES, units K/M/G with an optional B) is honoured as NVIDIA's MPS
 * documents it for a client: each process's allocations on that device beyond the limit fail
 * with CUDA_ERROR_OUT_OF_MEMORY, whatever its co-runners hold.
 *
 * The PTX handed to the JIT must define the entry the job then asks for and name an sm_ target;
 * the log then says "module ok sm_NN".
 */

#define _GNU_SOURCE  // dladdr

#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include "fake_gpu_state.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef int CUjit_option;
typedef struct FakeContext* CUcontext;
typedef struct FakeModule* CUmodule;
typedef struct FakeFunction* CUfunction;
typedef void* CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_NOT_FOUND = 500
};

enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };
enum { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16 };

#define MAX_BUFFERS 65536
#define CONTEXT_MIB 500ULL
#define FAKE_SMS 4

struct FakeContext {
    int device;
    int retained;
};
struct FakeModule {
    int device;
    char entry[64];
};
struct FakeFunction {
    int device;
};

typedef struct {
    CUdeviceptr pointer;
    unsigned long long bytes;
    int device;
} Buffer;

static struct FakeContext contexts[MAX_DEVICES];
static struct FakeModule modules[MAX_DEVICES];
static struct FakeFunction functions[MAX_DEVICES];
static unsigned long long used_bytes[MAX_DEVICES];
static Buffer buffers[MAX_BUFFERS];
static CUdeviceptr next_pointer = 0x7f0000000000ULL;
static CUcontext current = NULL;

static void log_line(const char* format, ...) {
    char buffer[4096];
    const char* path = knob_text("FAKE_CUDA_LOG", buffer, sizeof buffer);
    if (path == NULL) {
        return;
    }
    char line[256];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(line, sizeof line - 1, format, args);
    va_end(args);
    if (n < 0) {
        return;
    }
    if (n > (int)sizeof line - 2) {
        n = (int)sizeof line - 2;
    }
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        ssize_t ignored = write(fd, line, (size_t)n);
        (void)ignored;
        close(fd);
    }
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (knob("FAKE_CUDA_FAIL_INIT", 0) != 0) {
        return CUDA_ERROR_NO_DEVICE;
    }
    log_line("init");
    return CUDA_SUCCESS;
}

/* The GPUs CUDA_VISIBLE_DEVICES shows, in its order, as indices; like the driver, the list
 * ends at the first entry that names no GPU. */
static int visible_devices(int out[MAX_DEVICES]) {
    const char* v = getenv("CUDA_VISIBLE_DEVICES");
    const int n = device_count();
    if (v == NULL) {
        for (int i = 0; i < n; ++i) {
            out[i] = i;
        }
        return n;
    }
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", v);
    int count = 0;
    char* rest = NULL;
    for (char* entry = strtok_r(copy, ",", &rest); entry != NULL && count < MAX_DEVICES;
         entry = strtok_r(NULL, ",", &rest)) {
        long index = -1;
        if (strncmp(entry, "GPU-", 4) == 0) {
            index = strtol(strrchr(entry, '-') + 1, NULL, 10);  // the UUID's last group
        } else {
            char* end = NULL;
            index = strtol(entry, &end, 10);
            index = end != entry && *end == '\0' ? index : -1;
        }
        if (index < 0 || index >= n) {
            break;
        }
        out[count++] = (int)index;
    }
    return count;
}

/* The MPS pinned-memory limit of the device the process knows by `ordinal`, in bytes; 0: none. */
static unsigned long long mps_limit_bytes(int ordinal) {
    const char* v = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    if (v == NULL) {
        return 0;
    }
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", v);
    char* rest = NULL;
    for (char* entry = strtok_r(copy, ",", &rest); entry != NULL; entry = strtok_r(NULL, ",", &rest)) {
        char* end = NULL;
        const long key = strtol(entry, &end, 10);
        if (end == entry || *end != '=' || key != ordinal) {
            continue;
        }
        char* unit = NULL;
        unsigned long long value = strtoull(end + 1, &unit, 10);
        switch (*unit) {
            case 'G': case 'g': value <<= 30; break;
            case 'M': case 'm': value <<= 20; break;
            case 'K': case 'k': value <<= 10; break;
            default: break;
        }
        return value;
    }
    return 0;
}

CUresult cuDeviceGetCount(int* count) {
    int visible[MAX_DEVICES];
    *count = visible_devices(visible);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    int visible[MAX_DEVICES];
    if (ordinal < 0 || ordinal >= visible_devices(visible)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = visible[ordinal];
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
    if (device < 0 || device >= device_count() || length <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    snprintf(name, (size_t)length, "Fake GPU %d", device);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
    if (device < 0 || device >= device_count() ||
        attribute != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *value = FAKE_SMS;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
    if (device < 0 || device >= device_count()) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    struct FakeContext* c = &contexts[device];
    if (c->retained == 0) {
        if (used_bytes[device] + CONTEXT_MIB * MIB > total_bytes() ||
            share(device, (long long)(CONTEXT_MIB * MIB)) != 0) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        used_bytes[device] += CONTEXT_MIB * MIB;
    }
    c->device = device;
    c->retained++;
    *context = c;
    log_line("ctx %d", device);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    if (device < 0 || device >= device_count() || contexts[device].retained == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (--contexts[device].retained == 0) {
        used_bytes[device] -= CONTEXT_MIB * MIB;
        share(device, -(long long)(CONTEXT_MIB * MIB));
    }
    log_line("release %d", device);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    current = context;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    return current != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
    if (current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    const int d = current->device;
    if (bytes == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int visible[MAX_DEVICES];
    const int n_visible = visible_devices(visible);
    unsigned long long limit = 0, allocated = 0;
    for (int i = 0; i < n_visible; ++i) {
        if (visible[i] == d) {
            limit = mps_limit_bytes(i);
            break;
        }
    }
    for (int i = 0; i < MAX_BUFFERS; ++i) {
        if (buffers[i].pointer != 0 && buffers[i].device == d) {
            allocated += buffers[i].bytes;
        }
    }
    if (limit > 0 && allocated + bytes > limit) {
        log_line("alloc %d %zu oom mps-limit", d, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (used_bytes[d] + bytes > total_bytes() || share(d, (long long)bytes) != 0) {
        log_line("alloc %d %zu oom", d, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < MAX_BUFFERS; ++i) {
        if (buffers[i].pointer == 0) {
            buffers[i].pointer = next_pointer;
            buffers[i].bytes = bytes;
            buffers[i].device = d;
            next_pointer += (bytes + 0xFFFFULL) & ~0xFFFFULL;
            used_bytes[d] += bytes;
            *pointer = buffers[i].pointer;
            log_line("alloc %d %zu ok", d, bytes);
            return CUDA_SUCCESS;
        }
    }
    share(d, -(long long)bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
    for (int i = 0; i < MAX_BUFFERS; ++i) {
        if (buffers[i].pointer == pointer && pointer != 0) {
            used_bytes[buffers[i].device] -= buffers[i].bytes;
            share(buffers[i].device, -(long long)buffers[i].bytes);
            log_line("free %d %llu", buffers[i].device, buffers[i].bytes);
            buffers[i].pointer = 0;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    if (current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    int shared = 0;
    unsigned long long used = shared_used(current->device, &shared);
    if (!shared) {
        used = used_bytes[current->device];
    }
    *total = total_bytes();
    *free_bytes = used < total_bytes() ? total_bytes() - used : 0;
    return CUDA_SUCCESS;
}

/* The entry name after ".entry " in the PTX text, or "" if there is none. */
static void entry_name(const char* ptx, char* out, size_t size) {
    out[0] = '\0';
    const char* e = strstr(ptx, ".entry ");
    if (e == NULL) {
        return;
    }
    e += strlen(".entry ");
    size_t n = 0;
    while (n + 1 < size && e[n] != '\0' && e[n] != '(' && e[n] != ' ' && e[n] != '\n') {
        out[n] = e[n];
        ++n;
    }
    out[n] = '\0';
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                            CUjit_option* options, void** values) {
    if (current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    char* log = NULL;
    size_t log_size = 0;
    for (unsigned int i = 0; i < count; ++i) {
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER) {
            log = (char*)values[i];
        } else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            log_size = (size_t)(uintptr_t)values[i];
        }
    }
    const char* ptx = (const char*)image;
    struct FakeModule* m = &modules[current->device];
    entry_name(ptx, m->entry, sizeof m->entry);
    const char* target = strstr(ptx, ".target sm_");
    const long sm = target != NULL ? strtol(target + strlen(".target sm_"), NULL, 10) : 0;
    const int bad = knob("FAKE_CUDA_BAD_PTX", 0) != 0 || sm == 0 ||
                    sm < knob("FAKE_CUDA_MIN_TARGET", 0) || m->entry[0] == '\0';
    if (bad) {
        if (log != NULL && log_size > 0) {
            snprintf(log, log_size, "ptxas fatal   : fake JIT refused the PTX for sm_%ld\n", sm);
        }
        log_line("module bad sm_%ld", sm);
        return CUDA_ERROR_INVALID_PTX;
    }
    m->device = current->device;
    *module = m;
    log_line("module ok sm_%ld", sm);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    if (module == NULL || strcmp(module->entry, name) != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    functions[module->device].device = module->device;
    *function = &functions[module->device];
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                        void** params, void** extra) {
    (void)stream;
    if (current == NULL || function == NULL || function->device != current->device) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (params == NULL || extra != NULL || grid_x == 0 || block_x == 0 || grid_y != 1 ||
        grid_z != 1 || block_y != 1 || block_z != 1 || shared_bytes != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* carma_busy(float* out, unsigned loops): `out` must hold a float per thread. */
    const CUdeviceptr out = *(const CUdeviceptr*)params[0];
    const unsigned int loops = *(const unsigned int*)params[1];
    int found = 0;
    for (int i = 0; i < MAX_BUFFERS; ++i) {
        found |= buffers[i].pointer == out &&
                 buffers[i].bytes >= (unsigned long long)grid_x * block_x * sizeof(float);
    }
    if (!found) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    log_line("launch %d %u %u %u", current->device, grid_x, block_x, loops);
    long long ns = (long long)loops * knob("FAKE_CUDA_NS_PER_LOOP", 1);
    if (ns > 200000000LL) {
        ns = 200000000LL;
    }
    struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    nanosleep(&ts, NULL);
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
    switch (error) {
        case CUDA_SUCCESS: *text = "no error"; break;
        case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
        case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
        case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
        case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
        case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
        case CUDA_ERROR_INVALID_PTX: *text = "a PTX JIT compilation failed"; break;
        case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
        default: *text = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* A fake DCGM for the tests: the entry points CARMA's DCGM backend loads, with the two GPUs of
 * the fake NVML (same UUIDs, so the backend can match them) but readings of its own, different
 * from NVML's, so a test can tell where a number came from:
 *
 *   NVML GPU 0  SM active 0.60, SM occupancy 0.30, DRAM active 0.40, 70 % busy, 180.5 W,
 *               40960 MiB total, 12288 MiB used.
 *   NVML GPU 1  SM active 0.05, SM occupancy 0.02, DRAM active 0.01, 3 % busy, 65.25 W,
 *               81920 MiB total, 1024 MiB used.
 *
 * DCGM GPU id g is NVML GPU g (or 1 - g with FAKE_DCGM_SWAP_IDS=1). The energy counters start at
 * an arbitrary large value and advance by a tenth of a second of the GPU's power at every read.
 * Values are stamped "now" (less FAKE_DCGM_AGE_S). A field that no watched field group holds
 * answers NOT_WATCHED, as DCGM does.
 *
 * Knobs, read at every call so a test can change them after opening:
 *   FAKE_DCGM_FAIL_INIT=1         dcgmInit fails.
 *   FAKE_DCGM_FAIL_START=1        dcgmStartEmbedded fails.
 *   FAKE_DCGM_FAIL_CONNECT=1      dcgmConnect_v2 fails as if no host engine listened.
 *   FAKE_DCGM_NO_PROFILING=V      watching a field group with profiling fields (1001..1100)
 *                                 fails: V = 1 NOT_SUPPORTED, busy IN_USE, root REQUIRES_ROOT.
 *   FAKE_DCGM_GPU1_ERRORS=1       reading DCGM GPU id 1 fails with GPU_IS_LOST.
 *   FAKE_DCGM_GPU0_SMACT=x, _SMOCC=x, _DRAMA=x   NVML GPU 0's profiling readings.
 *   FAKE_DCGM_BLANK=a,b,...       these field ids read as DCGM's blank value (status OK).
 *   FAKE_DCGM_UNSUPPORTED=a,...   these field ids read with status NOT_SUPPORTED.
 *   FAKE_DCGM_AGE_S=s             values are stamped s seconds ago.
 *   FAKE_DCGM_SWAP_IDS=1          DCGM GPU id 0 is NVML GPU 1 and the reverse.
 *   FAKE_DCGM_GPU_COUNT=n         DCGM reports only the first n GPU ids.
 *   FAKE_DCGM_FOREIGN=1           the UUIDs are other GPUs' (a host engine on another machine).
 *   FAKE_DCGM_RECORD=path         each start, connect, watch, disconnect and shutdown appends a
 *                                 line describing the call to this file.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

typedef int dcgmReturn_t;
typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef uintptr_t dcgmFieldGrp_t;

enum {
    DCGM_ST_OK = 0,
    DCGM_ST_BADPARAM = -1,
    DCGM_ST_NOT_SUPPORTED = -6,
    DCGM_ST_INIT_ERROR = -7,
    DCGM_ST_UNINITIALIZED = -10,
    DCGM_ST_VER_MISMATCH = -12,
    DCGM_ST_NOT_WATCHED = -16,
    DCGM_ST_GPU_IS_LOST = -18,
    DCGM_ST_CONNECTION_NOT_VALID = -21,
    DCGM_ST_MAX_LIMIT = -24,
    DCGM_ST_DUPLICATE_KEY = -26,
    DCGM_ST_REQUIRES_ROOT = -29,
    DCGM_ST_IN_USE = -34
};

#define DCGM_MAX_NUM_DEVICES 32
#define DCGM_MAX_STR_LENGTH 256
#define DCGM_MAX_BLOB_LENGTH 4096
#define DCGM_INT64_BLANK 0x7ffffffffffffff0LL
#define DCGM_FP64_BLANK 140737488355328.0
#define DCGM_STR_BLANK "<<<NULL>>>"
#define DCGM_OPERATION_MODE_AUTO 1
#define DCGM_GROUP_EMPTY 1

typedef struct {
    unsigned int version;
    unsigned short fieldId;
    unsigned short fieldType;
    int status;
    int64_t ts;
    union {
        int64_t i64;
        double dbl;
        char str[DCGM_MAX_STR_LENGTH];
        char blob[DCGM_MAX_BLOB_LENGTH];
    } value;
} dcgmFieldValue_v1;

typedef struct {
    unsigned int version;
    unsigned int persistAfterDisconnect;
    unsigned int timeoutMs;
    unsigned int addressIsUnixSocket;
} dcgmConnectV2Params_v2;

#define MAKE_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((unsigned long)(ver) << 24U)))

/* --- the GPUs ------------------------------------------------------------------------------- */

#define GPU_COUNT 2U

typedef struct FakeGpu {
    const char* uuid;
    const char* foreign_uuid;
    double smact;
    double smocc;
    double drama;
    long long util_percent;
    double power_w;
    long long fb_total_mib;
    long long fb_used_mib;
    long long energy_mj;
} FakeGpu;

/* Indexed by NVML index. */
static FakeGpu gpus[GPU_COUNT] = {
    {"GPU-fa4e0000-0000-4000-8000-000000000000", "GPU-0f0f0000-0000-4000-8000-00000000aaaa", 0.60,
     0.30, 0.40, 70, 180.5, 40960, 12288, 5000000000LL},
    {"GPU-fa4e0000-0000-4000-8000-000000000001", "GPU-0f0f0000-0000-4000-8000-00000000bbbb", 0.05,
     0.02, 0.01, 3, 65.25, 81920, 1024, 2000000000LL},
};

/* --- knobs ---------------------------------------------------------------------------------- */

static const char* env_text(const char* name) {
    const char* text = getenv(name);
    return text != NULL && *text != '\0' ? text : NULL;
}

static long env_long(const char* name, long fallback) {
    const char* text = env_text(name);
    char* end = NULL;
    long value = 0;
    if (text == NULL) {
        return fallback;
    }
    value = strtol(text, &end, 10);
    return *end == '\0' ? value : fallback;
}

static double env_double(const char* name, double fallback) {
    const char* text = env_text(name);
    char* end = NULL;
    double value = 0;
    if (text == NULL) {
        return fallback;
    }
    value = strtod(text, &end);
    return *end == '\0' ? value : fallback;
}

/* Whether the comma-separated list in the variable holds the field id. */
static int env_lists(const char* name, unsigned short field) {
    const char* text = env_text(name);
    char* end = NULL;
    while (text != NULL && *text != '\0') {
        long value = strtol(text, &end, 10);
        if (end == text) {
            return 0;
        }
        if (value == (long)field) {
            return 1;
        }
        text = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static void record(const char* line) {
    const char* path = env_text("FAKE_DCGM_RECORD");
    FILE* file = NULL;
    if (path == NULL) {
        return;
    }
    file = fopen(path, "a");
    if (file != NULL) {
        fprintf(file, "%s\n", line);
        fclose(file);
    }
}

static unsigned int gpu_count(void) {
    long count = env_long("FAKE_DCGM_GPU_COUNT", (long)GPU_COUNT);
    return count >= 0 && count <= (long)GPU_COUNT ? (unsigned int)count : GPU_COUNT;
}

static FakeGpu* gpu_of_id(int id) {
    if (id < 0 || (unsigned int)id >= gpu_count()) {
        return NULL;
    }
    return &gpus[env_long("FAKE_DCGM_SWAP_IDS", 0) == 1 ? (int)GPU_COUNT - 1 - id : id];
}

/* --- handles, groups and watches ------------------------------------------------------------ */

#define MAX_HANDLES 16
#define MAX_GROUPS 64
#define MAX_GROUP_FIELDS 32
#define NAME_SIZE 128

static int init_count = 0;
static int handles[MAX_HANDLES]; /* 1 while handle i + 1 is open */

typedef struct {
    int live;
    char name[NAME_SIZE];
} GpuGroup;

typedef struct {
    int live;
    int watched;
    char name[NAME_SIZE];
    int count;
    unsigned short ids[MAX_GROUP_FIELDS];
} FieldGroup;

static GpuGroup gpu_groups[MAX_GROUPS];
static FieldGroup field_groups[MAX_GROUPS];

static dcgmReturn_t new_handle(dcgmHandle_t* handle) {
    int i = 0;
    for (i = 0; i < MAX_HANDLES; ++i) {
        if (!handles[i]) {
            handles[i] = 1;
            *handle = (dcgmHandle_t)(i + 1);
            return DCGM_ST_OK;
        }
    }
    return DCGM_ST_MAX_LIMIT;
}

static int is_handle(dcgmHandle_t handle) {
    return init_count > 0 && handle >= 1 && handle <= MAX_HANDLES && handles[handle - 1];
}

static int name_taken(const char* name) {
    int i = 0;
    for (i = 0; i < MAX_GROUPS; ++i) {
        if ((gpu_groups[i].live && strcmp(gpu_groups[i].name, name) == 0) ||
            (field_groups[i].live && strcmp(field_groups[i].name, name) == 0)) {
            return 1;
        }
    }
    return 0;
}

static int is_watched(unsigned short field) {
    int i = 0;
    int j = 0;
    for (i = 0; i < MAX_GROUPS; ++i) {
        if (!field_groups[i].live || !field_groups[i].watched) {
            continue;
        }
        for (j = 0; j < field_groups[i].count; ++j) {
            if (field_groups[i].ids[j] == field) {
                return 1;
            }
        }
    }
    return 0;
}

/* --- the entry points ----------------------------------------------------------------------- */

const char* errorString(dcgmReturn_t result) {
    switch (result) {
        case DCGM_ST_OK: return "Success";
        case DCGM_ST_BADPARAM: return "Bad parameter passed to function";
        case DCGM_ST_NOT_SUPPORTED: return "Feature not supported";
        case DCGM_ST_INIT_ERROR: return "DCGM initialization error";
        case DCGM_ST_UNINITIALIZED: return "Uninitialized";
        case DCGM_ST_VER_MISMATCH: return "Version mismatch";
        case DCGM_ST_NOT_WATCHED: return "Field is not being updated";
        case DCGM_ST_GPU_IS_LOST: return "GPU is lost";
        case DCGM_ST_CONNECTION_NOT_VALID: return "Host engine connection invalid/disconnected";
        case DCGM_ST_MAX_LIMIT: return "Max limit reached for the object";
        case DCGM_ST_DUPLICATE_KEY: return "Duplicate key passed to the function";
        case DCGM_ST_REQUIRES_ROOT: return "This operation requires root";
        case DCGM_ST_IN_USE: return "The requested operation could not be completed because the "
                                    "affected resource is in use";
        default: return NULL;
    }
}

dcgmReturn_t dcgmInit(void) {
    if (env_long("FAKE_DCGM_FAIL_INIT", 0) == 1) {
        return DCGM_ST_INIT_ERROR;
    }
    ++init_count;
    record("init");
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmShutdown(void) {
    if (init_count == 0) {
        return DCGM_ST_UNINITIALIZED;
    }
    --init_count;
    record("shutdown");
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmStartEmbedded(int mode, dcgmHandle_t* handle) {
    char line[64];
    if (init_count == 0) {
        return DCGM_ST_UNINITIALIZED;
    }
    if (handle == NULL || (mode != DCGM_OPERATION_MODE_AUTO && mode != 2)) {
        return DCGM_ST_BADPARAM;
    }
    if (env_long("FAKE_DCGM_FAIL_START", 0) == 1) {
        return DCGM_ST_INIT_ERROR;
    }
    snprintf(line, sizeof line, "embedded mode=%d", mode);
    record(line);
    return new_handle(handle);
}

dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t handle) {
    if (!is_handle(handle)) {
        return DCGM_ST_BADPARAM;
    }
    handles[handle - 1] = 0;
    record("stop-embedded");
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmConnect_v2(const char* address, dcgmConnectV2Params_v2* params,
                            dcgmHandle_t* handle) {
    char line[512];
    if (init_count == 0) {
        return DCGM_ST_UNINITIALIZED;
    }
    if (address == NULL || params == NULL || handle == NULL) {
        return DCGM_ST_BADPARAM;
    }
    if (params->version != MAKE_VERSION(dcgmConnectV2Params_v2, 2)) {
        return DCGM_ST_VER_MISMATCH;
    }
    snprintf(line, sizeof line, "connect host=%s persist=%u timeout=%u unix=%u", address,
             params->persistAfterDisconnect, params->timeoutMs, params->addressIsUnixSocket);
    record(line);
    if (env_long("FAKE_DCGM_FAIL_CONNECT", 0) == 1) {
        return DCGM_ST_CONNECTION_NOT_VALID;
    }
    return new_handle(handle);
}

dcgmReturn_t dcgmDisconnect(dcgmHandle_t handle) {
    if (!is_handle(handle)) {
        return DCGM_ST_BADPARAM;
    }
    handles[handle - 1] = 0;
    record("disconnect");
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t handle, unsigned int ids[DCGM_MAX_NUM_DEVICES],
                                        int* count) {
    unsigned int i = 0;
    if (!is_handle(handle)) {
        return DCGM_ST_BADPARAM;
    }
    if (ids == NULL || count == NULL) {
        return DCGM_ST_BADPARAM;
    }
    for (i = 0; i < gpu_count(); ++i) {
        ids[i] = i;
    }
    *count = (int)gpu_count();
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupCreate(dcgmHandle_t handle, int type, const char* name, dcgmGpuGrp_t* group) {
    int i = 0;
    if (!is_handle(handle) || type != DCGM_GROUP_EMPTY || name == NULL || group == NULL ||
        strlen(name) >= NAME_SIZE) {
        return DCGM_ST_BADPARAM;
    }
    if (name_taken(name)) {
        return DCGM_ST_DUPLICATE_KEY;
    }
    for (i = 0; i < MAX_GROUPS; ++i) {
        if (!gpu_groups[i].live) {
            gpu_groups[i].live = 1;
            strcpy(gpu_groups[i].name, name);
            *group = (dcgmGpuGrp_t)(i + 100);
            return DCGM_ST_OK;
        }
    }
    return DCGM_ST_MAX_LIMIT;
}

static GpuGroup* gpu_group(dcgmGpuGrp_t group) {
    if (group < 100 || group >= 100 + MAX_GROUPS || !gpu_groups[group - 100].live) {
        return NULL;
    }
    return &gpu_groups[group - 100];
}

dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t handle, dcgmGpuGrp_t group, unsigned int id) {
    if (!is_handle(handle) || gpu_group(group) == NULL || gpu_of_id((int)id) == NULL) {
        return DCGM_ST_BADPARAM;
    }
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t handle, dcgmGpuGrp_t group) {
    GpuGroup* g = gpu_group(group);
    if (!is_handle(handle) || g == NULL) {
        return DCGM_ST_BADPARAM;
    }
    g->live = 0;
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmFieldGroupCreate(dcgmHandle_t handle, int count, unsigned short* ids,
                                  const char* name, dcgmFieldGrp_t* group) {
    int i = 0;
    if (!is_handle(handle) || count <= 0 || count > MAX_GROUP_FIELDS || ids == NULL ||
        name == NULL || group == NULL || strlen(name) >= NAME_SIZE) {
        return DCGM_ST_BADPARAM;
    }
    if (name_taken(name)) {
        return DCGM_ST_DUPLICATE_KEY;
    }
    for (i = 0; i < MAX_GROUPS; ++i) {
        if (!field_groups[i].live) {
            field_groups[i].live = 1;
            field_groups[i].watched = 0;
            strcpy(field_groups[i].name, name);
            field_groups[i].count = count;
            memcpy(field_groups[i].ids, ids, (size_t)count * sizeof ids[0]);
            *group = (dcgmFieldGrp_t)(i + 1000);
            return DCGM_ST_OK;
        }
    }
    return DCGM_ST_MAX_LIMIT;
}

static FieldGroup* field_group(dcgmFieldGrp_t group) {
    if (group < 1000 || group >= 1000 + MAX_GROUPS || !field_groups[group - 1000].live) {
        return NULL;
    }
    return &field_groups[group - 1000];
}

dcgmReturn_t dcgmFieldGroupDestroy(dcgmHandle_t handle, dcgmFieldGrp_t group) {
    FieldGroup* g = field_group(group);
    if (!is_handle(handle) || g == NULL) {
        return DCGM_ST_BADPARAM;
    }
    g->live = 0;
    return DCGM_ST_OK;
}

static dcgmReturn_t profiling_refusal(void) {
    const char* how = env_text("FAKE_DCGM_NO_PROFILING");
    if (how == NULL) {
        return DCGM_ST_OK;
    }
    if (strcmp(how, "busy") == 0) {
        return DCGM_ST_IN_USE;
    }
    if (strcmp(how, "root") == 0) {
        return DCGM_ST_REQUIRES_ROOT;
    }
    return DCGM_ST_NOT_SUPPORTED;
}

dcgmReturn_t dcgmWatchFields(dcgmHandle_t handle, dcgmGpuGrp_t group, dcgmFieldGrp_t fields,
                             long long period_us, double keep_age_s, int keep_samples) {
    FieldGroup* g = field_group(fields);
    char line[512];
    size_t used = 0;
    int i = 0;
    int profiling = 0;
    dcgmReturn_t refusal = DCGM_ST_OK;
    if (!is_handle(handle) || gpu_group(group) == NULL || g == NULL || period_us <= 0) {
        return DCGM_ST_BADPARAM;
    }
    used = (size_t)snprintf(line, sizeof line, "watch fields=");
    for (i = 0; i < g->count && used < sizeof line; ++i) {
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%u", i > 0 ? "," : "",
                                 (unsigned int)g->ids[i]);
        profiling |= g->ids[i] >= 1001 && g->ids[i] <= 1100;
    }
    if (used < sizeof line) {
        snprintf(line + used, sizeof line - used, " period=%lld age=%.1f samples=%d", period_us,
                 keep_age_s, keep_samples);
    }
    record(line);
    refusal = profiling ? profiling_refusal() : DCGM_ST_OK;
    if (refusal != DCGM_ST_OK) {
        return refusal;
    }
    g->watched = 1;
    return DCGM_ST_OK;
}

dcgmReturn_t dcgmUpdateAllFields(dcgmHandle_t handle, int wait) {
    (void)wait;
    return is_handle(handle) ? DCGM_ST_OK : DCGM_ST_BADPARAM;
}

static int64_t now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static void set_double(dcgmFieldValue_v1* v, double value) {
    v->fieldType = 'd';
    v->value.dbl = value;
}

static void set_int(dcgmFieldValue_v1* v, long long value) {
    v->fieldType = 'i';
    v->value.i64 = value;
}

static void set_blank(dcgmFieldValue_v1* v, int offset) {
    if (v->fieldType == 'd') {
        v->value.dbl = DCGM_FP64_BLANK + offset;
    } else if (v->fieldType == 'i') {
        v->value.i64 = DCGM_INT64_BLANK + offset;
    } else {
        strcpy(v->value.str, offset == 2 ? "<<<NOT_SUPPORTED>>>" : DCGM_STR_BLANK);
    }
}

static void fill(dcgmFieldValue_v1* v, FakeGpu* gpu, unsigned short field) {
    int nvml_index = (int)(gpu - gpus);
    int gpu0 = nvml_index == 0;
    v->status = DCGM_ST_OK;
    switch (field) {
        case 52: set_int(v, nvml_index); break;
        case 54:
            v->fieldType = 's';
            strcpy(v->value.str,
                   env_long("FAKE_DCGM_FOREIGN", 0) == 1 ? gpu->foreign_uuid : gpu->uuid);
            break;
        case 155: set_double(v, gpu->power_w); break;
        case 156:
            gpu->energy_mj += (long long)(gpu->power_w * 100.0); /* a tenth of a second */
            set_int(v, gpu->energy_mj);
            break;
        case 203: set_int(v, gpu->util_percent); break;
        case 250: set_int(v, gpu->fb_total_mib); break;
        case 251: set_int(v, gpu->fb_total_mib - gpu->fb_used_mib); break;
        case 252: set_int(v, gpu->fb_used_mib); break;
        case 1002:
            set_double(v, gpu0 ? env_double("FAKE_DCGM_GPU0_SMACT", gpu->smact) : gpu->smact);
            break;
        case 1003:
            set_double(v, gpu0 ? env_double("FAKE_DCGM_GPU0_SMOCC", gpu->smocc) : gpu->smocc);
            break;
        case 1005:
            set_double(v, gpu0 ? env_double("FAKE_DCGM_GPU0_DRAMA", gpu->drama) : gpu->drama);
            break;
        default:
            v->fieldType = 'i';
            v->status = DCGM_ST_NOT_SUPPORTED;
            set_blank(v, 2);
            return;
    }
    if (!is_watched(field)) {
        v->status = DCGM_ST_NOT_WATCHED;
        set_blank(v, 0);
    } else if (env_lists("FAKE_DCGM_UNSUPPORTED", field)) {
        v->status = DCGM_ST_NOT_SUPPORTED;
        set_blank(v, 2);
    } else if (env_lists("FAKE_DCGM_BLANK", field)) {
        set_blank(v, 0);
    }
}

dcgmReturn_t dcgmGetLatestValuesForFields(dcgmHandle_t handle, int id, unsigned short fields[],
                                          unsigned int count, dcgmFieldValue_v1 values[]) {
    FakeGpu* gpu = gpu_of_id(id);
    unsigned int i = 0;
    int64_t ts = now_us() - (int64_t)(env_double("FAKE_DCGM_AGE_S", 0.0) * 1e6);
    if (!is_handle(handle) || gpu == NULL || fields == NULL || values == NULL) {
        return DCGM_ST_BADPARAM;
    }
    if (id == 1 && env_long("FAKE_DCGM_GPU1_ERRORS", 0) == 1) {
        return DCGM_ST_GPU_IS_LOST;
    }
    for (i = 0; i < count; ++i) {
        memset(&values[i], 0, sizeof values[i]);
        values[i].version = MAKE_VERSION(dcgmFieldValue_v1, 1);
        values[i].fieldId = fields[i];
        values[i].ts = ts;
        fill(&values[i], gpu, fields[i]);
    }
    return DCGM_ST_OK;
}

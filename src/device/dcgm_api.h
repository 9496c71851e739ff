#pragma once
// The part of the DCGM C API that CARMA uses (device/dcgm.cpp), private to device/.
// Declared here rather than taken from dcgm_agent.h / dcgm_structs.h / dcgm_fields.h so that
// building needs nothing from NVIDIA. Only the layouts and values below matter; they are fixed by
// DCGM's ABI (the structures are versioned by size, so a wrong layout is refused, not misread).

#include <cstddef>
#include <cstdint>

namespace carma::device::dcgm_api {

using dcgmReturn_t = int;               // enum dcgmReturn_enum
using dcgmHandle_t = std::uintptr_t;    // a connection, or the embedded host engine
using dcgmGpuGrp_t = std::uintptr_t;    // a group of GPUs
using dcgmFieldGrp_t = std::uintptr_t;  // a group of field ids

constexpr dcgmReturn_t kDcgmOk = 0;
constexpr dcgmReturn_t kDcgmNotSupported = -6;
constexpr dcgmReturn_t kDcgmNoPermission = -17;
constexpr dcgmReturn_t kDcgmGpuNotSupported = -22;
constexpr dcgmReturn_t kDcgmRequiresRoot = -29;
constexpr dcgmReturn_t kDcgmModuleNotLoaded = -33;
constexpr dcgmReturn_t kDcgmInUse = -34;
constexpr dcgmReturn_t kDcgmProfilingNotSupported = -36;
constexpr dcgmReturn_t kDcgmProfilingMultiPass = -38;

constexpr int kDcgmOperationModeAuto = 1;  // dcgmOperationMode_t: DCGM samples on its own threads
constexpr int kDcgmGroupEmpty = 1;         // dcgmGroupType_t
constexpr int kDcgmMaxNumDevices = 32;     // DCGM_MAX_NUM_DEVICES (DCGM 2.0 and newer)

// Field types (dcgmFieldValue_v1::fieldType).
constexpr unsigned short kDcgmFtDouble = 'd';
constexpr unsigned short kDcgmFtInt64 = 'i';
constexpr unsigned short kDcgmFtString = 's';

// Blank values: a value at or above these is not a reading (blank, not found, not supported, no
// permission) even when the status says OK.
constexpr std::int64_t kDcgmInt64Blank = 0x7ffffffffffffff0;
constexpr double kDcgmFp64Blank = 140737488355328.0;  // 2^47
constexpr const char* kDcgmStrBlankPrefix = "<<<";    // "<<<NULL>>>", "<<<NOT_SUPPORTED>>>", ...

// Field ids (dcgm_fields.h).
namespace field {
constexpr unsigned short kNvmlIndex = 52;      // DCGM_FI_DEV_NVML_INDEX, int64
constexpr unsigned short kUuid = 54;           // DCGM_FI_DEV_UUID, string
constexpr unsigned short kPowerUsage = 155;    // DCGM_FI_DEV_POWER_USAGE, double, W
constexpr unsigned short kTotalEnergy = 156;   // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, int64, mJ
constexpr unsigned short kGpuUtil = 203;       // DCGM_FI_DEV_GPU_UTIL, int64, %
constexpr unsigned short kFbTotal = 250;       // DCGM_FI_DEV_FB_TOTAL, int64, MiB
constexpr unsigned short kFbFree = 251;        // DCGM_FI_DEV_FB_FREE, int64, MiB
constexpr unsigned short kFbUsed = 252;        // DCGM_FI_DEV_FB_USED, int64, MiB
constexpr unsigned short kSmActive = 1002;     // DCGM_FI_PROF_SM_ACTIVE, double, ratio
constexpr unsigned short kSmOccupancy = 1003;  // DCGM_FI_PROF_SM_OCCUPANCY, double, ratio
constexpr unsigned short kDramActive = 1005;   // DCGM_FI_PROF_DRAM_ACTIVE, double, ratio
}  // namespace field

constexpr std::size_t kDcgmMaxStrLength = 256;    // DCGM_MAX_STR_LENGTH
constexpr std::size_t kDcgmMaxBlobLength = 4096;  // DCGM_MAX_BLOB_LENGTH

// MAKE_DCGM_VERSION: the structure's size in the low 24 bits, its version above.
constexpr unsigned int dcgm_version(std::size_t size, unsigned int version) {
    return static_cast<unsigned int>(size) | (version << 24U);
}

struct DcgmFieldValueV1 {  // dcgmFieldValue_v1
    unsigned int version;
    unsigned short fieldId;
    unsigned short fieldType;
    int status;       // per value: DCGM_ST_OK, or why there is none
    std::int64_t ts;  // microseconds since 1970
    union {
        std::int64_t i64;
        double dbl;
        char str[kDcgmMaxStrLength];
        char blob[kDcgmMaxBlobLength];
    } value;
};
static_assert(offsetof(DcgmFieldValueV1, version) == 0);
static_assert(offsetof(DcgmFieldValueV1, fieldId) == 4);
static_assert(offsetof(DcgmFieldValueV1, fieldType) == 6);
static_assert(offsetof(DcgmFieldValueV1, status) == 8);
static_assert(offsetof(DcgmFieldValueV1, ts) == 16);
static_assert(offsetof(DcgmFieldValueV1, value) == 24);
static_assert(sizeof(DcgmFieldValueV1) == 4120);
constexpr unsigned int kDcgmFieldValueVersion1 = dcgm_version(sizeof(DcgmFieldValueV1), 1);

struct DcgmConnectV2Params {  // dcgmConnectV2Params_v2
    unsigned int version;
    unsigned int persistAfterDisconnect;  // 0: the host engine drops our watches when we go
    unsigned int timeoutMs;
    unsigned int addressIsUnixSocket;
};
static_assert(offsetof(DcgmConnectV2Params, persistAfterDisconnect) == 4);
static_assert(offsetof(DcgmConnectV2Params, timeoutMs) == 8);
static_assert(offsetof(DcgmConnectV2Params, addressIsUnixSocket) == 12);
static_assert(sizeof(DcgmConnectV2Params) == 16);
constexpr unsigned int kDcgmConnectV2ParamsVersion2 = dcgm_version(sizeof(DcgmConnectV2Params), 2);

using InitFn = dcgmReturn_t (*)();
using ShutdownFn = dcgmReturn_t (*)();
using StartEmbeddedFn = dcgmReturn_t (*)(int, dcgmHandle_t*);
using StopEmbeddedFn = dcgmReturn_t (*)(dcgmHandle_t);
using ConnectV2Fn = dcgmReturn_t (*)(const char*, DcgmConnectV2Params*, dcgmHandle_t*);
using DisconnectFn = dcgmReturn_t (*)(dcgmHandle_t);
using ErrorStringFn = const char* (*)(dcgmReturn_t);
using GetDevicesFn = dcgmReturn_t (*)(dcgmHandle_t, unsigned int*, int*);
using GroupCreateFn = dcgmReturn_t (*)(dcgmHandle_t, int, const char*, dcgmGpuGrp_t*);
using GroupAddDeviceFn = dcgmReturn_t (*)(dcgmHandle_t, dcgmGpuGrp_t, unsigned int);
using GroupDestroyFn = dcgmReturn_t (*)(dcgmHandle_t, dcgmGpuGrp_t);
using FieldGroupCreateFn = dcgmReturn_t (*)(dcgmHandle_t, int, unsigned short*, const char*,
                                            dcgmFieldGrp_t*);
using FieldGroupDestroyFn = dcgmReturn_t (*)(dcgmHandle_t, dcgmFieldGrp_t);
using WatchFieldsFn = dcgmReturn_t (*)(dcgmHandle_t, dcgmGpuGrp_t, dcgmFieldGrp_t, long long,
                                       double, int);
using UpdateAllFieldsFn = dcgmReturn_t (*)(dcgmHandle_t, int);
using GetLatestValuesFn = dcgmReturn_t (*)(dcgmHandle_t, int, unsigned short*, unsigned int,
                                           DcgmFieldValueV1*);

// The entry points, resolved once by resolve_api(); all required.
struct DcgmApi {
    InitFn init = nullptr;
    ShutdownFn shutdown = nullptr;
    StartEmbeddedFn start_embedded = nullptr;
    StopEmbeddedFn stop_embedded = nullptr;
    ConnectV2Fn connect = nullptr;
    DisconnectFn disconnect = nullptr;
    ErrorStringFn error_string = nullptr;
    GetDevicesFn supported_devices = nullptr;
    GroupCreateFn group_create = nullptr;
    GroupAddDeviceFn group_add_device = nullptr;
    GroupDestroyFn group_destroy = nullptr;
    FieldGroupCreateFn field_group_create = nullptr;
    FieldGroupDestroyFn field_group_destroy = nullptr;
    WatchFieldsFn watch_fields = nullptr;
    UpdateAllFieldsFn update_all_fields = nullptr;
    GetLatestValuesFn latest_values = nullptr;
};

}  // namespace carma::device::dcgm_api

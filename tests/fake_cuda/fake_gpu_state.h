/* What the fake CUDA driver (fake_cuda.c) and its NVML view (fake_cuda_nvml.c) share: their
 * knobs and, through FAKE_CUDA_SHARED_FILE, the GPU memory every process holds.
 *
 * Knobs are read at every call from the environment, else from a file fake_cuda.env beside the
 * library (NAME=VALUE lines), for processes whose environment a test does not set, such as the
 * tasks a daemon launches.
 *
 * The shared file is an array of holders {pid, device, bytes, pid namespace}, updated under
 * flock. A holder whose process has died counts for nothing, as the driver frees a dead process's
 * memory.
 *
 * Pids are per PID namespace, and the driver reports a process under the pid the *asking*
 * process sees it by: on an H200 (driver 580) a task run under `unshare --pid --fork
 * --mount-proc` was listed by NVML under its pid in the daemon's namespace, not as its own pid 1.
 * So a holder records its pid together with its namespace, and each reader translates.
 */
#ifndef FAKE_GPU_STATE_H
#define FAKE_GPU_STATE_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1024ULL * 1024ULL)
#define MAX_DEVICES 8
#define MAX_HOLDERS 64

typedef struct {
    int32_t pid;     /* in the holder's own PID namespace */
    int32_t device;
    uint64_t bytes;
    uint64_t pid_ns; /* the inode of that namespace */
} Holder;

static const char fake_gpu_anchor = 0; /* an address inside this library, for dladdr */

/* NAME's value from fake_cuda.env beside this library, into `out`; 0 if there is none. */
static inline int file_knob(const char* name, char* out, size_t size) {
    Dl_info self;
    if (dladdr(&fake_gpu_anchor, &self) == 0 || self.dli_fname == NULL) {
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", self.dli_fname);
    const char* slash = strrchr(path, '/');
    const size_t dir_length = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    snprintf(path + dir_length, sizeof path - dir_length, "fake_cuda.env");
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    char line[4352];
    int found = 0;
    const size_t n = strlen(name);
    while (!found && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, name, n) == 0 && line[n] == '=') {
            /* Copied by hand: snprintf into a smaller buffer trips -Wformat-truncation. */
            const char* value = line + n + 1;
            size_t length = strcspn(value, "\n");
            if (size == 0) {
                break;
            }
            if (length >= size) {
                length = size - 1;
            }
            memcpy(out, value, length);
            out[length] = '\0';
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* A knob's text: the environment's, else fake_cuda.env's, else NULL. */
static inline const char* knob_text(const char* name, char* buffer, size_t size) {
    const char* v = getenv(name);
    if (v != NULL && *v != '\0') {
        return v;
    }
    return file_knob(name, buffer, size) && buffer[0] != '\0' ? buffer : NULL;
}

static inline long knob(const char* name, long fallback) {
    char buffer[64];
    const char* v = knob_text(name, buffer, sizeof buffer);
    return v != NULL ? strtol(v, NULL, 10) : fallback;
}

static inline int device_count(void) {
    long n = knob("FAKE_CUDA_DEVICES", 1);
    return n < 0 ? 0 : (n > MAX_DEVICES ? MAX_DEVICES : (int)n);
}

static inline unsigned long long total_bytes(void) {
    return (unsigned long long)knob("FAKE_CUDA_MEMORY_MIB", 81920) * MIB;
}

static inline int alive(int32_t pid) {
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* The inode of the PID namespace of process `pid` ("self" for this one); 0 if unreadable. */
static inline uint64_t pid_namespace(const char* pid) {
    char path[300]; /* a d_name is at most 255 characters */
    snprintf(path, sizeof path, "/proc/%s/ns/pid", pid);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The last pid of /proc/<pid>/status's NSpid line: the process's pid in its own namespace. */
static inline int32_t innermost_pid(const char* pid) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    char line[256];
    int32_t last = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "NSpid:", 6) == 0) {
            char* rest = NULL;
            for (char* t = strtok_r(line + 6, " \t\n", &rest); t != NULL;
                 t = strtok_r(NULL, " \t\n", &rest)) {
                last = (int32_t)strtol(t, NULL, 10);
            }
            break;
        }
    }
    fclose(f);
    return last;
}

/* The holder's pid as this process sees it, as the driver translates: 0 when this process
 * cannot see it (another namespace's process that is gone, or not visible from here). */
static inline int32_t visible_pid(const Holder* h) {
    if (h->pid_ns == 0 || h->pid_ns == pid_namespace("self")) {
        return h->pid;
    }
    DIR* proc = opendir("/proc");
    if (proc == NULL) {
        return 0;
    }
    int32_t found = 0;
    for (struct dirent* e = readdir(proc); e != NULL && found == 0; e = readdir(proc)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') {
            continue;
        }
        if (pid_namespace(e->d_name) == h->pid_ns && innermost_pid(e->d_name) == h->pid) {
            found = (int32_t)strtol(e->d_name, NULL, 10);
        }
    }
    closedir(proc);
    return found;
}

/* Whether a holder's process lives; one this process cannot see counts as living (its memory
 * stays taken), as the driver keeps it until the process ends. */
static inline int holder_alive(const Holder* h) {
    if (h->pid == 0) {
        return 0;
    }
    const int32_t pid = visible_pid(h);
    return pid == 0 ? h->pid_ns != pid_namespace("self") : alive(pid);
}

/* The shared file, opened and locked (`lock` = LOCK_SH or LOCK_EX), its holders read into
 * `holders`; -1 if there is no shared file. */
static inline int open_holders(int lock, Holder holders[MAX_HOLDERS]) {
    char buffer[4096];
    const char* path = knob_text("FAKE_CUDA_SHARED_FILE", buffer, sizeof buffer);
    if (path == NULL) {
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        return -1;
    }
    flock(fd, lock);
    memset(holders, 0, sizeof(Holder) * MAX_HOLDERS);
    ssize_t got = pread(fd, holders, sizeof(Holder) * MAX_HOLDERS, 0);
    (void)got; /* a new file reads short: nobody holds anything yet */
    return fd;
}

static inline void close_holders(int fd) {
    flock(fd, LOCK_UN);
    close(fd);
}

/* What all live processes hold on `device`; with no shared file, 0 and *shared = 0. */
static inline unsigned long long shared_used(int device, int* shared) {
    Holder h[MAX_HOLDERS];
    int fd = open_holders(LOCK_SH, h);
    *shared = fd >= 0;
    if (fd < 0) {
        return 0;
    }
    unsigned long long used = 0;
    for (int i = 0; i < MAX_HOLDERS; ++i) {
        if (h[i].device == device && holder_alive(&h[i])) {
            used += h[i].bytes;
        }
    }
    close_holders(fd);
    return used;
}

/* Adds `delta` bytes to what this process holds on `device`: 0 if done, -1 if that would pass
 * the GPU's memory (or no holder slot is left). Without a shared file, always 0. */
static inline int share(int device, long long delta) {
    Holder h[MAX_HOLDERS];
    int fd = open_holders(LOCK_EX, h);
    if (fd < 0) {
        return 0;
    }
    const int32_t me = (int32_t)getpid();
    const uint64_t my_ns = pid_namespace("self");
    unsigned long long used = 0;
    int mine = -1, free_slot = -1;
    for (int i = 0; i < MAX_HOLDERS; ++i) {
        const int live = holder_alive(&h[i]);
        if (h[i].pid == me && h[i].pid_ns == my_ns && h[i].device == device) {
            mine = i;
        } else if (!live || h[i].bytes == 0) {
            free_slot = free_slot < 0 ? i : free_slot;
        }
        if (live && h[i].device == device) {
            used += h[i].bytes;
        }
    }
    int rc = 0;
    if (mine < 0) {
        mine = free_slot;
        if (mine >= 0) {
            h[mine].pid = me;
            h[mine].pid_ns = my_ns;
            h[mine].device = device;
            h[mine].bytes = 0;
        }
    }
    if (mine < 0 || (delta > 0 && used + (unsigned long long)delta > total_bytes())) {
        rc = -1;
    } else {
        h[mine].bytes += (uint64_t)delta;
        ssize_t put = pwrite(fd, h, sizeof h, 0);
        (void)put;
    }
    close_holders(fd);
    return rc;
}

/* The live processes holding memory on `device` that this process can see, under the pids it
 * sees them by, at most `max`. */
static inline int shared_holders(int device, Holder* out, int max) {
    Holder h[MAX_HOLDERS];
    int fd = open_holders(LOCK_SH, h);
    if (fd < 0) {
        return 0;
    }
    int n = 0;
    for (int i = 0; i < MAX_HOLDERS && n < max; ++i) {
        const int32_t pid = h[i].device == device && h[i].bytes > 0 ? visible_pid(&h[i]) : 0;
        if (pid != 0 && alive(pid)) {
            out[n] = h[i];
            out[n++].pid = pid;
        }
    }
    close_holders(fd);
    return n;
}

#endif

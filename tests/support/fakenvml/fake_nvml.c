/*
 * A fake libnvidia-ml.so.1 for tests on machines without an NVIDIA GPU.
 *
 * Built by tests/fakenvml/__init__.py with
 *     gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fake_nvml.c
 * and put first on LD_LIBRARY_PATH of a subprocess, so that the unmodified pynvml binding (and tools
 * built on it, like gpustat) runs end to end against GPUs described in a config file.
 *
 * The config is a line-based text file named by $FAKE_NVML_CONFIG (the Python helper writes it from a
 * dict; see write_config there). It is re-read whenever its inode, size or mtime changes, checked on
 * nvmlInit*, nvmlDeviceGetCount_v2 and nvmlDeviceGetHandleByIndex_v2, so a test can make a GPU fall off
 * the bus while the process under test runs. Lines:
 *     driver_version 550.54.15
 *     cuda_driver_version 12040
 *     error <function> <gpu index | *> <CODE>      # error injection, CODE a name or a number
 *     gpu                                          # starts the next GPU; the keys below apply to it
 *     name / uuid / pci_bus_id <text>              # here and in driver_version: any byte as \xHH, \\ a backslash
 *     pci_device_id <hex or decimal>
 *     memory_total / memory_used / memory_reserved <bytes>
 *     utilization_gpu / utilization_memory / temperature <int>
 *     power_mw / power_limit_mw <int>              # absent: NVML_ERROR_NOT_SUPPORTED
 *     lost 1                                       # every call on this GPU: NVML_ERROR_GPU_IS_LOST
 *     process <pid | self> <bytes | unknown> [C | G | C+G] [sm%]  # self: getpid(); unknown: ULLONG_MAX; the
 *                                                  # list(s) it is on: compute (default), graphics, both; sm%:
 *                                                  # its SM utilization, one sample per call of
 *                                                  # nvmlDeviceGetProcessUtilization (absent: no sample)
 *     mig_mode <current> <pending>                 # 0 or 1 each; absent: the GPU has no MIG (NOT_SUPPORTED)
 *     mig_slots <n>                                # nvmlDeviceGetMaxMigDeviceCount in MIG mode (default 7)
 *     mig <slot> <gpu instance id> <compute instance id>  # starts a MIG device of this GPU; mig_* below apply to it
 *     mig_name / mig_uuid <text>
 *     mig_memory_total / mig_memory_used / mig_memory_reserved <bytes>
 *     mig_process <pid | self> <bytes | unknown> [C | G | C+G]
 * Error injection names the handle: "<gpu>" the GPU's own handle, "<gpu>:<slot>" one of its MIG devices,
 * "<gpu>:*" any of its MIG devices, "*" every call.
 *
 * MIG (calls since R450, so in both generations below): a GPU with mig_mode 1 lists its MIG devices through
 * nvmlDeviceGetMigDeviceHandleByIndex (an empty slot: NOT_FOUND). A MIG handle answers name, UUID, index (its
 * slot), memory, PCI info (the parent's) and its own processes; utilization, temperature, power, fan and
 * codec figures are NOT_SUPPORTED per MIG device, and utilization and codec figures on a MIG-enabled parent
 * too (nvml.h: "On MIG-enabled GPUs, querying device utilization rates is not currently supported"). The
 * parent's process list in MIG mode is every instance's processes, with their GPU / compute instance ids, as
 * a privileged caller gets it (an unprivileged caller's refusal: inject NO_PERMISSION on the GPU's handle).
 *
 * If $FAKE_NVML_CALL_LOG names a file, every exported call appends its function name there, so a test
 * can prove that something (e.g. nvmlInit) was never called.
 *
 * The exported symbols are one driver generation's: by default R535 to R550 (only the _v3 process calls
 * with their 24-byte entries, memory info v1 and v2, pci info v3); with -DFAKE_NVML_R470 an older one
 * (no memory info v2, process lists as _v2). Never both: tools guess the driver age from which symbols
 * exist, and a mixed set misleads them.
 */
#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the NVML ABI subset (values and layouts from nvml.h) ---- */
typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION 0x02000028u /* sizeof | (2 << 24), as nvml.h's NVML_STRUCT_VERSION */

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t; /* the v3 entry (drivers >= R510) */

typedef struct nvmlDevice_st *nvmlDevice_t; /* opaque, as in nvml.h; see resolve() */
#define NVML_DEVICE_MIG_DISABLE 0u
#define NVML_DEVICE_MIG_ENABLE 1u

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert((NVML_MEMORY_V2_VERSION & 0xffffff) == sizeof(nvmlMemory_v2_t), "v2 version encodes its size");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t is 8 bytes");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "process entry v3 is 24 bytes");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
/* pynvml passes handles as POINTER(struct) by value and MIG outputs as byref(c_uint) / byref(c_nvmlDevice_t). */
_Static_assert(sizeof(nvmlDevice_t) == sizeof(void *), "a device handle is one pointer");
_Static_assert(sizeof(unsigned int) == 4, "MIG mode, slot counts and instance ids are 32-bit c_uint");

/* ---- the fake state ---- */
#define MAX_GPUS 64
#define MAX_PROCS 64
#define MAX_ERRORS 64
#define MAX_MIGS 8 /* slots per GPU: A100 and H100 have 7 */
#define TEXT 96
#define MIG_ANY -2 /* error injection: any MIG device of the GPU */
#define GPU_HANDLE -1 /* error injection and handles: the GPU's own handle, not a MIG device */

#define ON_COMPUTE 1u /* fake_proc.lists: on nvmlDeviceGetComputeRunningProcesses_* */
#define ON_GRAPHICS 2u /* on nvmlDeviceGetGraphicsRunningProcesses_*; both bits: nvidia-smi's "C+G" */

typedef struct {
    unsigned int pid;
    unsigned long long used; /* a C+G process's one figure: the same on both lists, as the driver gives it */
    unsigned int lists;
    int sm; /* SM utilization of its sample, -1: the driver has no sample of it */
} fake_proc;

typedef struct fake_gpu {
    unsigned int index;
    char name[TEXT], uuid[TEXT], pci_bus_id[32];
    unsigned int pci_device_id;
    unsigned long long mem_total, mem_used, mem_reserved;
    unsigned int util_gpu, util_mem, temperature;
    int has_power, has_power_limit;
    unsigned int power_mw, power_limit_mw;
    int lost;
    int nprocs;
    fake_proc procs[MAX_PROCS];
    int has_mig; /* a mig_mode line: the GPU supports MIG */
    unsigned int mig_mode, mig_pending, mig_slots;
} fake_gpu;

typedef struct fake_mig {
    int present;
    unsigned int gi, ci;
    char name[TEXT], uuid[TEXT];
    unsigned long long mem_total, mem_used, mem_reserved;
    int nprocs;
    fake_proc procs[MAX_PROCS];
} fake_mig;

typedef struct {
    char function[64];
    int gpu; /* -1: any GPU (and calls without one) */
    int mig; /* GPU_HANDLE, MIG_ANY or a slot */
    nvmlReturn_t code;
} fake_error;

/* Handles are addresses in these arrays, so they stay valid (as pointers) across config reloads;
 * whether they still name a GPU (or a MIG device) is checked on each call. */
static fake_gpu gpus[MAX_GPUS];
static int ngpus;
static fake_mig migs[MAX_GPUS][MAX_MIGS]; /* migs[g][slot]: MIG device <slot> of GPU g */
static fake_mig *cur_mig; /* the MIG device the config's mig_* lines describe */
static fake_error errors[MAX_ERRORS];
static int nerrors;
/* A slow or hung driver: a call that takes this long (the lock held, as a stuck driver serialises callers). */
typedef struct {
    char function[64];
    long ms;
} fake_delay;
static fake_delay delays[MAX_ERRORS];
static int ndelays;
static char driver_version[TEXT] = "550.54.15";
static int cuda_driver_version = 12040;

static int init_count;
static struct stat loaded_stat;
static int have_loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *call_log;
static int call_log_checked;

/* ---- config ---- */
static nvmlReturn_t code_from_text(const char *s) {
    static const struct {
        const char *name;
        nvmlReturn_t code;
    } names[] = {
        {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
        {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
        {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
        {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
        {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
        {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
        {"TIMEOUT", NVML_ERROR_TIMEOUT},
        {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
        {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
        {"UNKNOWN", NVML_ERROR_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) return names[i].code;
    char *end;
    long v = strtol(s, &end, 0);
    return (*s && !*end) ? (nvmlReturn_t)v : NVML_ERROR_UNKNOWN;
}

static void copy_text(char *dst, size_t size, const char *src) {
    snprintf(dst, size, "%s", src);
}

/* Text values carry any byte as \xHH (and a backslash as \\), decoded here in place: a test can then hand
 * out a name or version that is not valid UTF-8, as a driver with a corrupt VBIOS string would. */
static char *unescape(char *s) {
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '\\' && in[1] == '\\') {
            *out++ = '\\';
            in += 2;
        } else if (in[0] == '\\' && in[1] == 'x' && isxdigit((unsigned char)in[2]) && isxdigit((unsigned char)in[3])) {
            char hex[3] = {in[2], in[3], 0};
            *out++ = (char)strtoul(hex, NULL, 16);
            in += 4;
        } else {
            *out++ = *in++;
        }
    }
    *out = 0;
    return s;
}

static void parse_process(const char *val, fake_proc *procs, int *nprocs) {
    char pid[32], used[32], type[8] = "C", sm[16] = "-";
    if (*nprocs < MAX_PROCS && sscanf(val, "%31s %31s %7s %15s", pid, used, type, sm) >= 2) {
        fake_proc *p = &procs[(*nprocs)++];
        p->pid = strcmp(pid, "self") == 0 ? (unsigned int)getpid() : (unsigned int)strtoul(pid, NULL, 10);
        p->used = strcmp(used, "unknown") == 0 ? ULLONG_MAX : strtoull(used, NULL, 10);
        p->lists = strcmp(type, "G") == 0 ? ON_GRAPHICS : strcmp(type, "C+G") == 0 ? ON_COMPUTE | ON_GRAPHICS
                                                                                  : ON_COMPUTE;
        p->sm = strcmp(sm, "-") == 0 ? -1 : atoi(sm);
    }
}

static void parse_line(char *line, fake_gpu **cur) {
    line[strcspn(line, "\r\n")] = 0;
    char *key = line + strspn(line, " \t");
    if (!*key || *key == '#') return;
    char *val = key + strcspn(key, " \t");
    if (*val) *val++ = 0;
    val += strspn(val, " \t");
    fake_gpu *g = *cur;

    if (strcmp(key, "gpu") == 0) {
        if (ngpus >= MAX_GPUS) return;
        g = *cur = &gpus[ngpus];
        memset(g, 0, sizeof *g);
        memset(migs[ngpus], 0, sizeof migs[ngpus]);
        cur_mig = NULL;
        g->index = (unsigned int)ngpus++;
        snprintf(g->uuid, sizeof g->uuid, "GPU-fake-%04u", g->index);
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0", g->index + 1);
        copy_text(g->name, sizeof g->name, "Fake GPU");
    } else if (strcmp(key, "driver_version") == 0) {
        copy_text(driver_version, sizeof driver_version, unescape(val));
    } else if (strcmp(key, "cuda_driver_version") == 0) {
        cuda_driver_version = atoi(val);
    } else if (strcmp(key, "error") == 0) {
        char fn[64], gpu[16], code[40];
        if (nerrors < MAX_ERRORS && sscanf(val, "%63s %15s %39s", fn, gpu, code) == 3) {
            fake_error *e = &errors[nerrors++];
            copy_text(e->function, sizeof e->function, fn);
            e->gpu = strcmp(gpu, "*") == 0 ? -1 : atoi(gpu);
            const char *slot = strchr(gpu, ':');
            e->mig = !slot ? GPU_HANDLE : strcmp(slot + 1, "*") == 0 ? MIG_ANY : atoi(slot + 1);
            e->code = code_from_text(code);
        }
    } else if (strcmp(key, "delay") == 0) {
        char fn[64];
        long ms;
        if (ndelays < MAX_ERRORS && sscanf(val, "%63s %ld", fn, &ms) == 2) {
            copy_text(delays[ndelays].function, sizeof delays[ndelays].function, fn);
            delays[ndelays++].ms = ms;
        }
    } else if (!g) {
        fprintf(stderr, "fake_nvml: '%s' before any 'gpu' line, ignored\n", key);
    } else if (strcmp(key, "name") == 0) {
        copy_text(g->name, sizeof g->name, unescape(val));
    } else if (strcmp(key, "uuid") == 0) {
        copy_text(g->uuid, sizeof g->uuid, unescape(val));
    } else if (strcmp(key, "pci_bus_id") == 0) {
        copy_text(g->pci_bus_id, sizeof g->pci_bus_id, unescape(val));
    } else if (strcmp(key, "pci_device_id") == 0) {
        g->pci_device_id = (unsigned int)strtoul(val, NULL, 0);
    } else if (strcmp(key, "memory_total") == 0) {
        g->mem_total = strtoull(val, NULL, 10);
    } else if (strcmp(key, "memory_used") == 0) {
        g->mem_used = strtoull(val, NULL, 10);
    } else if (strcmp(key, "memory_reserved") == 0) {
        g->mem_reserved = strtoull(val, NULL, 10);
    } else if (strcmp(key, "utilization_gpu") == 0) {
        g->util_gpu = (unsigned int)atoi(val);
    } else if (strcmp(key, "utilization_memory") == 0) {
        g->util_mem = (unsigned int)atoi(val);
    } else if (strcmp(key, "temperature") == 0) {
        g->temperature = (unsigned int)atoi(val);
    } else if (strcmp(key, "power_mw") == 0) {
        g->has_power = 1;
        g->power_mw = (unsigned int)strtoul(val, NULL, 10);
    } else if (strcmp(key, "power_limit_mw") == 0) {
        g->has_power_limit = 1;
        g->power_limit_mw = (unsigned int)strtoul(val, NULL, 10);
    } else if (strcmp(key, "lost") == 0) {
        g->lost = atoi(val) != 0;
    } else if (strcmp(key, "process") == 0) {
        parse_process(val, g->procs, &g->nprocs);
    } else if (strcmp(key, "mig_mode") == 0) {
        g->has_mig = 1;
        g->mig_slots = g->mig_slots ? g->mig_slots : 7;
        if (sscanf(val, "%u %u", &g->mig_mode, &g->mig_pending) != 2) fprintf(stderr, "fake_nvml: bad mig_mode\n");
    } else if (strcmp(key, "mig_slots") == 0) {
        g->mig_slots = (unsigned int)atoi(val);
        if (g->mig_slots > MAX_MIGS) g->mig_slots = MAX_MIGS;
    } else if (strcmp(key, "mig") == 0) {
        unsigned int slot, gi, ci;
        if (sscanf(val, "%u %u %u", &slot, &gi, &ci) == 3 && slot < MAX_MIGS) {
            cur_mig = &migs[g->index][slot];
            memset(cur_mig, 0, sizeof *cur_mig);
            cur_mig->present = 1;
            cur_mig->gi = gi;
            cur_mig->ci = ci;
            snprintf(cur_mig->uuid, sizeof cur_mig->uuid, "MIG-fake-%04u-%u", g->index, slot);
            copy_text(cur_mig->name, sizeof cur_mig->name, "Fake GPU MIG 1g.10gb");
        } else {
            cur_mig = NULL;
            fprintf(stderr, "fake_nvml: bad mig line '%s' (slot below %d), ignored\n", val, MAX_MIGS);
        }
    } else if (strncmp(key, "mig_", 4) == 0 && !cur_mig) {
        fprintf(stderr, "fake_nvml: '%s' before any 'mig' line of this GPU, ignored\n", key);
    } else if (strcmp(key, "mig_name") == 0) {
        copy_text(cur_mig->name, sizeof cur_mig->name, unescape(val));
    } else if (strcmp(key, "mig_uuid") == 0) {
        copy_text(cur_mig->uuid, sizeof cur_mig->uuid, unescape(val));
    } else if (strcmp(key, "mig_memory_total") == 0) {
        cur_mig->mem_total = strtoull(val, NULL, 10);
    } else if (strcmp(key, "mig_memory_used") == 0) {
        cur_mig->mem_used = strtoull(val, NULL, 10);
    } else if (strcmp(key, "mig_memory_reserved") == 0) {
        cur_mig->mem_reserved = strtoull(val, NULL, 10);
    } else if (strcmp(key, "mig_process") == 0) {
        parse_process(val, cur_mig->procs, &cur_mig->nprocs);
    } else {
        fprintf(stderr, "fake_nvml: unknown config key '%s', ignored\n", key);
    }
}

/* Re-read the config when the file changed (or appeared, or went away). Called with the lock held. */
static void reload_if_changed(void) {
    const char *path = getenv("FAKE_NVML_CONFIG");
    struct stat st;
    if (!path || stat(path, &st) != 0) { /* no config: no GPUs, no injected errors */
        ngpus = nerrors = ndelays = 0;
        cur_mig = NULL;
        have_loaded = 0;
        return;
    }
    if (have_loaded && st.st_ino == loaded_stat.st_ino && st.st_size == loaded_stat.st_size &&
        st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec && st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    ngpus = nerrors = ndelays = 0;
    cur_mig = NULL;
    copy_text(driver_version, sizeof driver_version, "550.54.15");
    cuda_driver_version = 12040;
    fake_gpu *cur = NULL;
    char line[512];
    while (fgets(line, sizeof line, f)) parse_line(line, &cur);
    fclose(f);
    loaded_stat = st;
    have_loaded = 1;
}

/* ---- call plumbing ---- */
/* The injected error for a call of ``fn`` on GPU ``gpu`` (-1: a call without one), on its own handle (``mig``
 * GPU_HANDLE) or on its MIG device in slot ``mig``. */
static nvmlReturn_t injected(const char *fn, int gpu, int mig) {
    for (int i = 0; i < nerrors; i++) {
        const fake_error *e = &errors[i];
        if (strcmp(e->function, fn) != 0) continue;
        if (e->gpu < 0) return e->code;
        if (e->gpu != gpu) continue;
        if (e->mig == GPU_HANDLE ? mig == GPU_HANDLE : e->mig == MIG_ANY ? mig >= 0 : e->mig == mig) return e->code;
    }
    return NVML_SUCCESS;
}

/* Every exported call starts here: take the lock, log the call. */
static void enter(const char *fn) {
    pthread_mutex_lock(&lock);
    if (!call_log_checked) {
        call_log_checked = 1;
        const char *path = getenv("FAKE_NVML_CALL_LOG");
        if (path && *path && (call_log = fopen(path, "a"))) setvbuf(call_log, NULL, _IOLBF, 0);
    }
    if (call_log) fprintf(call_log, "%s\n", fn);
    reload_if_changed();
    for (int i = 0; i < ndelays; i++) {
        if (strcmp(delays[i].function, fn) == 0) {
            struct timespec pause = {delays[i].ms / 1000, (delays[i].ms % 1000) * 1000000L};
            while (nanosleep(&pause, &pause) != 0) { /* a signal: sleep the rest, as a stuck driver would */
            }
        }
    }
}

static nvmlReturn_t leave(nvmlReturn_t rc) {
    pthread_mutex_unlock(&lock);
    return rc;
}

/* A system-level call: needs init, honours an injected error without a GPU. */
static nvmlReturn_t system_check(const char *fn) {
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    return injected(fn, -1, GPU_HANDLE);
}

/* What a handle names: a GPU (mig NULL) or one of its MIG devices. */
typedef struct {
    fake_gpu *gpu;
    fake_mig *mig;
    int slot; /* the MIG device's slot, or GPU_HANDLE */
} fake_dev;

/* A handle is the address of a GPU in gpus[] or of a MIG device in migs[][]; anything else is invalid. */
static int resolve(nvmlDevice_t dev, fake_dev *out) {
    uintptr_t p = (uintptr_t)dev, g0 = (uintptr_t)gpus, m0 = (uintptr_t)migs;
    if (p >= g0 && p < g0 + sizeof gpus && (p - g0) % sizeof(fake_gpu) == 0) {
        out->gpu = &gpus[(p - g0) / sizeof(fake_gpu)];
        out->mig = NULL;
        out->slot = GPU_HANDLE;
        return out->gpu->index == (unsigned int)(out->gpu - gpus);
    }
    if (p >= m0 && p < m0 + sizeof migs && (p - m0) % sizeof(fake_mig) == 0) {
        size_t k = (p - m0) / sizeof(fake_mig);
        out->gpu = &gpus[k / MAX_MIGS];
        out->mig = &migs[k / MAX_MIGS][k % MAX_MIGS];
        out->slot = (int)(k % MAX_MIGS);
        return 1;
    }
    return 0;
}

static int mig_enabled(const fake_gpu *g) {
    return g->has_mig && g->mig_mode == NVML_DEVICE_MIG_ENABLE;
}

/* A per-device call: the handle must name a present GPU (or a MIG device that still exists on a GPU in MIG
 * mode); lost GPUs and injected errors win. */
static nvmlReturn_t device_check(const char *fn, nvmlDevice_t dev, fake_dev *d) {
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!dev || !resolve(dev, d)) return NVML_ERROR_INVALID_ARGUMENT;
    int index = (int)(d->gpu - gpus);
    if (index >= ngpus || d->gpu->index != (unsigned int)index || d->gpu->lost) return NVML_ERROR_GPU_IS_LOST;
    /* A MIG device destroyed (or its GPU taken out of MIG mode) since the handle was given: stale handle. */
    if (d->mig && (!d->mig->present || !mig_enabled(d->gpu))) return NVML_ERROR_INVALID_ARGUMENT;
    return injected(fn, index, d->slot);
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

#define BEGIN(fn) enter(fn)
#define DEVICE(fn, dev) \
    fake_dev d_;        \
    BEGIN(fn);          \
    CHECK(device_check(fn, dev, &d_))
#define CHECK(expr)                             \
    do {                                        \
        nvmlReturn_t rc_ = (expr);              \
        if (rc_ != NVML_SUCCESS) return leave(rc_); \
    } while (0)

/* ---- init and shutdown ---- */
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    BEGIN("nvmlInitWithFlags");
    reload_if_changed();
    CHECK(injected("nvmlInitWithFlags", -1, GPU_HANDLE));
    init_count++;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    BEGIN("nvmlInit_v2");
    reload_if_changed();
    CHECK(injected("nvmlInit_v2", -1, GPU_HANDLE));
    init_count++;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    BEGIN("nvmlShutdown");
    CHECK(system_check("nvmlShutdown"));
    init_count--;
    return leave(NVML_SUCCESS);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    BEGIN("nvmlSystemGetDriverVersion");
    CHECK(system_check("nvmlSystemGetDriverVersion"));
    return leave(copy_out(version, length, driver_version));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    BEGIN("nvmlSystemGetNVMLVersion");
    CHECK(system_check("nvmlSystemGetNVMLVersion"));
    char text[TEXT + 8];
    snprintf(text, sizeof text, "12.%s", driver_version);
    return leave(copy_out(version, length, text));
}

static nvmlReturn_t cuda_version(const char *fn, int *out) {
    BEGIN(fn);
    CHECK(system_check(fn));
    if (!out) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *out = cuda_driver_version;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    return cuda_version("nvmlSystemGetCudaDriverVersion", v);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    return cuda_version("nvmlSystemGetCudaDriverVersion_v2", v);
}

/* ---- device enumeration ---- */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    BEGIN("nvmlDeviceGetCount_v2");
    reload_if_changed();
    CHECK(system_check("nvmlDeviceGetCount_v2"));
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned int)ngpus;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    BEGIN("nvmlDeviceGetHandleByIndex_v2");
    reload_if_changed();
    if (init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
    if (!device || index >= (unsigned int)ngpus) return leave(NVML_ERROR_INVALID_ARGUMENT);
    /* A GPU that fell off the bus has no handle either, as nvidia-smi shows ("Unable to determine the
     * device handle for GPU ...: GPU is lost"). */
    if (gpus[index].lost) return leave(NVML_ERROR_GPU_IS_LOST);
    CHECK(injected("nvmlDeviceGetHandleByIndex_v2", (int)index, GPU_HANDLE));
    *device = (nvmlDevice_t)&gpus[index];
    return leave(NVML_SUCCESS);
}

/* A MIG handle's index is its slot (nvml.h: "indices that can be passed to nvmlDeviceGetMigDeviceHandleByIndex"). */
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    DEVICE("nvmlDeviceGetIndex", dev);
    if (!index) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = d_.mig ? (unsigned int)d_.slot : d_.gpu->index;
    return leave(NVML_SUCCESS);
}

/* ---- identity ---- */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    DEVICE("nvmlDeviceGetName", dev);
    return leave(copy_out(name, length, d_.mig ? d_.mig->name : d_.gpu->name));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    DEVICE("nvmlDeviceGetUUID", dev);
    return leave(copy_out(uuid, length, d_.mig ? d_.mig->uuid : d_.gpu->uuid));
}

/* On a MIG handle: the parent's PCI info (a MIG device is no PCI function of its own). */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    DEVICE("nvmlDeviceGetPciInfo_v3", dev);
    if (!pci) return leave(NVML_ERROR_INVALID_ARGUMENT);
    const fake_gpu *g = d_.gpu;
    memset(pci, 0, sizeof *pci);
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    sscanf(g->pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = g->pci_device_id;
    /* Real drivers fill the legacy field with a 4-digit domain and busId with an 8-digit one. */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xffff, bus, device,
             function);
    copy_text(pci->busId, sizeof pci->busId, g->pci_bus_id);
    return leave(NVML_SUCCESS);
}

/* ---- memory: the config's used excludes reserved, as v2 reports it; v1 folds reserved into used ---- */
typedef struct {
    unsigned long long total, used, reserved;
} fake_memory;

static fake_memory memory_of(const fake_dev *d) {
    fake_memory m = {d->gpu->mem_total, d->gpu->mem_used, d->gpu->mem_reserved};
    if (d->mig) m = (fake_memory){d->mig->mem_total, d->mig->mem_used, d->mig->mem_reserved};
    return m;
}

static unsigned long long mem_free(const fake_memory *m) {
    unsigned long long taken = m->used + m->reserved;
    return taken >= m->total ? 0 : m->total - taken;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem) {
    DEVICE("nvmlDeviceGetMemoryInfo", dev);
    if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
    fake_memory m = memory_of(&d_);
    mem->total = m.total;
    mem->free = mem_free(&m);
    mem->used = m.used + m.reserved;
    return leave(NVML_SUCCESS);
}

#ifndef FAKE_NVML_R470 /* nvmlDeviceGetMemoryInfo_v2 arrived in R510 */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem) {
    DEVICE("nvmlDeviceGetMemoryInfo_v2", dev);
    if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (mem->version != NVML_MEMORY_V2_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    fake_memory m = memory_of(&d_);
    mem->total = m.total;
    mem->reserved = m.reserved;
    mem->free = mem_free(&m);
    mem->used = m.used;
    return leave(NVML_SUCCESS);
}
#endif

/* ---- sensors: a MIG device has none of its own; a MIG-enabled GPU reports no utilization ---- */
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    DEVICE("nvmlDeviceGetUtilizationRates", dev);
    if (!util) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || mig_enabled(d_.gpu)) return leave(NVML_ERROR_NOT_SUPPORTED);
    util->gpu = d_.gpu->util_gpu;
    util->memory = d_.gpu->util_mem;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp) {
    DEVICE("nvmlDeviceGetTemperature", dev);
    if (!temp || sensor != 0 /* NVML_TEMPERATURE_GPU */) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig) return leave(NVML_ERROR_NOT_SUPPORTED);
    *temp = d_.gpu->temperature;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw) {
    DEVICE("nvmlDeviceGetPowerUsage", dev);
    if (!mw) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || !d_.gpu->has_power) return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = d_.gpu->power_mw;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw) {
    DEVICE("nvmlDeviceGetEnforcedPowerLimit", dev);
    if (!mw) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || !d_.gpu->has_power_limit) return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = d_.gpu->power_limit_mw;
    return leave(NVML_SUCCESS);
}

/* Data-centre GPUs have no fan NVML can read; gpustat asks anyway. */
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned int *speed) {
    DEVICE("nvmlDeviceGetFanSpeed", dev);
    (void)speed;
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

/* nvitop's one-shot report asks these for every GPU; without them it prints a traceback per GPU, so it is timed
 * (benchmarks/bench_cli.py) doing the work a real driver gives it: a real A100 answers compute mode 0 (Default). */
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, unsigned int *mode) {
    DEVICE("nvmlDeviceGetComputeMode", dev);
    if (!mode) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *mode = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type,
                                                unsigned long long *count) {
    DEVICE("nvmlDeviceGetTotalEccErrors", dev);
    (void)error_type;
    (void)counter_type;
    (void)count;
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, unsigned int *pstate) {
    DEVICE("nvmlDeviceGetPerformanceState", dev);
    if (!pstate) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *pstate = 0; /* P0: full performance, as a data-centre GPU under load reports */
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, unsigned int *mode) {
    DEVICE("nvmlDeviceGetPersistenceMode", dev);
    if (!mode) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *mode = 1; /* enabled, as on a shared server */
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t dev, unsigned int *active) {
    DEVICE("nvmlDeviceGetDisplayActive", dev);
    if (!active) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *active = 0;
    return leave(NVML_SUCCESS);
}

typedef struct { unsigned long long total, free, used; } fake_bar1;

/* BAR1 is the window the CPU maps GPU memory through: 64 GiB on an A100 or H100, none of it used here. */
EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t dev, fake_bar1 *bar1) {
    DEVICE("nvmlDeviceGetBAR1MemoryInfo", dev);
    if (!bar1) return leave(NVML_ERROR_INVALID_ARGUMENT);
    bar1->total = 64ull << 30;
    bar1->free = bar1->total;
    bar1->used = 0;
    return leave(NVML_SUCCESS);
}

/* Windows only (WDDM or TCC): Linux drivers answer not supported. */
EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    DEVICE("nvmlDeviceGetDriverModel", dev);
    (void)current;
    (void)pending;
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned int *mw) {
    DEVICE("nvmlDeviceGetPowerManagementLimit", dev);
    if (!mw) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || !d_.gpu->has_power_limit) return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = d_.gpu->power_limit_mw;
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t codec_util(const char *fn, nvmlDevice_t dev, unsigned int *util, unsigned int *period) {
    DEVICE(fn, dev);
    if (!util || !period) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || mig_enabled(d_.gpu)) return leave(NVML_ERROR_NOT_SUPPORTED);
    *util = 0;
    *period = 167000;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t dev, unsigned int *u, unsigned int *p) {
    return codec_util("nvmlDeviceGetEncoderUtilization", dev, u, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t dev, unsigned int *u, unsigned int *p) {
    return codec_util("nvmlDeviceGetDecoderUtilization", dev, u, p);
}

/* ---- MIG ---- */
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    DEVICE("nvmlDeviceGetMigMode", dev);
    if (d_.mig || !current || !pending) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!d_.gpu->has_mig) return leave(NVML_ERROR_NOT_SUPPORTED); /* as a GPU without MIG answers */
    *current = d_.gpu->mig_mode;
    *pending = d_.gpu->mig_pending;
    return leave(NVML_SUCCESS);
}

/* nvml.h: "Returns zero if MIG is not supported or enabled." */
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count) {
    DEVICE("nvmlDeviceGetMaxMigDeviceCount", dev);
    if (d_.mig || !count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = mig_enabled(d_.gpu) ? d_.gpu->mig_slots : 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig) {
    DEVICE("nvmlDeviceGetMigDeviceHandleByIndex", dev);
    if (d_.mig || !mig) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_enabled(d_.gpu)) return leave(NVML_ERROR_NOT_SUPPORTED);
    if (index >= d_.gpu->mig_slots) return leave(NVML_ERROR_INVALID_ARGUMENT);
    int g = (int)d_.gpu->index;
    /* Injection for one slot ("<gpu>:<slot>"), besides the parent handle's checked above. */
    CHECK(injected("nvmlDeviceGetMigDeviceHandleByIndex", g, (int)index));
    if (!migs[g][index].present) return leave(NVML_ERROR_NOT_FOUND); /* no MIG device in this slot */
    *mig = (nvmlDevice_t)&migs[g][index];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device) {
    DEVICE("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig);
    if (!d_.mig || !device) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = (nvmlDevice_t)d_.gpu;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int *is_mig) {
    DEVICE("nvmlDeviceIsMigDeviceHandle", dev);
    if (!is_mig) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *is_mig = d_.mig != NULL;
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t instance_id(const char *fn, nvmlDevice_t dev, unsigned int *id, int compute) {
    DEVICE(fn, dev);
    if (!id) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!d_.mig) return leave(NVML_ERROR_NOT_SUPPORTED); /* a GPU's own handle has no instance */
    *id = compute ? d_.mig->ci : d_.mig->gi;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id) {
    return instance_id("nvmlDeviceGetGpuInstanceId", dev, id, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id) {
    return instance_id("nvmlDeviceGetComputeInstanceId", dev, id, 1);
}

/* ---- processes: the size-query protocol pynvml relies on (count 0 -> INSUFFICIENT_SIZE) ---- */
#define NO_INSTANCE 0xFFFFFFFFu /* gpuInstanceId / computeInstanceId of a process outside MIG */

/* Appends the processes of ``procs`` on list ``list`` (ON_COMPUTE or ON_GRAPHICS) to ``infos`` (when there is
 * room) and counts them in ``n``. */
static void add_processes(const fake_proc *procs, int nprocs, unsigned int list, unsigned int gi, unsigned int ci,
                          nvmlProcessInfo_t *infos, unsigned int room, unsigned int *n) {
    for (int i = 0; i < nprocs; i++) {
        if (!(procs[i].lists & list)) continue;
        if (!infos || *n >= room) {
            (*n)++;
            continue;
        }
        infos[*n].pid = procs[i].pid;
        infos[*n].usedGpuMemory = procs[i].used;
        infos[*n].gpuInstanceId = gi;
        infos[*n].computeInstanceId = ci;
        (*n)++;
    }
}

static nvmlReturn_t list_processes(const char *fn, nvmlDevice_t dev, unsigned int *count,
                                   nvmlProcessInfo_t *infos, int graphics) {
    DEVICE(fn, dev);
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int room = *count, n = 0, list = graphics ? ON_GRAPHICS : ON_COMPUTE;
    if (d_.mig) {
        add_processes(d_.mig->procs, d_.mig->nprocs, list, d_.mig->gi, d_.mig->ci, infos, room, &n);
    } else if (mig_enabled(d_.gpu)) { /* every instance's processes, as a privileged caller sees them */
        for (int slot = 0; slot < MAX_MIGS; slot++) {
            const fake_mig *m = &migs[d_.gpu->index][slot];
            if (m->present) add_processes(m->procs, m->nprocs, list, m->gi, m->ci, infos, room, &n);
        }
    } else {
        add_processes(d_.gpu->procs, d_.gpu->nprocs, list, NO_INSTANCE, NO_INSTANCE, infos, room, &n);
    }
    *count = n;
    if (room < n || (n > 0 && !infos)) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    return leave(NVML_SUCCESS);
}

#ifdef FAKE_NVML_R470 /* before R510 the process lists were the _v2 calls (same 24-byte entries) */
#define PROCESSES_SUFFIX "_v2"
#define COMPUTE_PROCESSES nvmlDeviceGetComputeRunningProcesses_v2
#define GRAPHICS_PROCESSES nvmlDeviceGetGraphicsRunningProcesses_v2
#else
#define PROCESSES_SUFFIX "_v3"
#define COMPUTE_PROCESSES nvmlDeviceGetComputeRunningProcesses_v3
#define GRAPHICS_PROCESSES nvmlDeviceGetGraphicsRunningProcesses_v3
#endif

EXPORT nvmlReturn_t COMPUTE_PROCESSES(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *infos) {
    return list_processes("nvmlDeviceGetComputeRunningProcesses" PROCESSES_SUFFIX, dev, count, infos, 0);
}

EXPORT nvmlReturn_t GRAPHICS_PROCESSES(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *infos) {
    return list_processes("nvmlDeviceGetGraphicsRunningProcesses" PROCESSES_SUFFIX, dev, count, infos, 1);
}

/* ---- per-process utilization: one sample per process that has one, taken "now"; none at all: NOT_FOUND (as the
 * driver answers when no process ran since the timestamp). Not per MIG device or on a MIG-enabled GPU. ---- */
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev, nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long lastSeen) {
    DEVICE("nvmlDeviceGetProcessUtilization", dev);
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (d_.mig || mig_enabled(d_.gpu)) return leave(NVML_ERROR_NOT_SUPPORTED);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long now = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
    unsigned int room = *count, n = 0;
    for (int i = 0; i < d_.gpu->nprocs; i++) {
        const fake_proc *p = &d_.gpu->procs[i];
        if (p->sm < 0 || now <= lastSeen) continue;
        if (samples && n < room) {
            samples[n].pid = p->pid;
            samples[n].timeStamp = now;
            samples[n].smUtil = (unsigned int)p->sm;
            samples[n].memUtil = samples[n].encUtil = samples[n].decUtil = 0;
        }
        n++;
    }
    *count = n;
    if (n == 0) return leave(NVML_ERROR_NOT_FOUND);
    if (!samples || room < n) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    return leave(NVML_SUCCESS);
}

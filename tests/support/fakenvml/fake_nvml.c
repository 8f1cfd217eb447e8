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
 *     process <pid | self> <bytes | unknown>       # self: getpid(); unknown: ULLONG_MAX
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

/* ---- the fake state ---- */
#define MAX_GPUS 64
#define MAX_PROCS 64
#define MAX_ERRORS 64
#define TEXT 96

typedef struct {
    unsigned int pid;
    unsigned long long used;
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
} fake_gpu;
typedef fake_gpu *nvmlDevice_t;

typedef struct {
    char function[64];
    int gpu; /* -1: any GPU (and calls without one) */
    nvmlReturn_t code;
} fake_error;

/* Handles are addresses in this array, so they stay valid (as pointers) across config reloads;
 * whether they still name a GPU is checked against ngpus on each call. */
static fake_gpu gpus[MAX_GPUS];
static int ngpus;
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
        char pid[32], used[32];
        if (g->nprocs < MAX_PROCS && sscanf(val, "%31s %31s", pid, used) == 2) {
            fake_proc *p = &g->procs[g->nprocs++];
            p->pid = strcmp(pid, "self") == 0 ? (unsigned int)getpid() : (unsigned int)strtoul(pid, NULL, 10);
            p->used = strcmp(used, "unknown") == 0 ? ULLONG_MAX : strtoull(used, NULL, 10);
        }
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
        have_loaded = 0;
        return;
    }
    if (have_loaded && st.st_ino == loaded_stat.st_ino && st.st_size == loaded_stat.st_size &&
        st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec && st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    ngpus = nerrors = ndelays = 0;
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
static nvmlReturn_t injected(const char *fn, int gpu) {
    for (int i = 0; i < nerrors; i++)
        if ((errors[i].gpu < 0 || errors[i].gpu == gpu) && strcmp(errors[i].function, fn) == 0)
            return errors[i].code;
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
    return injected(fn, -1);
}

/* A per-device call: the handle must name a present GPU; lost GPUs and injected errors win. */
static nvmlReturn_t device_check(const char *fn, nvmlDevice_t dev) {
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!dev || dev < gpus || dev >= gpus + MAX_GPUS || dev->index != (unsigned int)(dev - gpus))
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((int)dev->index >= ngpus || dev->lost) return NVML_ERROR_GPU_IS_LOST;
    return injected(fn, (int)dev->index);
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

#define BEGIN(fn) enter(fn)
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
    CHECK(injected("nvmlInitWithFlags", -1));
    init_count++;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    BEGIN("nvmlInit_v2");
    reload_if_changed();
    CHECK(injected("nvmlInit_v2", -1));
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
    CHECK(injected("nvmlDeviceGetHandleByIndex_v2", (int)index));
    *device = &gpus[index];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    BEGIN("nvmlDeviceGetIndex");
    CHECK(device_check("nvmlDeviceGetIndex", dev));
    if (!index) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = dev->index;
    return leave(NVML_SUCCESS);
}

/* ---- identity ---- */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    BEGIN("nvmlDeviceGetName");
    CHECK(device_check("nvmlDeviceGetName", dev));
    return leave(copy_out(name, length, dev->name));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    BEGIN("nvmlDeviceGetUUID");
    CHECK(device_check("nvmlDeviceGetUUID", dev));
    return leave(copy_out(uuid, length, dev->uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    BEGIN("nvmlDeviceGetPciInfo_v3");
    CHECK(device_check("nvmlDeviceGetPciInfo_v3", dev));
    if (!pci) return leave(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof *pci);
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    sscanf(dev->pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = dev->pci_device_id;
    /* Real drivers fill the legacy field with a 4-digit domain and busId with an 8-digit one. */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xffff, bus, device,
             function);
    copy_text(pci->busId, sizeof pci->busId, dev->pci_bus_id);
    return leave(NVML_SUCCESS);
}

/* ---- memory: the config's used excludes reserved, as v2 reports it; v1 folds reserved into used ---- */
static unsigned long long mem_free(const fake_gpu *g) {
    unsigned long long taken = g->mem_used + g->mem_reserved;
    return taken >= g->mem_total ? 0 : g->mem_total - taken;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem) {
    BEGIN("nvmlDeviceGetMemoryInfo");
    CHECK(device_check("nvmlDeviceGetMemoryInfo", dev));
    if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
    mem->total = dev->mem_total;
    mem->free = mem_free(dev);
    mem->used = dev->mem_used + dev->mem_reserved;
    return leave(NVML_SUCCESS);
}

#ifndef FAKE_NVML_R470 /* nvmlDeviceGetMemoryInfo_v2 arrived in R510 */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem) {
    BEGIN("nvmlDeviceGetMemoryInfo_v2");
    CHECK(device_check("nvmlDeviceGetMemoryInfo_v2", dev));
    if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (mem->version != NVML_MEMORY_V2_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mem->total = dev->mem_total;
    mem->reserved = dev->mem_reserved;
    mem->free = mem_free(dev);
    mem->used = dev->mem_used;
    return leave(NVML_SUCCESS);
}
#endif

/* ---- sensors ---- */
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    BEGIN("nvmlDeviceGetUtilizationRates");
    CHECK(device_check("nvmlDeviceGetUtilizationRates", dev));
    if (!util) return leave(NVML_ERROR_INVALID_ARGUMENT);
    util->gpu = dev->util_gpu;
    util->memory = dev->util_mem;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp) {
    BEGIN("nvmlDeviceGetTemperature");
    CHECK(device_check("nvmlDeviceGetTemperature", dev));
    if (!temp || sensor != 0 /* NVML_TEMPERATURE_GPU */) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *temp = dev->temperature;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw) {
    BEGIN("nvmlDeviceGetPowerUsage");
    CHECK(device_check("nvmlDeviceGetPowerUsage", dev));
    if (!mw) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!dev->has_power) return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = dev->power_mw;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw) {
    BEGIN("nvmlDeviceGetEnforcedPowerLimit");
    CHECK(device_check("nvmlDeviceGetEnforcedPowerLimit", dev));
    if (!mw) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!dev->has_power_limit) return leave(NVML_ERROR_NOT_SUPPORTED);
    *mw = dev->power_limit_mw;
    return leave(NVML_SUCCESS);
}

/* Data-centre GPUs have no fan NVML can read; gpustat asks anyway. */
EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned int *speed) {
    BEGIN("nvmlDeviceGetFanSpeed");
    CHECK(device_check("nvmlDeviceGetFanSpeed", dev));
    (void)speed;
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

static nvmlReturn_t codec_util(const char *fn, nvmlDevice_t dev, unsigned int *util, unsigned int *period) {
    BEGIN(fn);
    CHECK(device_check(fn, dev));
    if (!util || !period) return leave(NVML_ERROR_INVALID_ARGUMENT);
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

/* ---- processes: the size-query protocol pynvml relies on (count 0 -> INSUFFICIENT_SIZE) ---- */
static nvmlReturn_t list_processes(const char *fn, nvmlDevice_t dev, unsigned int *count,
                                   nvmlProcessInfo_t *infos, int graphics) {
    BEGIN(fn);
    CHECK(device_check(fn, dev));
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int n = graphics ? 0u : (unsigned int)dev->nprocs;
    if (*count < n || (n > 0 && !infos)) {
        *count = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned int i = 0; i < n; i++) {
        infos[i].pid = dev->procs[i].pid;
        infos[i].usedGpuMemory = dev->procs[i].used;
        infos[i].gpuInstanceId = 0xFFFFFFFFu; /* not a MIG instance */
        infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = n;
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

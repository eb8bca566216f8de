/*
 * host_load.c - the host repeats every check the core made before it loads
 * the backend (docs/isolation.md, "The host process"): the
 * file may have changed since, and does, on a restart hours later. The
 * checks are the core's own files (backend_file.c, backend_manifest.c),
 * compiled in unchanged, so a refusal reads exactly as in-process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "isolation/host/host.h"
#include "loader/backend_file.h"
#include "loader/backend_manifest.h"

static double nowSeconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int checkConfined(const char *real, RAI_Error *err) {
    char root[PATH_MAX];
    if (realpath(host.backends_path, root) == NULL) {
        Error_SetFmt(err, "%s: BACKENDS_CONFINED is yes but BACKENDSPATH %s cannot be resolved: %s",
                     host.so, host.backends_path, strerror(errno));
        return 0;
    }
    size_t n = strlen(root);
    if (strcmp(root, "/") && !(!strncmp(real, root, n) && real[n] == '/')) {
        Error_SetFmt(err, "%s: its real path %s lies outside BACKENDSPATH %s (real path %s) "
                     "and BACKENDS_CONFINED is yes", host.so, real, host.backends_path, root);
        return 0;
    }
    return 1;
}

/* The device and inode of the file mapped at addr, from /proc/self/maps:
 * what dlopen really mapped, whatever the path says now. */
static int mappedFile(const void *addr, dev_t *dev, ino_t *ino) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) return 0;
    char line[PATH_MAX + 128];
    int found = 0;
    uintptr_t a = (uintptr_t)addr;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi, off, inode;
        unsigned maj, min;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off, &maj, &min,
                   &inode) == 7 &&
            a >= lo && a < hi) {
            *dev = makedev(maj, min);
            *ino = (ino_t)inode;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The file the core checked, checked again here, as data: same real path,
 * confined, ELF, note and manifest. Its open descriptor (to compare with
 * what dlopen maps), or -1 after err. */
static int checkFile(char *real, BackendFileNote *note, struct stat *st, RAI_Error *err) {
    if (realpath(host.so, real) == NULL) {
        Error_SetFmt(err, "%s: cannot open: %s", host.so, strerror(errno));
        return -1;
    }
    if (strcmp(real, host.real) != 0) {
        Error_SetFmt(err, "%s: its real path is now %s, the core checked %s", host.so, real,
                     host.real);
        return -1;
    }
    if (host.confined && !checkConfined(real, err)) return -1;
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) != 0) {
        Error_SetFmt(err, "%s: cannot open: %s", host.so, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int manifest = 0;
    if (!BackendFile_Inspect(real, host.so, host.kind, note, err) ||
        !BackendManifest_Verify(real, host.so, &manifest, err)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* dlopen and the entry, which must lie in the very file checked (st): a
 * replacement between the checks and dlopen is refused before anything of
 * it is called. NULL after err. */
static RAI_BackendEntryFn openEntry(const char *real, const struct stat *st, RAI_Error *err) {
    /* What quietFrameworks sets in-process; the core passes them in the
     * environment too, a user's own setting wins either way. */
    setenv("TF_CPP_MIN_LOG_LEVEL", "3", 0);
    setenv("TF_ENABLE_ONEDNN_OPTS", "0", 0);
    if (getenv("GOMP_SPINCOUNT") == NULL) setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    /* By path, not /proc/self/fd/<n>: $ORIGIN in the backend's RUNPATH
     * must name its own folder. The handle is never closed: the host
     * lives as long as the backend. */
    void *handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        if (why == NULL) why = "unknown error";
        if (strstr(why, host.so)) {
            Error_SetFmt(err, "dlopen failed: %s", why);
        } else {
            Error_SetFmt(err, "%s: dlopen failed: %s", host.so, why);
        }
        return NULL;
    }
    RAI_BackendEntryFn entry = (RAI_BackendEntryFn)dlsym(handle, RAI_BACKEND_ENTRY_SYMBOL);
    if (entry == NULL) {
        Error_SetFmt(err, "%s: does not export the entry symbol %s", host.so,
                     RAI_BACKEND_ENTRY_SYMBOL);
        return NULL;
    }
    dev_t dev;
    ino_t ino;
    if (!mappedFile((const void *)entry, &dev, &ino)) {
        Error_SetFmt(err, "%s: cannot find the mapping of its entry in /proc/self/maps", host.so);
        return NULL;
    }
    if (dev != st->st_dev || ino != st->st_ino) {
        Error_SetFmt(err, "%s: the file was replaced while it was being loaded", host.so);
        return NULL;
    }
    return entry;
}

int Host_Load(RAI_Error *err) {
    double start = nowSeconds();
    char real[PATH_MAX];
    BackendFileNote note;
    struct stat st;
    int fd = checkFile(real, &note, &st, err);
    if (fd < 0) return 0;
    RAI_BackendEntryFn entry = openEntry(real, &st, err);
    close(fd);
    if (entry == NULL) return 0;
    char why[512] = "";
    const RAI_BackendDescriptor *d = entry(Host_Api(), why, sizeof(why));
    if (d == NULL) {
        Error_SetFmt(err, "%s: backend refused the host: %s", host.so,
                     why[0] ? why : "no reason given");
        return 0;
    }
    if (!Backend_CheckDescriptor(d, host.kind, host.so, err)) return 0;
    host.desc = d;
    host.note_major = note.abi_major;
    host.note_minor = note.abi_minor;
    host.load_seconds = nowSeconds() - start;
    return 1;
}

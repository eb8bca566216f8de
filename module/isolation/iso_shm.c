/*
 * iso_shm.c - memfds for isolation, see iso_shm.h.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include "isolation/iso_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int newMemfd(const char *name, size_t size) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int sealOrClose(int fd, int seals) {
    if (fcntl(fd, F_ADD_SEALS, seals) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int IsoShm_CreateArena(const char *name, size_t size) {
    int fd = newMemfd(name, size);
    return fd < 0 ? -1 : sealOrClose(fd, ISO_SEALS_ARENA);
}

int IsoShm_CreateRegion(const char *name, size_t size) {
    return newMemfd(name, size);
}

int IsoShm_Write(int fd, const void *p, size_t n, size_t offset) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = pwrite(fd, c, n, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
        offset += (size_t)w;
    }
    return 0;
}

int IsoShm_Freeze(int fd) {
    return fcntl(fd, F_ADD_SEALS, ISO_SEALS_FROZEN);
}

int IsoShm_CreateFrozen(const char *name, const void *p, size_t n) {
    int fd = newMemfd(name, n);
    if (fd < 0) return -1;
    if (IsoShm_Write(fd, p, n, 0) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return sealOrClose(fd, ISO_SEALS_FROZEN);
}

int IsoShm_Check(int fd, int need, size_t min_size, size_t max_size, size_t *size, char *why,
                 size_t whylen) {
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) {
        snprintf(why, whylen, "descriptor is not a sealable memfd: %s", strerror(errno));
        return 0;
    }
    if ((seals & need) != need) {
        snprintf(why, whylen, "memfd lacks seals 0x%x (has 0x%x)", (unsigned)(need & ~seals),
                 (unsigned)seals);
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "fstat of a memfd failed: %s", strerror(errno));
        return 0;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size < min_size ||
        (max_size > 0 && (size_t)st.st_size > max_size)) {
        snprintf(why, whylen, "memfd size %lld outside [%zu, %zu]", (long long)st.st_size,
                 min_size, max_size);
        return 0;
    }
    *size = (size_t)st.st_size;
    return 1;
}

void *IsoShm_Map(int fd, size_t len, int writable) {
    if (len == 0) len = 1; /* mmap refuses 0; a sealed empty file maps nothing usable anyway */
    void *p = mmap(NULL, len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

void IsoShm_Unmap(void *p, size_t len) {
    if (p) munmap(p, len ? len : 1);
}

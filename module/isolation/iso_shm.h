/*
 * iso_shm.h - the shared memory of isolation (docs/isolation.md, "Tensors
 * in shared memory"): memfds created sealable, sized, sealed, checked and
 * mapped. Compiled into the core and the host; libc only.
 *
 * Arenas: sized once and sealed against shrinking and growing, so that
 * neither side can make the other's mapping fault with SIGBUS. Frozen
 * regions (large tensors, bulk payloads): written with pwrite, then sealed
 * against writes too, so the receiver maps bytes nobody can change.
 */
#ifndef REDISAI_ISO_SHM_H
#define REDISAI_ISO_SHM_H

#include <fcntl.h> /* F_SEAL_*: include this header after defining _GNU_SOURCE */
#include <stddef.h>

#define ISO_SEALS_ARENA (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define ISO_SEALS_FROZEN (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A new memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) of size bytes (sparse),
 * sealed ISO_SEALS_ARENA. Returns the fd, or -1 with errno. */
int IsoShm_CreateArena(const char *name, size_t size);
/* A new memfd holding exactly the n bytes at p, sealed ISO_SEALS_FROZEN.
 * Returns the fd, or -1 with errno. */
int IsoShm_CreateFrozen(const char *name, const void *p, size_t n);
/* A new memfd of size bytes to be filled with IsoShm_Write and then
 * IsoShm_Freeze (several tensors at their own offsets). */
int IsoShm_CreateRegion(const char *name, size_t size);
int IsoShm_Write(int fd, const void *p, size_t n, size_t offset);
int IsoShm_Freeze(int fd);

/* Checks that fd is a memfd carrying at least the seals `need` and whose
 * size is at least min_size (and, when max_size > 0, at most max_size);
 * its size goes to *size. Returns 1, or 0 with the reason in why. */
int IsoShm_Check(int fd, int need, size_t min_size, size_t max_size, size_t *size, char *why,
                 size_t whylen);
/* Maps len bytes of fd MAP_SHARED, read-only or read-write. NULL on failure. */
void *IsoShm_Map(int fd, size_t len, int writable);
void IsoShm_Unmap(void *p, size_t len);

#endif

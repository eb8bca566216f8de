/*
 * host_wire.c - tensors between the wire and host tensors (docs/isolation.md,
 * "Tensors in shared memory"), for runs and callbacks alike.
 *
 * From the core: region 0 is the channel's core-to-host arena, k >= 1 the
 * message's fds[k-1], a sealed large region. A numeric run input is used
 * where it lies, without a copy, its tensor holding a reference on the
 * mapping: a backend may keep an input and the data pointer it read past
 * the run (Torch does, for a module attribute), and in-process that data
 * never moves or changes while a reference is held. A sealed region cannot
 * change; an arena input still held after the run gets private pages at
 * its address before the next request reuses the arena
 * (HostWire_KeepArenaInputs). A callback's reply tensors are copied (they
 * outlive the reply); STRING tensors are always copied, then checked.
 *
 * To the core: the message's part of the host-to-core arena (Iso_ArenaPart:
 * the core picks request ids so that every run in flight, and every answer
 * whose outputs it still uses in place, has a part of its own), else one
 * sealed region per message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isolation/host/host.h"
#include "isolation/iso_shm.h"

HostMapping *HostMapping_New(void *map, size_t len) {
    HostMapping *hm = calloc(1, sizeof(*hm));
    if (hm == NULL) return NULL;
    hm->refs = 1;
    hm->map = map;
    hm->len = len;
    return hm;
}

static void mappingRetain(HostMapping *hm) {
    __atomic_add_fetch(&hm->refs, 1, __ATOMIC_RELAXED);
}

void HostMapping_Release(void *mapping) {
    HostMapping *hm = mapping;
    if (hm == NULL || __atomic_sub_fetch(&hm->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    IsoShm_Unmap(hm->map, hm->len);
    free(hm);
}

static size_t alignUp(size_t n) {
    return (n + ISO_TENSOR_ALIGN - 1) & ~(size_t)(ISO_TENSOR_ALIGN - 1);
}

RAI_Tensor *HostWire_TensorIn(HostChannel *ch, IsoMsg *m, HostRegions *regions,
                              const IsoTensorDesc *d, int borrow, const char *what, uint32_t i) {
    RAI_DType dt = {.code = d->code, .bits = d->bits};
    int is_string = d->code == RAI_DTYPE_STRING;
    if (is_string) {
        if (d->bits != 8) Host_ProtocolError("%s %u: STRING with %u bits", what, i, d->bits);
    } else {
        int ok;
        size_t want = HostTensor_Bytes(dt, d->dims, (int)d->ndims, &ok);
        if (!ok)
            Host_ProtocolError("%s %u: bad dtype (%u, %u) or size", what, i, d->code, d->bits);
        if (want != d->nbytes)
            Host_ProtocolError("%s %u: dims give %zu bytes, descriptor says %llu", what, i, want,
                               (unsigned long long)d->nbytes);
    }
    if (d->offset % ISO_TENSOR_ALIGN)
        Host_ProtocolError("%s %u: offset %llu is not aligned", what, i,
                           (unsigned long long)d->offset);
    const unsigned char *base;
    size_t len;
    HostMapping *owner;
    if (d->region == 0) {
        owner = ch->c2h;
        base = owner->map;
        len = owner->len;
    } else {
        int k = d->region - 1;
        if (k >= m->nfds) Host_ProtocolError("%s %u: region %u was not sent", what, i, d->region);
        if (regions->map[k] == NULL) {
            char why[160];
            size_t size;
            if (!IsoShm_Check(m->fds[k], F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, 0, 0, &size,
                              why, sizeof(why)))
                Host_ProtocolError("%s %u: large region: %s", what, i, why);
            void *map = IsoShm_Map(m->fds[k], size, 0);
            if (map == NULL)
                Host_ProtocolError("%s %u: cannot map its region: %s", what, i, strerror(errno));
            /* The message's reference, dropped by HostWire_Unmap. */
            regions->map[k] = HostMapping_New(map, size);
            if (regions->map[k] == NULL) {
                IsoShm_Unmap(map, size);
                return NULL;
            }
        }
        owner = regions->map[k];
        base = owner->map;
        len = owner->len;
    }
    if (d->offset > len || d->nbytes > len - d->offset)
        Host_ProtocolError("%s %u: bytes [%llu, +%llu) outside its region of %zu", what, i,
                           (unsigned long long)d->offset, (unsigned long long)d->nbytes, len);
    const void *src = base + d->offset;
    if (is_string) {
        RAI_Tensor *t;
        char why[160];
        if (!HostTensor_FromWireStrings(d->dims, (int)d->ndims, src, d->nbytes, &t, why,
                                        sizeof(why)))
            Host_ProtocolError("%s %u: %s", what, i, why);
        return t;
    }
    if (!borrow) return HostTensor_Copy(dt, d->dims, (int)d->ndims, src, d->nbytes);
    mappingRetain(owner);
    RAI_Tensor *t = HostTensor_Borrow(dt, d->dims, (int)d->ndims, (void *)src, d->nbytes,
                                      HostMapping_Release, owner);
    if (t == NULL) HostMapping_Release(owner);
    return t;
}

void HostWire_Unmap(HostRegions *regions) {
    for (int k = 0; k < ISO_MAX_FDS; k++) {
        HostMapping_Release(regions->map[k]);
        regions->map[k] = NULL;
    }
}

/* Gives the pages under [p, p + n) of the old arena view private copies
 * of themselves, at the same address and read-only as before. */
static void privatize(unsigned char *p, size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + n + page - 1) & ~(uintptr_t)(page - 1);
    size_t len = hi - lo;
    void *copy = malloc(len);
    if (copy == NULL) Host_ProtocolError("out of memory keeping an input past its run");
    memcpy(copy, (void *)lo, len);
    /* MAP_FIXED replaces exactly those pages of the view; the rest of it
     * stays mapped until the view's last reference goes. */
    void *q = mmap((void *)lo, len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (q == MAP_FAILED)
        Host_ProtocolError("cannot keep an input past its run: %s", strerror(errno));
    memcpy(q, copy, len);
    mprotect(q, len, PROT_READ);
    free(copy);
}

void HostWire_KeepArenaInputs(HostChannel *ch, RAI_Tensor *const *inputs,
                              const IsoTensorDesc *descs, uint32_t n) {
    HostMapping *old = ch->c2h;
    int kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (inputs[i] == NULL || descs[i].region != 0 || descs[i].code == RAI_DTYPE_STRING ||
            descs[i].nbytes == 0 || !HostTensor_Shared(inputs[i]))
            continue;
        /* The core writes the next request's inputs into the arena: give
         * this input, which a backend still holds, its own pages first.
         * By its data pointer: the view it lies in may be an older one
         * than the channel's (a nested run retired that already). */
        privatize(HostTensor_Data(inputs[i]), descs[i].nbytes);
        kept = 1;
    }
    if (!kept) return;
    /* The old view now belongs to the tensors on it; the channel maps the
     * arena again for the next requests. */
    void *fresh = IsoShm_Map(ch->c2h_fd, old->len, 0);
    if (fresh == NULL) Host_ProtocolError("cannot map the arena again: %s", strerror(errno));
    ch->c2h = HostMapping_New(fresh, old->len);
    if (ch->c2h == NULL) Host_ProtocolError("out of memory mapping the arena again");
    HostMapping_Release(old);
}

int HostWire_Place(HostChannel *ch, uint64_t id, RAI_Tensor *const *tensors, size_t n,
                   IsoTensorDesc *descs, int *large) {
    /* Only this message's part: the core may still be reading the outputs
     * of earlier answers from theirs. */
    size_t base, part;
    Iso_ArenaPart(id, ch->h2c_len, &base, &part);
    size_t arena = base, region = 0, end = base + part;
    *large = -1;
    for (size_t i = 0; i < n; i++) {
        RAI_DType dt = HostTensor_DType(tensors[i]);
        const void *p1, *p2;
        size_t n1, n2;
        HostTensor_WireParts(tensors[i], &p1, &n1, &p2, &n2);
        size_t nb = n1 + n2;
        IsoTensorDesc *d = &descs[i];
        IsoTensorDesc_Head(d, dt.code, dt.bits, (uint32_t)HostTensor_NDims(tensors[i]), nb);
        memcpy(d->dims, HostTensor_Dims(tensors[i]), sizeof(int64_t) * d->ndims);
        size_t at = alignUp(arena);
        if (nb <= ISO_ARENA_TENSOR_MAX && at <= end && nb <= end - at) {
            d->region = 0;
            d->offset = at;
            if (n1) memcpy(ch->h2c + at, p1, n1);
            if (n2) memcpy(ch->h2c + at + n1, p2, n2);
            arena = at + nb;
        } else {
            d->region = 1;
            d->offset = alignUp(region);
            region = d->offset + nb;
        }
    }
    if (region == 0) return 0;
    int fd = IsoShm_CreateRegion("redisai-out", region);
    if (fd < 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (descs[i].region != 1) continue;
        const void *p1, *p2;
        size_t n1, n2;
        HostTensor_WireParts(tensors[i], &p1, &n1, &p2, &n2);
        if ((n1 && IsoShm_Write(fd, p1, n1, descs[i].offset) != 0) ||
            (n2 && IsoShm_Write(fd, p2, n2, descs[i].offset + n1) != 0)) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
    }
    if (IsoShm_Freeze(fd) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *large = fd;
    return 0;
}

int HostWire_Send(HostChannel *ch, uint16_t type, uint64_t id, IsoBuf *b, const int *fds,
                  int nfds) {
    if (ch->dead) {
        errno = EPIPE;
        return -1;
    }
    if (b->oom) {
        errno = ENOMEM;
        return -1;
    }
    if (IsoRing_Send(&ch->ring, type, id, b->data, b->len, fds, nfds) == 0) return 0;
    if (errno == EPIPE || errno == ECONNRESET) ch->dead = 1;
    return -1;
}

void HostWire_Reply(HostChannel *ch, uint16_t type, uint64_t id, IsoBuf *b, const int *fds,
                    int nfds) {
    if (HostWire_Send(ch, type, id, b, fds, nfds) == 0 || ch->dead) return;
    /* E.g. no memory for a bulk memfd: the core still gets an answer. */
    char text[160];
    snprintf(text, sizeof(text), "ERR backend host could not send its %s: %s",
             Iso_MsgTypeName(type), strerror(errno));
    HostWire_SendError(ch, id, text);
}

void HostWire_SendError(HostChannel *ch, uint64_t id, const char *text) {
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_CStr(&b, text);
    if (HostWire_Send(ch, ISO_MSG_ERROR, id, &b, NULL, 0) != 0 && !ch->dead)
        Host_ProtocolError("channel %llu: cannot send an ERROR: %s", (unsigned long long)ch->id,
                           strerror(errno));
    IsoBuf_Free(&b);
}

/*
 * iso_chan.c - a core thread's data channels to the hosts, see iso_chan.h
 * (docs/isolation.md, "The protocol", "Tensors in shared memory").
 *
 * Each core thread that runs on a host has its own channel to it (a
 * socketpair, two arenas and a ring for its messages), opened on first use and kept in a
 * thread-local per slot, so a request needs no demultiplexing: the thread
 * writes its request and reads its own channel. The host's callbacks
 * (redis.execute, model_execute) are served on this very thread, so the
 * run's caller, DB and ACL user are those of the run.
 *
 * Arena rules: inputs of a top-level run go into the request's part of the
 * core-to-host arena (Iso_ArenaPart: up to ISO_PIPELINE_DEPTH runs may be
 * in flight, iso_pipeline.c); anything the core sends deeper in the call
 * stack (a nested run's inputs, a callback's reply tensors) goes into a
 * sealed region, so nothing the host still borrows is overwritten.
 * Whatever the host sends is checked before it is used; what it sends in
 * its arena is copied out as soon as it arrives, but for a run's numeric
 * outputs of at least ISO_IN_PLACE_MIN bytes, used in place while their
 * part stays pinned ("Outputs used in place" below).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "core/run_gate.h"
#include "core/tensor.h"
#include "isolation/core/iso_chan.h"
#include "isolation/core/iso_control.h"
#include "isolation/iso_shm.h"

/* The host opens channels on its control thread, never behind a create
 * (host_main.c): one unanswered this long means that thread is stuck. */
#define ISO_CHANNEL_OPEN_TIMEOUT_MS 10000

static __thread IsoChan *tl_chan[ISO_MAX_HOSTS];
/* Fails the runs in flight on a channel about to go (IsoChan_SetRetire). */
static void (*retire_runs)(IsoChan *c);

void IsoChan_SetRetire(void (*fn)(IsoChan *c)) {
    retire_runs = fn;
}
static pthread_key_t chan_key;
static pthread_once_t chan_once = PTHREAD_ONCE_INIT;
static uint64_t next_channel_id;

/* Set at load (IsoChan_UseRing), before any channel. */
static int use_ring = 1;

void IsoChan_UseRing(int use) {
    use_ring = use;
}

/* --- the h2c arena's view and its pins ------------------------------------------------ */

/* A run's numeric output in the h2c arena of at least this many bytes is
 * used in place: below it a copy costs less than what an output used in
 * place adds (its pin, and the copy into Redis's memory on the main thread
 * when it is stored under a key, which a copied output does not need). */
#define ISO_IN_PLACE_MIN (16u << 10)

typedef struct ArenaPin {
    struct IsoArenaView *view;
    int count; /* outputs in place in this part */
} ArenaPin;

/* The core's mapping of a channel's h2c arena: one reference for the
 * channel, one for each output used in place; the last unmaps it, on
 * whatever thread releases it. */
typedef struct IsoArenaView {
    unsigned char *map;
    size_t len;
    int refs;
    ArenaPin pin[ISO_ARENA_PARTS];
} IsoArenaView;

static IsoArenaView *viewNew(unsigned char *map, size_t len) {
    IsoArenaView *v = calloc(1, sizeof(*v));
    if (v == NULL) return NULL;
    v->map = map;
    v->len = len;
    v->refs = 1;
    for (int k = 0; k < ISO_ARENA_PARTS; k++) v->pin[k].view = v;
    return v;
}

static void viewUnref(IsoArenaView *v) {
    if (v == NULL || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    IsoShm_Unmap(v->map, v->len);
    free(v);
}

/* The release of an output used in place: its part may be written again
 * once no output lies in it (acquire in partPinned). */
static void unpin(void *p) {
    ArenaPin *pin = p;
    IsoArenaView *v = pin->view;
    __atomic_sub_fetch(&pin->count, 1, __ATOMIC_ACQ_REL);
    viewUnref(v);
}

static int partPinned(IsoChan *c, int k) {
    return __atomic_load_n(&c->h2c_view->pin[k].count, __ATOMIC_ACQUIRE) > 0;
}

static void closeChan(IsoChan *c) {
    if (c == NULL) return;
    pthread_mutex_lock(&c->slot->mu);
    for (IsoChan **pp = &c->slot->chans; *pp; pp = &(*pp)->next_in_slot) {
        if (*pp == c) {
            *pp = c->next_in_slot;
            break;
        }
    }
    if (c->slot->generation == c->generation && c->slot->channels > 0) c->slot->channels--;
    close(c->ring.sock);
    pthread_mutex_unlock(&c->slot->mu);
    IsoRing_Detach(&c->ring);
    IsoShm_Unmap(c->c2h, c->len);
    viewUnref(c->h2c_view);
    free(c);
}

/* A thread that ends (an LLAPI caller's) drops its channels. */
static void threadEnds(void *p) {
    (void)p;
    for (int i = 0; i < ISO_MAX_HOSTS; i++) {
        if (tl_chan[i] && tl_chan[i]->npending && retire_runs) retire_runs(tl_chan[i]);
        closeChan(tl_chan[i]);
        tl_chan[i] = NULL;
    }
}

static void makeKey(void) {
    pthread_key_create(&chan_key, threadEnds);
}

static IsoChan *openChan(IsoSlot *s, uint64_t gen, RAI_Error *err, int *died) {
    pthread_once(&chan_once, makeKey);
    pthread_setspecific(chan_key, (void *)1);
    int sv[2] = {-1, -1};
    int c2h = -1, h2c = -1, ring = -1;
    IsoChan *c = calloc(1, sizeof(*c));
    if (c == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0 ||
        (c2h = IsoShm_CreateArena("redisai-c2h", ISO_ARENA_SIZE)) < 0 ||
        (h2c = IsoShm_CreateArena("redisai-h2c", ISO_ARENA_SIZE)) < 0 ||
        (use_ring && (ring = IsoRing_Create()) < 0)) {
        Error_SetFmt(err, "ERR cannot open a channel to the %s backend host: %s",
                     Backend_KindName(s->kind), strerror(errno));
        goto fail;
    }
    c->slot = s;
    c->generation = gen;
    IsoRing_Plain(&c->ring, sv[0]);
    char rwhy[160];
    if (ring >= 0 && !IsoRing_Attach(&c->ring, sv[0], ring, 0, rwhy, sizeof(rwhy))) {
        Error_SetFmt(err, "ERR cannot map a channel's ring: %s", rwhy);
        goto fail;
    }
    c->len = ISO_ARENA_SIZE;
    c->c2h = IsoShm_Map(c2h, c->len, 1);
    c->h2c = IsoShm_Map(h2c, c->len, 0);
    if (c->h2c && (c->h2c_view = viewNew(c->h2c, c->len)) == NULL) errno = ENOMEM;
    if (c->c2h == NULL || c->h2c_view == NULL) {
        Error_SetFmt(err, "ERR cannot map a channel's arenas: %s", strerror(errno));
        goto fail;
    }
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U64(&b, __atomic_add_fetch(&next_channel_id, 1, __ATOMIC_RELAXED));
    int fds[4] = {sv[1], c2h, h2c, ring};
    IsoMsg m;
    int rc = IsoControl_Request(s, ISO_MSG_OPEN_CHANNEL, &b, fds, ring >= 0 ? 4 : 3,
                                ISO_CHANNEL_OPEN_TIMEOUT_MS, &m);
    IsoBuf_Free(&b);
    close(sv[1]);
    close(c2h);
    close(h2c);
    if (ring >= 0) close(ring);
    sv[1] = c2h = h2c = ring = -1;
    if (rc != 1) {
        *died = 1;
        if (rc == 0)
            IsoControl_KillWithReason(s, gen, "killed: a channel did not open in time",
                                      "killed_protocol");
        goto fail_quiet;
    }
    int ok = m.h.type == ISO_MSG_CHANNEL_OK;
    if (m.h.type == ISO_MSG_ERROR) {
        Iso_ErrorText(&m, err);
        IsoMsg_Free(&m);
        goto fail_quiet;
    }
    IsoMsg_Free(&m);
    if (!ok) {
        *died = 1;
        IsoControl_KillWithReason(s, gen, "killed: protocol error: OPEN_CHANNEL refused",
                                  "killed_protocol");
        goto fail_quiet;
    }
    pthread_mutex_lock(&s->mu);
    s->channels++;
    c->next_in_slot = s->chans;
    s->chans = c;
    if (s->generation != gen) shutdown(c->ring.sock, SHUT_RDWR); /* died meanwhile */
    pthread_mutex_unlock(&s->mu);
    return c;

fail:
    if (sv[1] >= 0) close(sv[1]);
    if (c2h >= 0) close(c2h);
    if (h2c >= 0) close(h2c);
    if (ring >= 0) close(ring);
fail_quiet:
    if (c) {
        IsoRing_Detach(&c->ring);
        if (sv[0] >= 0) close(sv[0]);
        IsoShm_Unmap(c->c2h, c->len);
        if (c->h2c_view) {
            viewUnref(c->h2c_view);
        } else {
            IsoShm_Unmap(c->h2c, c->len);
        }
        free(c);
    }
    return NULL;
}

IsoChan *IsoChan_Current(IsoSlot *s) {
    return tl_chan[s->index];
}

IsoChan *IsoChan_Get(IsoSlot *s, uint64_t gen, RAI_Error *err, int *died) {
    IsoChan *c = tl_chan[s->index];
    if (c && c->slot == s && c->generation == gen) return c;
    if (c && c->depth > 0) {
        /* The host died under a nested run: its outer run will report it. */
        *died = 1;
        return NULL;
    }
    /* Runs still in flight on the old host's channel are answered with its
     * exit error before the channel goes. */
    if (c && c->npending && retire_runs) retire_runs(c);
    closeChan(c);
    tl_chan[s->index] = openChan(s, gen, err, died);
    return tl_chan[s->index];
}

void IsoChan_Drop(IsoSlot *s) {
    IsoChan *c = tl_chan[s->index];
    if (c && c->depth == 0 && c->npending == 0) {
        closeChan(c);
        tl_chan[s->index] = NULL;
    }
}

/* The lowest free part, so that a lone client's runs reuse the same part
 * of each arena, warm in the caches, rather than going round all of them:
 * ids only need to be distinct and increasing, so the next id of that part
 * is taken. */
uint64_t IsoChan_NextId(IsoChan *c) {
    for (uint64_t k = 0; k < ISO_ARENA_PARTS; k++) {
        if ((c->busy & (1u << k)) || partPinned(c, (int)k)) continue;
        uint64_t id = c->next_id + 1;
        id += (k + ISO_ARENA_PARTS - id % ISO_ARENA_PARTS) % ISO_ARENA_PARTS;
        c->next_id = id;
        c->busy |= 1u << k;
        return id & ~ISO_HOST_ID_BIT;
    }
    return 0;
}

void IsoChan_Answered(IsoChan *c, uint64_t id) {
    c->busy &= ~(1u << (id % ISO_ARENA_PARTS));
}

/* --- tensors out --------------------------------------------------------------------- */

static size_t alignUp(size_t n) {
    return (n + ISO_TENSOR_ALIGN - 1) & ~(size_t)(ISO_TENSOR_ALIGN - 1);
}

/* Bytes a tensor takes on the wire: STRING adds its offsets in front. */
static size_t wireBytes(RAI_Tensor *t, size_t *n) {
    const RAI_HostApi *api = Iso_Api();
    *n = api->tensor_length(t);
    size_t nb = api->tensor_byte_size(t);
    if (api->tensor_dtype(t).code == RAI_DTYPE_STRING) nb += *n * sizeof(uint64_t);
    return nb;
}

/* The offsets of a STRING tensor, relative to its data. */
static uint64_t *stringOffsets(RAI_Tensor *t, size_t n) {
    const RAI_HostApi *api = Iso_Api();
    uint64_t *off = malloc((n ? n : 1) * sizeof(uint64_t));
    const char *base = api->tensor_data(t);
    for (size_t i = 0; off && i < n; i++) {
        size_t len;
        off[i] = (uint64_t)(api->tensor_string_at(t, i, &len) - base);
    }
    return off;
}

/* Places tensors: into the c2h arena when allowed, fitting and at most
 * ISO_ARENA_TENSOR_MAX, else into one sealed region (*region, -1 when
 * none). Returns 0, or -1 with errno. */
int IsoChan_Place(IsoChan *c, uint64_t id, int use_arena, RAI_Tensor *const *ts, size_t n,
                  IsoTensorDesc *descs, int *region) {
    const RAI_HostApi *api = Iso_Api();
    /* Only id's part: the host may still read the inputs of the runs in
     * flight before it from theirs. */
    size_t base, part;
    Iso_ArenaPart(id, c->len, &base, &part);
    size_t arena = base, end = base + part, rlen = 0;
    *region = -1;
    for (size_t i = 0; i < n; i++) {
        size_t elems;
        size_t nb = wireBytes(ts[i], &elems);
        RAI_DType dt = api->tensor_dtype(ts[i]);
        IsoTensorDesc *d = &descs[i];
        int ndims = api->tensor_ndims(ts[i]);
        if (ndims < 0 || ndims > ISO_DIMS_MAX) {
            errno = E2BIG;
            return -1;
        }
        IsoTensorDesc_Head(d, dt.code, dt.bits, (uint32_t)ndims, nb);
        memcpy(d->dims, api->tensor_dims(ts[i]), sizeof(int64_t) * d->ndims);
        size_t at = alignUp(arena);
        if (use_arena && nb <= ISO_ARENA_TENSOR_MAX && at <= end && nb <= end - at) {
            d->region = 0;
            d->offset = at;
            arena = at + nb;
        } else {
            d->region = 1;
            d->offset = alignUp(rlen);
            rlen = d->offset + nb;
        }
    }
    if (rlen > 0) {
        *region = IsoShm_CreateRegion("redisai-in", rlen);
        if (*region < 0) return -1;
    }
    for (size_t i = 0; i < n; i++) {
        IsoTensorDesc *d = &descs[i];
        RAI_DType dt = api->tensor_dtype(ts[i]);
        const char *data = api->tensor_data(ts[i]);
        size_t body = api->tensor_byte_size(ts[i]), head = 0;
        uint64_t *off = NULL;
        if (dt.code == RAI_DTYPE_STRING) {
            size_t elems = api->tensor_length(ts[i]);
            off = stringOffsets(ts[i], elems);
            if (off == NULL) goto fail;
            head = elems * sizeof(uint64_t);
        }
        if (d->region == 0) {
            if (head) memcpy(c->c2h + d->offset, off, head);
            if (body) memcpy(c->c2h + d->offset + head, data, body);
        } else if ((head && IsoShm_Write(*region, off, head, d->offset) != 0) ||
                   (body && IsoShm_Write(*region, data, body, d->offset + head) != 0)) {
            free(off);
            goto fail;
        }
        free(off);
    }
    if (*region >= 0 && IsoShm_Freeze(*region) != 0) goto fail;
    return 0;
fail:
    if (*region >= 0) close(*region);
    *region = -1;
    return -1;
}

/* --- tensors in ------------------------------------------------------------------------ */

static int dtypeOk(uint8_t code, uint8_t bits) {
    int bits_ok = bits == 8 || bits == 16 || bits == 32 || bits == 64;
    switch (code) {
    case RAI_DTYPE_INT:
    case RAI_DTYPE_UINT:
    case RAI_DTYPE_FLOAT:
    case RAI_DTYPE_BFLOAT:
    case RAI_DTYPE_BOOL:
        return bits_ok;
    case RAI_DTYPE_STRING:
        return bits == 8;
    default:
        return 0;
    }
}

/* A sealed region from the host, mapped once per message. The message
 * holds a reference while it is decoded and each output adopted from the
 * region one more; the last one unmaps it, on whatever thread releases
 * that tensor (the main thread, after the reply or the keyspace copy). */
typedef struct RegionRef {
    void *map;
    size_t len;
    int refs;
} RegionRef;

static void regionUnref(void *p) {
    RegionRef *r = p;
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    IsoShm_Unmap(r->map, r->len);
    free(r);
}

typedef struct Regions {
    RegionRef *ref[ISO_MAX_FDS];
} Regions;

static void unmapRegions(Regions *r) {
    for (int k = 0; k < ISO_MAX_FDS; k++) {
        if (r->ref[k]) regionUnref(r->ref[k]);
    }
}

/* One tensor from the host, copied into the core's memory after its
 * descriptor was checked against its region. NULL with why on anything
 * malformed (a protocol error). */
/* What a descriptor says must hold together before anything is read: a
 * dtype we store, dims whose product does not overflow, and (but for
 * STRING, whose bytes hold its offsets too) exactly that many elements'
 * bytes. 1 with *n the element count, or 0 with why. */
static int checkDesc(const IsoTensorDesc *d, size_t *n, char *why, size_t wl) {
    if (!dtypeOk(d->code, d->bits)) {
        snprintf(why, wl, "tensor of dtype (%u, %u)", d->code, d->bits);
        return 0;
    }
    for (uint32_t i = 0; i < d->ndims; i++) {
        if (d->dims[i] < 0) {
            snprintf(why, wl, "negative dimension");
            return 0;
        }
    }
    if (!Tensor_CheckedLength(d->dims, (int)d->ndims, n)) {
        snprintf(why, wl, "tensor dims whose product overflows");
        return 0;
    }
    if (d->code == RAI_DTYPE_STRING) {
        if (*n > d->nbytes / sizeof(uint64_t)) {
            snprintf(why, wl, "STRING tensor shorter than its offsets");
            return 0;
        }
        return 1;
    }
    size_t esz = d->bits / 8;
    if (*n > 0 && (*n > SIZE_MAX / esz || *n * esz != d->nbytes)) {
        snprintf(why, wl, "tensor dims give another size than its %llu bytes",
                 (unsigned long long)d->nbytes);
        return 0;
    }
    if (*n == 0 && d->nbytes != 0) {
        snprintf(why, wl, "empty tensor with %llu bytes", (unsigned long long)d->nbytes);
        return 0;
    }
    return 1;
}

/* Where a tensor's bytes lie: the channel's h2c arena (region 0) or a
 * sealed region sent with the message, mapped once per message. The bytes
 * [offset, +nbytes) must lie inside it, aligned. The start, or NULL with why. */
static const unsigned char *bytesOf(IsoChan *c, IsoMsg *m, Regions *rg, const IsoTensorDesc *d,
                                    char *why, size_t wl) {
    const unsigned char *base;
    size_t len;
    if (d->region == 0) {
        base = c->h2c;
        len = c->len;
    } else {
        int k = d->region - 1;
        if (k >= m->nfds) {
            snprintf(why, wl, "tensor in region %u that was not sent", d->region);
            return NULL;
        }
        if (rg->ref[k] == NULL) {
            size_t size;
            if (!IsoShm_Check(m->fds[k], F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, 0, 0, &size,
                              why, wl))
                return NULL;
            RegionRef *ref = calloc(1, sizeof(*ref));
            if (ref == NULL) {
                snprintf(why, wl, "out of memory");
                return NULL;
            }
            ref->map = size ? IsoShm_Map(m->fds[k], size, 0) : NULL;
            if (size && ref->map == NULL) {
                snprintf(why, wl, "cannot map a region: %s", strerror(errno));
                free(ref);
                return NULL;
            }
            ref->len = size;
            ref->refs = 1;
            rg->ref[k] = ref;
        }
        base = rg->ref[k]->map;
        len = rg->ref[k]->len;
    }
    if (d->offset % ISO_TENSOR_ALIGN || d->offset > len || d->nbytes > len - d->offset) {
        snprintf(why, wl, "tensor bytes [%llu, +%llu) outside its region of %zu",
                 (unsigned long long)d->offset, (unsigned long long)d->nbytes, len);
        return NULL;
    }
    return base + d->offset;
}

/* A STRING tensor of n elements from src: copied, then the copy checked
 * (the host cannot change it after): its elements must be where its
 * offsets say. NULL with why. */
static RAI_Tensor *stringsIn(const IsoTensorDesc *d, size_t n, const unsigned char *src,
                             char *why, size_t wl) {
    size_t head = n * sizeof(uint64_t), body = d->nbytes - head;
    if (n == 0) {
        if (d->nbytes == 0) return Tensor_NewStrings(d->dims, (int)d->ndims, NULL, NULL);
        snprintf(why, wl, "empty STRING tensor with bytes");
        return NULL;
    }
    uint64_t *wire = malloc(head ? head : 1);
    char *data = RedisModule_Alloc(body ? body : 1);
    memcpy(wire, src, head);
    memcpy(data, src + head, body);
    uint64_t *offsets = NULL;
    int ok = Tensor_StringOffsets(data, body, n, &offsets) != 0;
    for (size_t i = 0; ok && i < n; i++) ok = offsets[i] == wire[i];
    free(wire);
    if (!ok) {
        RedisModule_Free(data);
        if (offsets) RedisModule_Free(offsets);
        snprintf(why, wl, "STRING tensor whose offsets are not its elements");
        return NULL;
    }
    RAI_DType dt = {.code = d->code, .bits = d->bits};
    return Tensor_NewOwned(dt, d->dims, (int)d->ndims, data, body, offsets);
}

/* Outputs used in place: a run's numeric output of at least
 * ISO_IN_PLACE_MIN bytes in the h2c arena is not copied but adopted, as a
 * sealed region's, for as long as the request holds it (a DAG's next op,
 * the reply; Tensor_ForKeyspace copies it into Redis's memory if it is
 * stored under a key). It pins its part: no request is sent with that part
 * (IsoChan_NextId) until the tensor's release unpins it, so the host never
 * writes it meanwhile. Only at depth 0 (a nested run's outputs go back to
 * the host at once), only in the answer's own part, and only while fewer
 * than ISO_ARENA_PINS_MAX parts are pinned, so that the pipeline always
 * finds a part; else copied. A host that broke the protocol and wrote a
 * pinned part anyway could change the numbers a reply reads, never what
 * the core reads to find them: STRING tensors, whose offsets are checked
 * once, are always copied. 1 when src may be used in place. */
static int inPlace(IsoChan *c, const IsoMsg *m, const IsoTensorDesc *d, int *part) {
    if (c->depth != 0) return 0;
    size_t base, plen;
    Iso_ArenaPart(m->h.id, c->len, &base, &plen);
    if (d->offset < base || d->offset - base > plen || d->nbytes > plen - (d->offset - base))
        return 0;
    int k = (int)(m->h.id % ISO_ARENA_PARTS), pinned = 0;
    if (partPinned(c, k)) {
        *part = k;
        return 1;
    }
    for (int j = 0; j < ISO_ARENA_PARTS; j++) pinned += partPinned(c, j);
    if (pinned >= ISO_ARENA_PINS_MAX) return 0;
    *part = k;
    return 1;
}

/* src used in place by a new tensor, whose release drops what the caller
 * took for it (release(ctx)), now if no tensor could be made. */
static RAI_Tensor *adopted(RAI_DType dt, const IsoTensorDesc *d, const unsigned char *src,
                           void (*release)(void *), void *ctx, char *why, size_t wl) {
    RAI_Tensor *t =
        Tensor_NewAdopted(dt, d->dims, (int)d->ndims, (void *)src, d->nbytes, release, ctx);
    if (t == NULL) {
        release(ctx);
        snprintf(why, wl, "out of memory");
    }
    return t;
}

/* One tensor from the host. A numeric tensor in a sealed region is adopted
 * when `adopt` (a run's outputs): used in place, without a copy, for as
 * long as the request holds it (a DAG's next op, the reply), since the
 * seals mean nobody can write those bytes any more; Tensor_ForKeyspace
 * copies it into Redis's memory if it is stored under a key. In the arena,
 * see inPlace; anything else is copied now. */
static RAI_Tensor *tensorIn(IsoChan *c, IsoMsg *m, Regions *rg, const IsoTensorDesc *d,
                            int adopt, char *why, size_t wl) {
    size_t n;
    if (!checkDesc(d, &n, why, wl)) return NULL;
    const unsigned char *src = bytesOf(c, m, rg, d, why, wl);
    if (src == NULL) return NULL;
    if (d->code == RAI_DTYPE_STRING) return stringsIn(d, n, src, why, wl);
    RAI_DType dt = {.code = d->code, .bits = d->bits};
    if (adopt && d->region != 0 && d->nbytes > 0) {
        RegionRef *ref = rg->ref[d->region - 1];
        __atomic_add_fetch(&ref->refs, 1, __ATOMIC_ACQ_REL);
        return adopted(dt, d, src, regionUnref, ref, why, wl);
    }
    /* An output inPlace may take, counted either way. */
    int large = adopt && d->region == 0 && d->nbytes >= ISO_IN_PLACE_MIN;
    int part;
    if (large && inPlace(c, m, d, &part)) {
        ArenaPin *pin = &c->h2c_view->pin[part];
        __atomic_add_fetch(&c->h2c_view->refs, 1, __ATOMIC_ACQ_REL);
        __atomic_add_fetch(&pin->count, 1, __ATOMIC_ACQ_REL);
        RAI_Tensor *t = adopted(dt, d, src, unpin, pin, why, wl);
        if (t) __atomic_add_fetch(&c->slot->outputs_in_place, 1, __ATOMIC_RELAXED);
        return t;
    }
    RAI_Tensor *t = Tensor_New(dt, d->dims, (int)d->ndims, 0);
    if (t && d->nbytes) memcpy(Iso_Api()->tensor_data(t), src, d->nbytes);
    if (t == NULL) snprintf(why, wl, "out of memory");
    if (t && large) __atomic_add_fetch(&c->slot->outputs_copied, 1, __ATOMIC_RELAXED);
    return t;
}

/* Decodes `u32 n + n descriptors` and takes each tensor in (tensorIn). 1,
 * or 0 with why. */
static int tensorsIn(IsoChan *c, IsoMsg *m, IsoReader *r, uint32_t expect, int adopt,
                     RAI_Tensor ***out, uint32_t *count, char *why, size_t wl) {
    uint32_t n = 0;
    IsoReader_Count(r, &n, ISO_TENSORS_MAX, 24);
    if (r->why) {
        snprintf(why, wl, "%s", r->why);
        return 0;
    }
    if (expect != UINT32_MAX && n != expect) {
        snprintf(why, wl, "%u tensors where %u were asked for", n, expect);
        return 0;
    }
    IsoTensorDesc *descs = calloc(n ? n : 1, sizeof(*descs));
    RAI_Tensor **ts = calloc(n ? n : 1, sizeof(*ts));
    int ok = descs && ts;
    for (uint32_t i = 0; ok && i < n; i++) ok = IsoReader_Tensor(r, &descs[i]);
    if (!ok) snprintf(why, wl, "%s", r->why ? r->why : "out of memory");
    Regions rg;
    memset(&rg, 0, sizeof(rg));
    for (uint32_t i = 0; ok && i < n; i++) {
        ts[i] = tensorIn(c, m, &rg, &descs[i], adopt, why, wl);
        ok = ts[i] != NULL;
    }
    unmapRegions(&rg);
    free(descs);
    if (!ok) {
        for (uint32_t i = 0; ts && i < n; i++) {
            if (ts[i]) Tensor_Release(ts[i]);
        }
        free(ts);
        return 0;
    }
    *out = ts;
    *count = n;
    return 1;
}

/* --- callbacks ------------------------------------------------------------------------- */

static void encodeReply(IsoBuf *b, const RAI_CallReply *r, int depth) {
    if (depth >= 32) {
        IsoBuf_U8(b, RAI_REPLY_ERROR);
        IsoBuf_CStr(b, "ERR reply nested too deep for an isolated backend");
        return;
    }
    IsoBuf_U8(b, (uint8_t)r->type);
    switch (r->type) {
    case RAI_REPLY_STRING:
    case RAI_REPLY_ERROR:
        IsoBuf_Str(b, r->str ? r->str : "", r->str ? r->len : 0);
        break;
    case RAI_REPLY_INTEGER:
        IsoBuf_I64(b, r->integer);
        break;
    case RAI_REPLY_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &r->dbl, sizeof(bits));
        IsoBuf_U64(b, bits);
        break;
    }
    case RAI_REPLY_ARRAY:
        IsoBuf_U32(b, (uint32_t)r->nelems);
        for (size_t i = 0; i < r->nelems; i++) encodeReply(b, &r->elems[i], depth + 1);
        break;
    default:
        break;
    }
}

static int serveRedisCall(IsoChan *c, IsoMsg *m, char *why, size_t wl) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    char *cmd = NULL;
    uint32_t n = 0;
    IsoReader_StrDup(&r, &cmd, NULL, ISO_NAME_MAX);
    /* As many arguments as the bytes carry (each at least its u32 length):
     * a script may pass more than any fixed cap, as it may in-process. */
    IsoReader_Count(&r, &n, UINT32_MAX, 4);
    const char **args = calloc(n ? n : 1, sizeof(char *));
    size_t *lens = calloc(n ? n : 1, sizeof(size_t));
    for (uint32_t i = 0; args && lens && i < n; i++)
        IsoReader_StrView(&r, &args[i], &lens[i], ISO_BULK_MAX);
    int ok = args && lens && IsoReader_Done(&r);
    if (!ok) {
        snprintf(why, wl, "CB_REDIS_CALL: %s", r.why ? r.why : "out of memory");
    } else {
        const RAI_HostApi *api = Iso_Api();
        RAI_CallReply *reply = api->redis_call(cmd, args, lens, n);
        IsoBuf b;
        IsoBuf_Init(&b);
        encodeReply(&b, reply, 0);
        api->call_reply_free(reply);
        if (b.oom) {
            IsoRing_SendError(&c->ring, m->h.id, "ERR out of memory encoding a reply");
        } else {
            IsoRing_Send(&c->ring, ISO_MSG_CB_REDIS_REPLY, m->h.id, b.data, b.len, NULL, 0);
        }
        IsoBuf_Free(&b);
    }
    free(cmd);
    free(args);
    free(lens);
    return ok;
}

static void releaseAll(RAI_Tensor **ts, size_t n) {
    for (size_t i = 0; ts && i < n; i++) {
        if (ts[i]) Tensor_Release(ts[i]);
    }
    free(ts);
}

static int serveModelExecute(IsoChan *c, IsoMsg *m, char *why, size_t wl) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    const char *key;
    size_t key_len;
    uint32_t nin = 0, nout = 0;
    RAI_Tensor **ins = NULL;
    IsoReader_StrView(&r, &key, &key_len, ISO_NAME_MAX);
    if (!tensorsIn(c, m, &r, UINT32_MAX, 0, &ins, &nin, why, wl)) return 0;
    IsoReader_U32(&r, &nout);
    if (!IsoReader_Done(&r) || nout > ISO_TENSORS_MAX) {
        snprintf(why, wl, "CB_MODEL_EXECUTE: %s", r.why ? r.why : "too many outputs");
        releaseAll(ins, nin);
        return 0;
    }
    RAI_Tensor **outs = calloc(nout ? nout : 1, sizeof(*outs));
    RAI_Error e;
    Error_Init(&e);
    c->depth++;
    int rc = outs ? Iso_Api()->model_execute(key, key_len, ins, nin, outs, nout, &e) : -1;
    c->depth--;
    if (outs == NULL) Error_Set(&e, RAI_ERR_OOM);
    releaseAll(ins, nin);
    if (rc != 0) {
        IsoRing_SendError(&c->ring, m->h.id, Error_Message(&e));
    } else {
        IsoTensorDesc *descs = malloc((nout ? nout : 1) * sizeof(*descs));
        int region = -1;
        if (descs == NULL || IsoChan_Place(c, m->h.id, 0, outs, nout, descs, &region) != 0) {
            IsoRing_SendError(&c->ring, m->h.id, "ERR cannot place model_execute outputs");
        } else {
            IsoBuf b;
            IsoBuf_Init(&b);
            IsoBuf_U32(&b, nout);
            for (uint32_t i = 0; i < nout; i++) IsoBuf_Tensor(&b, &descs[i]);
            IsoRing_Send(&c->ring, ISO_MSG_CB_MODEL_REPLY, m->h.id, b.data, b.len, &region,
                         region >= 0 ? 1 : 0);
            IsoBuf_Free(&b);
        }
        if (region >= 0) close(region);
        free(descs);
    }
    Error_Clear(&e);
    releaseAll(outs, nout);
    return 1;
}

/* --- one run ----------------------------------------------------------------------------- */

long long IsoChan_RunTimeoutMs(IsoSlot *s) {
    /* ONNX's own watchdog answers first with ORT's text and keeps the host. */
    return rai_config.model_execution_timeout + (s->kind == RAI_BACKEND_ONNX ? 1000 : 0);
}

/* See iso_chan.h. A host's callback is served here, on the run's own
 * thread, and the time it takes does not count toward the run's deadline. */
ChanOutcome IsoChan_OnMessage(IsoChan *c, IsoMsg *m, uint64_t id, uint32_t nout,
                              RAI_Tensor **outputs, int *result, long long *deadline,
                              RAI_Error *err, char *why, size_t wl) {
    long long paused = Iso_NowMs();
    if (m->h.type == ISO_MSG_CB_REDIS_CALL && (m->h.id & ISO_HOST_ID_BIT)) {
        int ok = serveRedisCall(c, m, why, wl);
        *deadline += Iso_NowMs() - paused;
        return ok ? CHAN_MORE : CHAN_BAD;
    }
    if (m->h.type == ISO_MSG_CB_MODEL_EXECUTE && (m->h.id & ISO_HOST_ID_BIT)) {
        int ok = serveModelExecute(c, m, why, wl);
        *deadline += Iso_NowMs() - paused;
        return ok ? CHAN_MORE : CHAN_BAD;
    }
    if (m->h.id != id) {
        snprintf(why, wl, "%s for request %llu while %llu is outstanding",
                 Iso_MsgTypeName(m->h.type), (unsigned long long)m->h.id, (unsigned long long)id);
        return CHAN_BAD;
    }
    if (m->h.type == ISO_MSG_ERROR) {
        Iso_ErrorText(m, err);
        return CHAN_DONE;
    }
    if (m->h.type != ISO_MSG_RUN_OK) {
        snprintf(why, wl, "%s on a channel", Iso_MsgTypeName(m->h.type));
        return CHAN_BAD;
    }
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    RAI_Tensor **outs = NULL;
    uint32_t n = 0;
    if (!tensorsIn(c, m, &r, nout, 1, &outs, &n, why, wl) || !IsoReader_Done(&r)) {
        if (outs) releaseAll(outs, n);
        if (why[0] == '\0') snprintf(why, wl, "RUN_OK: %s", r.why);
        return CHAN_BAD;
    }
    memcpy(outputs, outs, sizeof(*outs) * n);
    free(outs);
    *result = 0;
    return CHAN_DONE;
}

/* Whether h may run in the current host (slot->mu held): 0 yes; -1 never
 * before `until` (it failed to re-create, is quarantined, or no host will be
 * ready by then), after err when err is given; 1 not yet. */
static int runnable(IsoHandle *h, const char *key, long long until, long long now,
                    RAI_Error *err) {
    IsoSlot *s = h->slot;
    const char *kind = Backend_KindName(s->kind);
    if (h->state == ISO_H_FAILED) {
        if (err)
            Error_SetFmt(err, "ERR %s backend could not re-create %s after a restart: %s", kind,
                         key, h->failed ? h->failed : "");
        return -1;
    }
    if (h->state == ISO_H_QUARANTINED) {
        if (err)
            Error_SetFmt(err, "ERR %s backend process exited (%s) while creating %s; the model "
                         "is disabled until stored again", kind, s->last_exit, key);
        return -1;
    }
    if (s->state == ISO_READY && h->state == ISO_H_LIVE && h->generation == s->generation)
        return 0;
    if (now >= until || (s->state == ISO_DEAD && s->restart_at_ms > until)) {
        if (err) Error_SetFmt(err, RAI_ERR_HOST_RESTARTING_FMT, kind, s->last_exit);
        return -1;
    }
    return 1;
}

/* Waits (slot->mu held) until h may run in the current host: 0, or -1 after
 * err. A run-queue worker never waits here: its run was parked until
 * runnable, or until it gave up (core/run_gate.h), so one that is not
 * runnable now (the host died since, or a script's nested run) fails at
 * once with the restart's error. */
static int waitRunnable(IsoHandle *h, const char *key, RAI_Error *err) {
    IsoSlot *s = h->slot;
    long long now = Iso_NowMs();
    long long until = RunGate_Parks() ? now : now + rai_config.model_execution_timeout;
    for (;;) {
        int rc = runnable(h, key, until, now, err);
        if (rc <= 0) return rc;
        Iso_CondWaitMs(s, until - now < 100 ? until - now : 100);
        now = Iso_NowMs();
    }
}

long long IsoChan_NotBefore(IsoHandle *h, long long since_ms, long long now_ms) {
    IsoSlot *s = h->slot;
    pthread_mutex_lock(&s->mu);
    long long until = since_ms + rai_config.model_execution_timeout;
    int rc = runnable(h, h->key, until, now_ms, NULL);
    long long at = 0;
    if (rc == 1) {
        /* A host or handle that becomes runnable wakes the queues
         * (RunGate_Wake): this is a fallback, and the give-up time. */
        at = now_ms + 100;
        if (s->state == ISO_DEAD && s->restart_at_ms > now_ms && s->restart_at_ms < at)
            at = s->restart_at_ms;
        if (at > until) at = until;
        if (at <= now_ms) at = now_ms + 1;
    }
    pthread_mutex_unlock(&s->mu);
    return at;
}

const char *IsoChan_RunKey(IsoHandle *h, const RAI_RunInfo *info, char *buf, size_t bl) {
    if (info && info->size >= offsetof(RAI_RunInfo, key_len) + sizeof(size_t) && info->key &&
        info->key_len) {
        snprintf(buf, bl, "%.*s", (int)info->key_len, info->key);
        return buf;
    }
    return h->key;
}

/* Common start of a run: runnable, a channel. NULL after err. */
IsoChan *IsoChan_BeginRun(IsoHandle *h, const char *key, uint64_t *gen, RAI_Error *err) {
    IsoSlot *s = h->slot;
    pthread_mutex_lock(&s->mu);
    if (waitRunnable(h, key, err) != 0) {
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    *gen = s->generation;
    s->inflight++;
    pthread_mutex_unlock(&s->mu);
    int died = 0;
    IsoChan *c = IsoChan_Get(s, *gen, err, &died);
    if (c == NULL && died) {
        pthread_mutex_lock(&s->mu);
        IsoControl_ExitError(s, *gen, "running", key, err);
        pthread_mutex_unlock(&s->mu);
    }
    if (c == NULL) {
        pthread_mutex_lock(&s->mu);
        s->inflight--;
        pthread_mutex_unlock(&s->mu);
    }
    return c;
}

void IsoChan_EndRun(IsoSlot *s, int rc) {
    pthread_mutex_lock(&s->mu);
    s->inflight--;
    if (rc == 0) s->failures = 0; /* a run answered: the host is healthy */
    pthread_mutex_unlock(&s->mu);
}

static void placeError(IsoSlot *s, RAI_Error *err) {
    if (errno == E2BIG) {
        Error_SetFmt(err, "ERR an isolated %s backend takes tensors of at most %d dimensions",
                     Backend_KindName(s->kind), ISO_DIMS_MAX);
    } else {
        Error_SetFmt(err, "ERR cannot place inputs for the %s backend host: %s",
                     Backend_KindName(s->kind), strerror(errno));
    }
}

static void encodeTensors(IsoBuf *b, const IsoTensorDesc *descs, size_t n) {
    IsoBuf_U32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) IsoBuf_Tensor(b, &descs[i]);
}

int IsoChan_EncodeRun(IsoChan *c, uint64_t id, IsoHandle *h, const RAI_RunInfo *info,
                      const char *key, const RAI_ScriptCall *call, RAI_Tensor *const *inputs,
                      size_t ninputs, size_t noutputs, IsoBuf *b, int *region, RAI_Error *err) {
    IsoTensorDesc *descs = malloc((ninputs ? ninputs : 1) * sizeof(*descs));
    *region = -1;
    if (descs == NULL || IsoChan_Place(c, id, c->depth == 0, inputs, ninputs, descs, region) != 0) {
        placeError(h->slot, err);
        free(descs);
        return -1;
    }
    IsoBuf_U64(b, h->id);
    IsoBuf_U32(b, (uint32_t)(info ? info->worker_index : -1));
    IsoBuf_CStr(b, key);
    if (call) {
        IsoBuf_CStr(b, call->function);
        IsoBuf_U8(b, (uint8_t)(call->entry_point != 0));
    }
    encodeTensors(b, descs, ninputs);
    if (call) {
        IsoBuf_U32(b, (uint32_t)call->nkeys);
        for (size_t i = 0; i < call->nkeys; i++) IsoBuf_Str(b, call->keys[i], call->key_lens[i]);
        IsoBuf_U32(b, (uint32_t)call->nargs);
        for (size_t i = 0; i < call->nargs; i++) IsoBuf_Str(b, call->args[i], call->arg_lens[i]);
    }
    IsoBuf_U32(b, (uint32_t)noutputs);
    free(descs);
    return 0;
}

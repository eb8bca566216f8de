/*
 * host_channel.c - one thread per data channel (docs/isolation.md, "The
 * protocol" and "Tensors in shared memory"). A channel carries the runs of
 * one core thread: read a MODEL_RUN, wrap its inputs as borrowed tensors on
 * the core-to-host arena (or a sealed large region), run, place the
 * outputs in the host-to-core arena (or one sealed large region for the
 * reply), answer RUN_OK or ERROR.
 *
 * Not yet: nested requests and callbacks (the call stack), SCRIPT_RUN,
 * STRING tensors, and outputs written in place by tensor_create.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "iso_shm.h"

typedef struct Channel {
    uint64_t id;
    int sock;
    unsigned char *c2h; /* read-only here */
    size_t c2h_len;
    unsigned char *h2c;
    size_t h2c_len;
} Channel;

typedef struct Region {
    void *map;
    size_t len;
} Region;

static size_t alignUp(size_t n) {
    return (n + ISO_TENSOR_ALIGN - 1) & ~(size_t)(ISO_TENSOR_ALIGN - 1);
}

/* Wraps each input descriptor as a borrowed tensor. A descriptor that does
 * not fit its region or its dtype is a protocol error. STRING is refused
 * with an error reply (*refusal), not as malformed. */
static void wrapInputs(Channel *ch, IsoMsg *m, const IsoTensorDesc *descs, uint32_t n,
                       Region *regions, RAI_Tensor **inputs, const char **refusal) {
    for (uint32_t i = 0; i < n; i++) {
        const IsoTensorDesc *d = &descs[i];
        RAI_DType dt = {.code = d->code, .bits = d->bits};
        if (d->code == RAI_DTYPE_STRING) {
            *refusal = "ERR STRING tensors are not supported by isolated backends yet";
            return;
        }
        int ok;
        size_t want = HostTensor_Bytes(dt, d->dims, (int)d->ndims, &ok);
        if (!ok) Host_ProtocolError("input %u: bad dtype (%u, %u) or size", i, d->code, d->bits);
        if (want != d->nbytes)
            Host_ProtocolError("input %u: dims give %zu bytes, descriptor says %llu", i, want,
                               (unsigned long long)d->nbytes);
        if (d->offset % ISO_TENSOR_ALIGN)
            Host_ProtocolError("input %u: offset %llu is not aligned", i,
                               (unsigned long long)d->offset);
        const unsigned char *base;
        size_t len;
        if (d->region == 0) {
            base = ch->c2h;
            len = ch->c2h_len;
        } else {
            int k = d->region - 1;
            if (k >= m->nfds) Host_ProtocolError("input %u: region %u was not sent", i, d->region);
            if (regions[k].map == NULL) {
                char why[160];
                size_t size;
                if (!IsoShm_Check(m->fds[k], F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, 0, 0,
                                  &size, why, sizeof(why)))
                    Host_ProtocolError("input %u: large region: %s", i, why);
                regions[k].map = IsoShm_Map(m->fds[k], size, 0);
                if (regions[k].map == NULL)
                    Host_ProtocolError("input %u: cannot map its region: %s", i, strerror(errno));
                regions[k].len = size;
            }
            base = regions[k].map;
            len = regions[k].len;
        }
        if (d->offset > len || d->nbytes > len - d->offset)
            Host_ProtocolError("input %u: bytes [%llu, +%llu) outside its region of %zu", i,
                               (unsigned long long)d->offset, (unsigned long long)d->nbytes, len);
        inputs[i] = HostTensor_Borrow(dt, d->dims, (int)d->ndims, (void *)(base + d->offset),
                                      d->nbytes);
        if (inputs[i] == NULL) {
            *refusal = "ERR out of memory in the backend host";
            return;
        }
    }
}

/* Places the outputs: the arena when a tensor fits and is at most
 * ISO_ARENA_TENSOR_MAX, else one sealed region for the reply. Returns the
 * region's fd (or -1 when none was needed) in *large; 0, or -1 on failure. */
static int placeOutputs(Channel *ch, RAI_Tensor **outs, size_t n, IsoTensorDesc *descs,
                        int *large) {
    const RAI_HostApi *api = Host_Api();
    size_t arena = 0, region = 0;
    *large = -1;
    for (size_t i = 0; i < n; i++) {
        RAI_DType dt = api->tensor_dtype(outs[i]);
        if (dt.code == RAI_DTYPE_STRING) return -2;
        IsoTensorDesc *d = &descs[i];
        size_t nb = api->tensor_byte_size(outs[i]);
        *d = (IsoTensorDesc){.code = dt.code, .bits = dt.bits, .nbytes = nb,
                             .ndims = (uint32_t)api->tensor_ndims(outs[i])};
        memcpy(d->dims, api->tensor_dims(outs[i]), sizeof(int64_t) * d->ndims);
        size_t at = alignUp(arena);
        if (nb <= ISO_ARENA_TENSOR_MAX && at <= ch->h2c_len && nb <= ch->h2c_len - at) {
            d->region = 0;
            d->offset = at;
            memcpy(ch->h2c + at, api->tensor_data(outs[i]), nb);
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
        if (descs[i].region == 1 &&
            IsoShm_Write(fd, api->tensor_data(outs[i]), descs[i].nbytes, descs[i].offset) != 0) {
            close(fd);
            return -1;
        }
    }
    if (IsoShm_Freeze(fd) != 0) {
        close(fd);
        return -1;
    }
    *large = fd;
    return 0;
}

static void serveRun(Channel *ch, IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t handle;
    uint32_t worker, nin, nout;
    const char *key;
    size_t key_len;
    IsoReader_U64(&r, &handle);
    IsoReader_U32(&r, &worker);
    IsoReader_StrView(&r, &key, &key_len, ISO_NAME_MAX);
    /* 24: the fixed bytes of a tensor descriptor before its dims. */
    IsoReader_Count(&r, &nin, ISO_TENSORS_MAX, 24);
    if (r.why) Host_ProtocolError("MODEL_RUN: %s", r.why);
    IsoTensorDesc *descs = calloc(nin ? nin : 1, sizeof(*descs));
    if (descs == NULL) Host_ProtocolError("MODEL_RUN: out of memory for %u inputs", nin);
    for (uint32_t i = 0; i < nin; i++) IsoReader_Tensor(&r, &descs[i]);
    IsoReader_U32(&r, &nout);
    if (!IsoReader_Done(&r)) Host_ProtocolError("MODEL_RUN: %s", r.why);
    if (nout > ISO_TENSORS_MAX) Host_ProtocolError("MODEL_RUN: %u outputs", nout);

    RAI_Tensor **inputs = calloc(nin ? nin : 1, sizeof(*inputs));
    RAI_Tensor **outputs = calloc(nout ? nout : 1, sizeof(*outputs));
    IsoTensorDesc *odescs = calloc(nout ? nout : 1, sizeof(*odescs));
    Region regions[ISO_MAX_FDS] = {{0}};
    const char *refusal = NULL;
    if (!inputs || !outputs || !odescs) refusal = "ERR out of memory in the backend host";
    void *model = refusal ? NULL : HostModels_Get(handle);
    if (!refusal && model == NULL) refusal = "ERR the backend host has no such model";
    if (!refusal) wrapInputs(ch, m, descs, nin, regions, inputs, &refusal);

    RAI_Error err;
    Error_Init(&err);
    if (refusal) {
        Iso_SendError(ch->sock, m->h.id, refusal);
    } else {
        RAI_RunInfo info = {.size = sizeof(info), .worker_index = (int)worker};
        int rc = host.desc->model_run(model, &info, inputs, nin, outputs, nout, &err);
        int large = -1, placed = -1;
        if (rc == 0) {
            for (uint32_t i = 0; i < nout; i++) {
                if (outputs[i] == NULL) rc = -1;
            }
            if (rc != 0) Error_Set(&err, "ERR the backend returned fewer outputs than asked for");
        }
        if (rc == 0) placed = placeOutputs(ch, outputs, nout, odescs, &large);
        if (rc != 0) {
            Iso_SendError(ch->sock, m->h.id, Error_Message(&err));
        } else if (placed == -2) {
            Iso_SendError(ch->sock, m->h.id,
                          "ERR STRING tensors are not supported by isolated backends yet");
        } else if (placed != 0) {
            char text[160];
            snprintf(text, sizeof(text), "ERR backend host could not place outputs: %s",
                     strerror(errno));
            Iso_SendError(ch->sock, m->h.id, text);
        } else {
            IsoBuf b;
            IsoBuf_Init(&b);
            IsoBuf_U32(&b, nout);
            for (uint32_t i = 0; i < nout; i++) IsoBuf_Tensor(&b, &odescs[i]);
            if (b.oom) {
                Iso_SendError(ch->sock, m->h.id, "ERR out of memory in the backend host");
            } else {
                Iso_Send(ch->sock, ISO_MSG_RUN_OK, m->h.id, b.data, b.len, &large,
                         large >= 0 ? 1 : 0);
            }
            IsoBuf_Free(&b);
        }
        if (large >= 0) close(large);
    }
    Error_Clear(&err);
    for (uint32_t i = 0; i < nout && outputs; i++) {
        if (outputs[i]) Host_Api()->tensor_release(outputs[i]);
    }
    for (uint32_t i = 0; i < nin && inputs; i++) {
        if (inputs[i]) HostTensor_ReturnBorrowed(inputs[i]);
    }
    for (int k = 0; k < ISO_MAX_FDS; k++) IsoShm_Unmap(regions[k].map, regions[k].len);
    free(inputs);
    free(outputs);
    free(odescs);
    free(descs);
}

static void *channelMain(void *arg) {
    Channel *ch = arg;
    for (;;) {
        IsoMsg m;
        char why[256];
        int rc = Iso_Recv(ch->sock, &m, why, sizeof(why));
        if (rc == 0) break; /* the core dropped the channel */
        if (rc == -1) Host_ProtocolError("channel %llu: receive failed: %s",
                                         (unsigned long long)ch->id, strerror(errno));
        if (rc == -2) Host_ProtocolError("channel %llu: %s", (unsigned long long)ch->id, why);
        if (m.h.type != ISO_MSG_MODEL_RUN)
            Host_ProtocolError("channel %llu: %s is not allowed on a channel",
                               (unsigned long long)ch->id, Iso_MsgTypeName(m.h.type));
        serveRun(ch, &m);
        IsoMsg_Free(&m);
    }
    close(ch->sock);
    IsoShm_Unmap(ch->c2h, ch->c2h_len);
    IsoShm_Unmap(ch->h2c, ch->h2c_len);
    free(ch);
    return NULL;
}

int HostChannel_Open(uint64_t channel_id, int sock, int c2h, int h2c, char *why, size_t whylen) {
    Channel *ch = calloc(1, sizeof(*ch));
    size_t c2h_len = 0, h2c_len = 0;
    int ok = ch != NULL;
    if (!ok) snprintf(why, whylen, "out of memory");
    /* Arenas at most 1 GiB: the core makes them ISO_ARENA_SIZE. */
    if (ok) ok = IsoShm_Check(c2h, F_SEAL_SHRINK | F_SEAL_GROW, 4096, 1u << 30, &c2h_len, why, whylen);
    if (ok) ok = IsoShm_Check(h2c, F_SEAL_SHRINK | F_SEAL_GROW, 4096, 1u << 30, &h2c_len, why, whylen);
    if (ok) {
        ch->id = channel_id;
        ch->sock = sock;
        ch->c2h = IsoShm_Map(c2h, c2h_len, 0);
        ch->c2h_len = c2h_len;
        ch->h2c = IsoShm_Map(h2c, h2c_len, 1);
        ch->h2c_len = h2c_len;
        if (!ch->c2h || !ch->h2c) {
            snprintf(why, whylen, "cannot map the arenas: %s", strerror(errno));
            ok = 0;
        }
    }
    close(c2h);
    close(h2c);
    pthread_t tid;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (ok && pthread_create(&tid, &attr, channelMain, ch) != 0) {
        snprintf(why, whylen, "cannot start a channel thread");
        ok = 0;
    }
    pthread_attr_destroy(&attr);
    if (ok) return 0;
    if (ch) {
        IsoShm_Unmap(ch->c2h, ch->c2h_len);
        IsoShm_Unmap(ch->h2c, ch->h2c_len);
        free(ch);
    }
    close(sock);
    return -1;
}

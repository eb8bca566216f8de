/*
 * host_channel.c - one thread per data channel (docs/isolation.md, "The
 * protocol" and "Tensors in shared memory"). A channel carries the runs of
 * one core thread: read a MODEL_RUN or SCRIPT_RUN, wrap its inputs as host
 * tensors over the core-to-host arena or a sealed large region
 * (host_wire.c), run, place the outputs for the core, answer RUN_OK or
 * ERROR. While the backend runs, its calls back into Redis go over the same
 * channel and may bring nested runs, served on this thread (host_calls.c).
 *
 * Not yet: outputs written in place by tensor_create.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolation/host/host.h"
#include "isolation/iso_shm.h"

/* One decoded MODEL_RUN or SCRIPT_RUN. */
typedef struct Request {
    int script;
    const char *what; /* its message name, for protocol errors */
    uint64_t handle;
    uint32_t worker;
    char *key;
    size_t key_len;
    char *function; /* SCRIPT_RUN */
    uint8_t entry_point;
    uint32_t nin;
    IsoTensorDesc *descs;
    uint32_t nkeys, nargs;
    char **keys, **args;
    size_t *key_lens, *arg_lens;
    uint32_t nout;
} Request;

static char **readStrs(IsoReader *r, uint32_t *n, size_t **lens, const char *what) {
    *n = 0;
    IsoReader_Count(r, n, ISO_NAMES_MAX, 4);
    if (r->why) Host_ProtocolError("%s: %s", what, r->why);
    char **v = calloc(*n ? *n : 1, sizeof(char *));
    *lens = calloc(*n ? *n : 1, sizeof(size_t));
    if (v == NULL || *lens == NULL) Host_ProtocolError("%s: out of memory decoding strings", what);
    for (uint32_t i = 0; i < *n; i++) IsoReader_StrDup(r, &v[i], &(*lens)[i], ISO_NAME_MAX);
    return v;
}

static void freeStrs(char **v, size_t *lens, uint32_t n) {
    for (uint32_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
    free(lens);
}

/* MODEL_RUN: u64 handle, u32 worker, str key, u32 n + n descriptors, u32
 * noutputs. SCRIPT_RUN: u64 handle, u32 worker, str key, str function, u8
 * entry point, u32 n + n descriptors, u32 n + n str keys, u32 n + n str
 * args, u32 noutputs. Anything malformed ends the host. */
static void decodeRequest(IsoMsg *m, Request *q) {
    *q = (Request){.script = m->h.type == ISO_MSG_SCRIPT_RUN};
    q->what = Iso_MsgTypeName(m->h.type);
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    IsoReader_U64(&r, &q->handle);
    IsoReader_U32(&r, &q->worker);
    IsoReader_StrDup(&r, &q->key, &q->key_len, ISO_NAME_MAX);
    if (q->script) {
        IsoReader_StrDup(&r, &q->function, NULL, ISO_NAME_MAX);
        IsoReader_U8(&r, &q->entry_point);
    }
    /* 24: the fixed bytes of a tensor descriptor before its dims. */
    IsoReader_Count(&r, &q->nin, ISO_TENSORS_MAX, 24);
    if (r.why) Host_ProtocolError("%s: %s", q->what, r.why);
    q->descs = calloc(q->nin ? q->nin : 1, sizeof(*q->descs));
    if (q->descs == NULL) Host_ProtocolError("%s: out of memory for %u inputs", q->what, q->nin);
    for (uint32_t i = 0; i < q->nin; i++) IsoReader_Tensor(&r, &q->descs[i]);
    if (q->script) {
        q->keys = readStrs(&r, &q->nkeys, &q->key_lens, q->what);
        q->args = readStrs(&r, &q->nargs, &q->arg_lens, q->what);
    }
    IsoReader_U32(&r, &q->nout);
    if (!IsoReader_Done(&r)) Host_ProtocolError("%s: %s", q->what, r.why);
    if (q->nout > ISO_TENSORS_MAX) Host_ProtocolError("%s: %u outputs", q->what, q->nout);
    if (q->entry_point > 1) Host_ProtocolError("%s: entry point flag %u", q->what, q->entry_point);
}

static void freeRequest(Request *q) {
    free(q->key);
    free(q->function);
    free(q->descs);
    freeStrs(q->keys, q->key_lens, q->nkeys);
    freeStrs(q->args, q->arg_lens, q->nargs);
}

/* Calls the backend. Returns its status; the refusal of a missing handle
 * or a handle of the other kind is an error reply, not a protocol error
 * (after a restart a stale handle is the core's race to report). */
static int runBackend(const Request *q, RAI_Tensor **inputs, RAI_Tensor **outputs,
                      RAI_Error *err) {
    int other;
    void *obj = HostHandles_Get(q->handle, q->script ? HOST_HANDLE_SCRIPT : HOST_HANDLE_MODEL,
                                &other);
    if (obj == NULL) {
        if (other) {
            Error_SetFmt(err, "ERR backend host handle %llu is a %s, not a %s",
                         (unsigned long long)q->handle, q->script ? "model" : "script",
                         q->script ? "script" : "model");
        } else {
            Error_SetFmt(err, "ERR the backend host has no such %s",
                         q->script ? "script" : "model");
        }
        return -1;
    }
    RAI_RunInfo info = {
        .size = sizeof(info),
        .worker_index = (int)q->worker,
        .key = q->key,
        .key_len = q->key_len,
    };
    if (!q->script) return host.desc->model_run(obj, &info, inputs, q->nin, outputs, q->nout, err);
    RAI_ScriptCall call = {
        .size = sizeof(call),
        .function = q->function,
        .entry_point = q->entry_point,
        .inputs = inputs,
        .ninputs = q->nin,
        .keys = (const char *const *)q->keys,
        .key_lens = q->key_lens,
        .nkeys = q->nkeys,
        .args = (const char *const *)q->args,
        .arg_lens = q->arg_lens,
        .nargs = q->nargs,
        .noutputs = q->nout,
    };
    return host.desc->script_run(obj, &info, &call, outputs, err);
}

/* Places the outputs and encodes RUN_OK into *b (the large region in
 * *large, -1 when none). Returns 0, or -1 after err. */
static int encodeOutputs(HostChannel *ch, uint64_t id, RAI_Tensor **outputs, uint32_t nout,
                         IsoBuf *b, int *large, RAI_Error *err) {
    IsoTensorDesc *odescs = malloc((nout ? nout : 1) * sizeof(*odescs));
    *large = -1;
    if (odescs == NULL) {
        Error_Set(err, RAI_ERR_HOST_OOM);
        return -1;
    }
    int rc = HostWire_Place(ch, id, outputs, nout, odescs, large);
    if (rc != 0) {
        Error_SetFmt(err, "ERR backend host could not place outputs: %s", strerror(errno));
    } else {
        IsoBuf_U32(b, nout);
        for (uint32_t i = 0; i < nout; i++) IsoBuf_Tensor(b, &odescs[i]);
    }
    free(odescs);
    return rc;
}

void HostChannel_Serve(HostChannel *ch, IsoMsg *m) {
    Request q;
    decodeRequest(m, &q);
    RAI_Tensor **inputs = calloc(q.nin ? q.nin : 1, sizeof(*inputs));
    RAI_Tensor **outputs = calloc(q.nout ? q.nout : 1, sizeof(*outputs));
    HostRegions regions = {.map = {NULL}};
    RAI_Error err;
    Error_Init(&err);
    int rc = inputs && outputs ? 0 : -1;
    if (rc != 0) Error_Set(&err, RAI_ERR_HOST_OOM);
    for (uint32_t i = 0; rc == 0 && i < q.nin; i++) {
        inputs[i] = HostWire_TensorIn(ch, m, &regions, &q.descs[i], 1, "input", i);
        if (inputs[i] == NULL) {
            Error_Set(&err, RAI_ERR_HOST_OOM);
            rc = -1;
        }
    }
    if (rc == 0) {
        HostFrame frame;
        HostFrame_Enter(&frame, ch, m->h.id);
        rc = runBackend(&q, inputs, outputs, &err);
        HostFrame_Leave(&frame);
    }
    for (uint32_t i = 0; rc == 0 && i < q.nout; i++) {
        if (outputs[i] == NULL) {
            Error_Set(&err, "ERR the backend returned fewer outputs than asked for");
            rc = -1;
        }
    }
    IsoBuf b;
    IsoBuf_Init(&b);
    int large = -1;
    if (rc == 0) rc = encodeOutputs(ch, m->h.id, outputs, q.nout, &b, &large, &err);
    /* Before the answer: once the core has it, it writes the next inputs
     * into the arena. Outputs go first, as they may hold their inputs. */
    for (uint32_t i = 0; outputs && i < q.nout; i++) {
        if (outputs[i]) HostTensor_Release(outputs[i]);
    }
    if (inputs) HostWire_KeepArenaInputs(ch, inputs, q.descs, q.nin);
    for (uint32_t i = 0; inputs && i < q.nin; i++) {
        if (inputs[i]) HostTensor_Release(inputs[i]);
    }
    if (rc == 0) {
        HostWire_Reply(ch, ISO_MSG_RUN_OK, m->h.id, &b, &large, large >= 0 ? 1 : 0);
    } else {
        HostWire_SendError(ch, m->h.id, Error_Message(&err));
    }
    if (large >= 0) close(large);
    IsoBuf_Free(&b);
    Error_Clear(&err);
    HostWire_Unmap(&regions);
    free(inputs);
    free(outputs);
    freeRequest(&q);
}

static void *channelMain(void *arg) {
    HostChannel *ch = arg;
    while (!ch->dead) {
        IsoMsg m;
        char why[256];
        int rc = IsoRing_Recv(&ch->ring, &m, 1, why, sizeof(why));
        if (rc == 0) break; /* the core dropped the channel */
        if (rc == -1) Host_ProtocolError("channel %llu: receive failed: %s",
                                         (unsigned long long)ch->id, strerror(errno));
        if (rc == -2) Host_ProtocolError("channel %llu: %s", (unsigned long long)ch->id, why);
        if (m.h.type != ISO_MSG_MODEL_RUN && m.h.type != ISO_MSG_SCRIPT_RUN)
            Host_ProtocolError("channel %llu: %s is not allowed with no request outstanding",
                               (unsigned long long)ch->id, Iso_MsgTypeName(m.h.type));
        HostFrame_CheckCoreId(ch, &m);
        HostChannel_Serve(ch, &m);
        IsoMsg_Free(&m);
    }
    IsoRing_Detach(&ch->ring);
    close(ch->ring.sock);
    close(ch->c2h_fd);
    HostMapping_Release(ch->c2h); /* tensors a backend kept still hold theirs */
    IsoShm_Unmap(ch->h2c, ch->h2c_len);
    free(ch);
    return NULL;
}

int HostChannel_Open(uint64_t channel_id, int sock, int c2h, int h2c, int ring, char *why,
                     size_t whylen) {
    HostChannel *ch = calloc(1, sizeof(*ch));
    size_t c2h_len = 0, h2c_len = 0;
    int ok = ch != NULL, malformed = 0;
    if (!ok) snprintf(why, whylen, "out of memory");
    /* Arenas at most 1 GiB: the core makes them ISO_ARENA_SIZE. */
    if (ok) ok = IsoShm_Check(c2h, F_SEAL_SHRINK | F_SEAL_GROW, 4096, 1u << 30, &c2h_len, why, whylen);
    if (ok) ok = IsoShm_Check(h2c, F_SEAL_SHRINK | F_SEAL_GROW, 4096, 1u << 30, &h2c_len, why, whylen);
    if (ch) IsoRing_Plain(&ch->ring, sock);
    if (ok && ring >= 0) ok = IsoRing_Attach(&ch->ring, sock, ring, 1, why, whylen);
    if (ring >= 0) close(ring);
    malformed = ch != NULL && !ok;
    if (ok) {
        ch->id = channel_id;
        ch->c2h_fd = c2h; /* kept: the arena is mapped again when a view is retired */
        void *view = IsoShm_Map(c2h, c2h_len, 0);
        ch->c2h = view ? HostMapping_New(view, c2h_len) : NULL;
        if (view && ch->c2h == NULL) IsoShm_Unmap(view, c2h_len);
        ch->h2c = IsoShm_Map(h2c, h2c_len, 1);
        ch->h2c_len = h2c_len;
        if (!ch->c2h || !ch->h2c) {
            snprintf(why, whylen, "cannot map the arenas: %s", strerror(errno));
            ok = 0;
        }
    }
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
    close(c2h);
    if (ch) {
        IsoRing_Detach(&ch->ring);
        HostMapping_Release(ch->c2h);
        IsoShm_Unmap(ch->h2c, ch->h2c_len);
        free(ch);
    }
    close(sock);
    return malformed ? -2 : -1;
}

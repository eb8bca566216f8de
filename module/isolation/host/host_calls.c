/*
 * host_calls.c - the channel as a call stack (docs/isolation.md, "The
 * protocol"): the backend's redis_call and model_execute, made on a channel
 * thread while it serves a run, send a CB_* push on that channel and wait
 * for its pop. Meanwhile the core may push a run of its own on the same
 * channel (a script's model_execute of a model of this host): it is served
 * on this thread, recursively, and the wait goes on. The answer must pop
 * the innermost push, the host's own; anything else ends the host.
 *
 * Each thread keeps its stack in frames on its own C stack, linked from a
 * thread-local top: a thread with no frame (a framework's own thread)
 * serves no request, and its callbacks are refused without a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolation/host/host.h"

static uint64_t last_id; /* the host's own request ids, HOST_ID_BIT added */

static int isPop(uint16_t type) {
    return type == ISO_MSG_CB_REDIS_REPLY || type == ISO_MSG_CB_MODEL_REPLY ||
           type == ISO_MSG_ERROR || type == ISO_MSG_RUN_OK;
}

/* Sends the push on the innermost request's channel and waits for its
 * answer: `want` or ERROR, in *answer. Returns 1; 0 when the core closed
 * the channel; -1 with errno when the push could not be sent. */
static int call(uint16_t type, IsoBuf *b, const int *fds, int nfds, uint16_t want,
                IsoMsg *answer) {
    HostFrame *top = HostFrame_Top();
    HostChannel *ch = HostFrame_Top()->ch;
    uint64_t id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED) | HOST_ID_BIT;
    if (HostWire_Send(ch, type, id, b, fds, nfds) != 0) return ch->dead ? 0 : -1;
    /* The host's own request: no new core request on the stack. */
    HostFrame f = {.ch = ch, .id = id, .requests = top->requests, .up = top};
    HostFrame_Push(&f);
    int rc = 0;
    while (!ch->dead) {
        IsoMsg m;
        char why[256];
        int got = IsoRing_Recv(&ch->ring, &m, 1, why, sizeof(why));
        if (got == 0) {
            ch->dead = 1; /* the core dropped the channel: the runs below unwind */
            break;
        }
        if (got == -1)
            Host_ProtocolError("channel %llu: receive failed: %s", (unsigned long long)ch->id,
                               strerror(errno));
        if (got == -2) Host_ProtocolError("channel %llu: %s", (unsigned long long)ch->id, why);
        if (m.h.type == ISO_MSG_MODEL_RUN || m.h.type == ISO_MSG_SCRIPT_RUN) {
            HostFrame_CheckCoreId(ch, &m);
            if (f.requests >= HOST_NEST_MAX)
                Host_ProtocolError("channel %llu: %s nested %d requests deep",
                                   (unsigned long long)ch->id, Iso_MsgTypeName(m.h.type),
                                   f.requests + 1);
            HostChannel_Serve(ch, &m);
            IsoMsg_Free(&m);
            continue;
        }
        if (!isPop(m.h.type))
            Host_ProtocolError("channel %llu: %s while waiting for the answer to %s",
                               (unsigned long long)ch->id, Iso_MsgTypeName(m.h.type),
                               Iso_MsgTypeName(type));
        if (m.h.id != id)
            Host_ProtocolError("channel %llu: %s pops request 0x%llx, the top of the stack is "
                               "0x%llx", (unsigned long long)ch->id, Iso_MsgTypeName(m.h.type),
                               (unsigned long long)m.h.id, (unsigned long long)id);
        if (m.h.type != want && m.h.type != ISO_MSG_ERROR)
            Host_ProtocolError("channel %llu: %s answers a %s", (unsigned long long)ch->id,
                               Iso_MsgTypeName(m.h.type), Iso_MsgTypeName(type));
        *answer = m;
        rc = 1;
        break;
    }
    HostFrame_Leave(&f);
    return rc;
}

/* The text of an ERROR answer, malloc'd. */
static char *errorText(HostChannel *ch, const IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    char *text = NULL;
    IsoReader_StrDup(&r, &text, NULL, ISO_NAME_MAX);
    if (!IsoReader_Done(&r))
        Host_ProtocolError("channel %llu: ERROR: %s", (unsigned long long)ch->id, r.why);
    return text;
}

/* --- redis_call ---------------------------------------------------------------- */

static RAI_CallReply *errorReply(const char *text) {
    RAI_CallReply *r = calloc(1, sizeof(*r));
    char *s = strdup(text);
    if (r == NULL || s == NULL) abort(); /* redis_call never returns NULL */
    r->type = RAI_REPLY_ERROR;
    r->str = s;
    r->len = strlen(s);
    return r;
}

/* One reply of the tree at depth (the outermost at 0): u8 type, then
 * nothing (NULL), str (STRING, ERROR), i64 (INTEGER), u64 IEEE-754 bits
 * (DOUBLE), or u32 n + n replies (ARRAY). Every count is checked against
 * the bytes left (a reply takes at least its type byte) and the depth is
 * capped: a hostile tree ends the host, it never exhausts its stack or
 * memory. */
static void decodeReply(HostChannel *ch, IsoReader *r, RAI_CallReply *out, int depth) {
    if (depth > ISO_REPLY_DEPTH_MAX)
        Host_ProtocolError("channel %llu: CB_REDIS_REPLY has a reply at depth %d, over %d",
                           (unsigned long long)ch->id, depth, ISO_REPLY_DEPTH_MAX);
    uint8_t type = 0;
    IsoReader_U8(r, &type);
    out->type = (RAI_CallReplyType)type;
    switch (type) {
    case RAI_REPLY_NULL:
        break;
    case RAI_REPLY_STRING:
    case RAI_REPLY_ERROR: {
        char *s = NULL;
        if (IsoReader_StrDup(r, &s, &out->len, UINT32_MAX)) out->str = s;
        break;
    }
    case RAI_REPLY_INTEGER: {
        int64_t v = 0;
        IsoReader_I64(r, &v);
        out->integer = (long long)v;
        break;
    }
    case RAI_REPLY_DOUBLE: {
        uint64_t bits = 0;
        IsoReader_U64(r, &bits);
        memcpy(&out->dbl, &bits, sizeof(bits));
        break;
    }
    case RAI_REPLY_ARRAY: {
        uint32_t n = 0;
        if (!IsoReader_Count(r, &n, UINT32_MAX, 1)) break;
        out->elems = calloc(n ? n : 1, sizeof(*out->elems));
        if (out->elems == NULL)
            Host_ProtocolError("channel %llu: out of memory decoding a reply of %u elements",
                               (unsigned long long)ch->id, n);
        out->nelems = n;
        for (uint32_t i = 0; i < n && !r->why; i++) decodeReply(ch, r, &out->elems[i], depth + 1);
        break;
    }
    default:
        Host_ProtocolError("channel %llu: CB_REDIS_REPLY has a reply of type %u",
                           (unsigned long long)ch->id, type);
    }
    if (r->why)
        Host_ProtocolError("channel %llu: CB_REDIS_REPLY: %s", (unsigned long long)ch->id, r->why);
}

RAI_CallReply *HostCall_RedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                  size_t nargs) {
    if (HostFrame_Top() == NULL) return errorReply("ERR redis_call is only allowed from a run");
    if (cmd == NULL || nargs > UINT32_MAX) return errorReply("ERR redis_call: bad arguments");
    HostChannel *ch = HostFrame_Top()->ch;
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_CStr(&b, cmd);
    IsoBuf_U32(&b, (uint32_t)nargs);
    for (size_t i = 0; i < nargs; i++) IsoBuf_Str(&b, args[i], lens[i]);
    IsoMsg m;
    int rc = call(ISO_MSG_CB_REDIS_CALL, &b, NULL, 0, ISO_MSG_CB_REDIS_REPLY, &m);
    int e = errno;
    IsoBuf_Free(&b);
    if (rc == 0) return errorReply("ERR the core closed the channel during redis_call");
    if (rc < 0) {
        char text[160];
        snprintf(text, sizeof(text), "ERR backend host could not send redis_call: %s",
                 strerror(e));
        return errorReply(text);
    }
    RAI_CallReply *reply;
    if (m.h.type == ISO_MSG_ERROR) {
        char *text = errorText(ch, &m);
        reply = errorReply(text);
        free(text);
    } else {
        reply = calloc(1, sizeof(*reply));
        if (reply == NULL) abort();
        IsoReader r;
        IsoReader_Init(&r, m.payload, m.payload_len);
        decodeReply(ch, &r, reply, 0);
        if (!IsoReader_Done(&r))
            Host_ProtocolError("channel %llu: CB_REDIS_REPLY: %s", (unsigned long long)ch->id,
                               r.why);
    }
    IsoMsg_Free(&m);
    return reply;
}

static void freeReplyContents(RAI_CallReply *r) {
    for (size_t i = 0; r->elems && i < r->nelems; i++) freeReplyContents(&r->elems[i]);
    free(r->elems);
    free((char *)r->str);
}

void HostCall_ReplyFree(RAI_CallReply *r) {
    if (r == NULL) return;
    freeReplyContents(r);
    free(r);
}

/* --- model_execute ---------------------------------------------------------------- */

/* The outputs of a CB_MODEL_REPLY: u32 n (the count asked for) + n
 * descriptors, each copied into the host's own memory (they outlive the
 * reply and its regions). Returns 0, or -1 out of memory. */
static int takeOutputs(HostChannel *ch, IsoMsg *m, RAI_Tensor **outputs, size_t noutputs) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint32_t n = 0;
    IsoReader_Count(&r, &n, ISO_TENSORS_MAX, 24);
    if (!r.why && n != noutputs)
        Host_ProtocolError("channel %llu: CB_MODEL_REPLY has %u outputs, %zu were asked for",
                           (unsigned long long)ch->id, n, noutputs);
    IsoTensorDesc *descs = calloc(n ? n : 1, sizeof(*descs));
    if (descs == NULL) return -1;
    for (uint32_t i = 0; i < n; i++) IsoReader_Tensor(&r, &descs[i]);
    if (!IsoReader_Done(&r))
        Host_ProtocolError("channel %llu: CB_MODEL_REPLY: %s", (unsigned long long)ch->id, r.why);
    HostRegions regions = {.map = {NULL}};
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        outputs[i] = HostWire_TensorIn(ch, m, &regions, &descs[i], 0, "model_execute output", i);
        if (outputs[i] == NULL) rc = -1;
    }
    if (rc != 0) {
        for (uint32_t i = 0; i < n; i++) {
            if (outputs[i]) HostTensor_Release(outputs[i]);
            outputs[i] = NULL;
        }
    }
    HostWire_Unmap(&regions);
    free(descs);
    return rc;
}

int HostCall_ModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                          size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    if (HostFrame_Top() == NULL) {
        Error_Set(err, "ERR model_execute is only allowed from a run");
        return -1;
    }
    if (ninputs > ISO_TENSORS_MAX || noutputs > ISO_TENSORS_MAX || key_len > ISO_NAME_MAX) {
        Error_Set(err, "ERR model_execute: too many tensors or too long a key");
        return -1;
    }
    HostChannel *ch = HostFrame_Top()->ch;
    IsoTensorDesc *descs = malloc((ninputs ? ninputs : 1) * sizeof(*descs));
    int large = -1;
    /* In the part of the request being served: its own answer is not
     * written yet, while the core may still be reading earlier answers. */
    if (descs == NULL ||
        HostWire_Place(ch, HostFrame_Top()->id, inputs, ninputs, descs, &large) != 0) {
        Error_SetFmt(err, "ERR backend host could not place the inputs of model_execute: %s",
                     strerror(descs ? errno : ENOMEM));
        free(descs);
        return -1;
    }
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_Str(&b, key, key_len);
    IsoBuf_U32(&b, (uint32_t)ninputs);
    for (size_t i = 0; i < ninputs; i++) IsoBuf_Tensor(&b, &descs[i]);
    IsoBuf_U32(&b, (uint32_t)noutputs);
    IsoMsg m;
    int rc = call(ISO_MSG_CB_MODEL_EXECUTE, &b, &large, large >= 0 ? 1 : 0,
                  ISO_MSG_CB_MODEL_REPLY, &m);
    int e = errno;
    IsoBuf_Free(&b);
    if (large >= 0) close(large);
    free(descs);
    if (rc == 0) {
        Error_Set(err, "ERR the core closed the channel during model_execute");
        return -1;
    }
    if (rc < 0) {
        Error_SetFmt(err, "ERR backend host could not send model_execute: %s", strerror(e));
        return -1;
    }
    int status = 0;
    if (m.h.type == ISO_MSG_ERROR) {
        /* Recorded as the in-process host records it, so that TorchScript
         * takes it back with error_take and raises it in the script. */
        char *text = errorText(ch, &m);
        Error_Set(err, text);
        free(text);
        status = -1;
    } else if (takeOutputs(ch, &m, outputs, noutputs) != 0) {
        Error_Set(err, RAI_ERR_HOST_OOM);
        status = -1;
    }
    IsoMsg_Free(&m);
    return status;
}

/*
 * iso_handle.c - proxy handles (see iso_handle.h): what the core keeps of a
 * model or script built in a host, and the create request that builds it
 * there, on first store and again after each restart.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_handle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "isolation/core/iso_control.h"

static uint64_t next_handle_id;

static char **copyNames(size_t n, const char *const *names) {
    if (n == 0 || names == NULL) return NULL;
    char **v = calloc(n, sizeof(char *));
    for (size_t i = 0; v && i < n; i++) v[i] = strdup(names[i] ? names[i] : "");
    return v;
}

static void freeNames(size_t n, char **v) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

void IsoHandle_Free(IsoHandle *h) {
    free(h->key);
    free(h->device_str);
    freeNames(h->ninputs, h->inputs);
    freeNames(h->noutputs, h->outputs);
    free(h->failed);
    free(h->owned_source);
    if (h->owned_blob) RedisModule_Free(h->owned_blob);
    free(h);
}

void IsoHandle_FreeInHost(IsoSlot *s, const IsoHandle *h, uint64_t generation) {
    pthread_mutex_lock(&s->mu);
    /* Nothing to free in a host that never had it (it died since). */
    if (s->state == ISO_READY && generation == s->generation)
        IsoControl_QueueFree(s, h->is_script ? ISO_MSG_SCRIPT_FREE : ISO_MSG_MODEL_FREE, h->id);
    pthread_mutex_unlock(&s->mu);
}

IsoHandle *IsoHandle_New(IsoSlot *s, int is_script, const char *key, size_t key_len,
                         const char *device_str, int device, int64_t device_id, const char *blob,
                         size_t blob_len, size_t nin, const char *const *in, size_t nout,
                         const char *const *out, RAI_Error *err) {
    IsoHandle *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        Error_Set(err, RAI_ERR_OOM);
        return NULL;
    }
    h->slot = s;
    h->id = __atomic_add_fetch(&next_handle_id, 1, __ATOMIC_RELAXED);
    h->is_script = is_script;
    h->key = strndup(key ? key : "", key ? key_len : 0);
    h->blob = blob;
    h->blob_len = blob_len;
    if (is_script) {
        h->owned_source = malloc(blob_len + 1);
        if (h->owned_source == NULL) {
            Error_Set(err, RAI_ERR_OOM);
            IsoHandle_Free(h);
            return NULL;
        }
        memcpy(h->owned_source, blob, blob_len);
        h->owned_source[blob_len] = '\0';
        h->blob = h->owned_source;
    }
    h->device_str = strdup(device_str ? device_str : "CPU");
    h->device = device;
    h->device_id = device_id;
    h->ninputs = nin;
    h->inputs = copyNames(nin, in);
    h->noutputs = nout;
    h->outputs = copyNames(nout, out);
    return h;
}

static void encodeNames(IsoBuf *b, size_t n, char **v) {
    IsoBuf_U32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) IsoBuf_CStr(b, v[i]);
}

/* Names the host found, into the core's allocator (the core owns them). */
static int decodeNames(IsoReader *r, int *has, size_t *n, char ***out) {
    uint8_t flag = 0;
    uint32_t count = 0;
    IsoReader_U8(r, &flag);
    IsoReader_Count(r, &count, ISO_NAMES_MAX, 4);
    if (r->why) return 0;
    *has = flag != 0;
    *n = count;
    *out = NULL;
    if (!flag) {
        for (uint32_t i = 0; i < count; i++) {
            const char *s;
            size_t l;
            IsoReader_StrView(r, &s, &l, ISO_NAME_MAX);
        }
        return r->why == NULL;
    }
    char **v = RedisModule_Calloc(count ? count : 1, sizeof(char *));
    for (uint32_t i = 0; i < count; i++) {
        const char *s = "";
        size_t l = 0;
        IsoReader_StrView(r, &s, &l, ISO_NAME_MAX);
        v[i] = RedisModule_Alloc(l + 1);
        memcpy(v[i], s, l);
        v[i][l] = '\0';
    }
    *out = v;
    return r->why == NULL;
}

int IsoHandle_CreateInHost(IsoSlot *s, IsoHandle *h, RAI_ModelNames *names, uint64_t *generation,
                           RAI_Error *err) {
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U64(&b, h->id);
    IsoBuf_CStr(&b, h->key);
    IsoBuf_CStr(&b, h->device_str);
    IsoBuf_U32(&b, (uint32_t)h->device);
    IsoBuf_I64(&b, h->device_id);
    if (h->is_script) {
        encodeNames(&b, h->ninputs, h->inputs); /* entry points */
    } else {
        encodeNames(&b, h->ninputs, h->inputs);
        encodeNames(&b, h->noutputs, h->outputs);
    }
    IsoBuf_Str(&b, h->blob, h->blob_len);
    pthread_mutex_lock(&s->mu);
    *generation = s->generation;
    pthread_mutex_unlock(&s->mu);
    IsoMsg m;
    int rc = IsoControl_Request(s, h->is_script ? ISO_MSG_SCRIPT_CREATE : ISO_MSG_MODEL_CREATE, &b,
                                NULL, 0, rai_config.backend_start_timeout, &m);
    IsoBuf_Free(&b);
    if (rc == 0) return -2;
    if (rc < 0) return -1;
    IsoReader r;
    IsoReader_Init(&r, m.payload, m.payload_len);
    int result = 1;
    uint16_t want = h->is_script ? ISO_MSG_SCRIPT_CREATED : ISO_MSG_MODEL_CREATED;
    if (m.h.type == ISO_MSG_ERROR) {
        Iso_ErrorText(&m, err);
        result = 0;
    } else if (m.h.type != want) {
        char reason[200];
        snprintf(reason, sizeof(reason), "killed: protocol error: %s in answer to a create",
                 Iso_MsgTypeName(m.h.type));
        IsoControl_KillWithReason(s, *generation, reason, "killed_protocol");
        result = -1;
    } else if (!h->is_script) {
        RAI_ModelNames found = {0};
        int has_in = 0, has_out = 0;
        int ok = decodeNames(&r, &has_in, &found.ninputs, &found.inputs) &&
                 decodeNames(&r, &has_out, &found.noutputs, &found.outputs) && IsoReader_Done(&r);
        if (ok && names) {
            *names = found;
        } else {
            for (size_t i = 0; found.inputs && i < found.ninputs; i++)
                RedisModule_Free(found.inputs[i]);
            for (size_t i = 0; found.outputs && i < found.noutputs; i++)
                RedisModule_Free(found.outputs[i]);
            RedisModule_Free(found.inputs);
            RedisModule_Free(found.outputs);
        }
        if (!ok) {
            IsoControl_KillWithReason(s, *generation, "killed: protocol error: MODEL_CREATED",
                                      "killed_protocol");
            result = -1;
        }
    }
    IsoMsg_Free(&m);
    return result;
}

/*
 * host_api.c - the RAI_HostApi a backend gets inside the host (see
 * docs/isolation.md, "The host's RAI_HostApi"), and host tensors.
 *
 * Memory is libc's: it shows in the host's RSS, not in Redis's used_memory.
 * Errors are the core's own RAI_Error (error.c compiled in), so texts follow
 * the same first-wins and CR/LF rules. Not yet here: the callbacks
 * (redis_call, model_execute), which need the channel's call stack; until
 * then they answer an error instead of reaching Redis.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"

struct RAI_Tensor {
    int refcount; /* atomic */
    RAI_DType dtype;
    int ndims;
    int64_t dims[ISO_DIMS_MAX];
    size_t length; /* elements */
    size_t nbytes;
    void *data;
    void (*deleter)(void *ctx); /* adopted data */
    void *deleter_ctx;
    int owns;          /* data is malloc'd by the host */
    int borrowed;      /* data lies in an arena or a mapped region of a request */
    uint64_t *offsets; /* STRING: element i at data + offsets[i] */
};

static int dtypeNumeric(RAI_DType d) {
    switch (d.code) {
    case RAI_DTYPE_INT:
    case RAI_DTYPE_UINT:
    case RAI_DTYPE_FLOAT:
    case RAI_DTYPE_BFLOAT:
    case RAI_DTYPE_BOOL:
        return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    default:
        return 0;
    }
}

size_t HostTensor_Bytes(RAI_DType dtype, const int64_t *dims, int ndims, int *ok) {
    *ok = 0;
    if (!dtypeNumeric(dtype) || ndims < 0 || ndims > ISO_DIMS_MAX) return 0;
    size_t n = dtype.bits / 8;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) return 0;
        if (dims[i] && n > SIZE_MAX / (size_t)dims[i]) return 0;
        n *= (size_t)dims[i];
    }
    *ok = 1;
    return n;
}

static RAI_Tensor *newTensor(RAI_DType dtype, const int64_t *dims, int ndims) {
    if (ndims < 0 || ndims > ISO_DIMS_MAX) return NULL;
    RAI_Tensor *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    t->refcount = 1;
    t->dtype = dtype;
    t->ndims = ndims;
    t->length = 1;
    for (int i = 0; i < ndims; i++) {
        t->dims[i] = dims[i];
        t->length *= (size_t)(dims[i] > 0 ? dims[i] : 0);
    }
    return t;
}

static RAI_Tensor *tensorCreate(RAI_DType dtype, const int64_t *dims, int ndims) {
    int ok;
    size_t n = HostTensor_Bytes(dtype, dims, ndims, &ok);
    if (!ok) return NULL;
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = malloc(n ? n : 1);
    if (t->data == NULL) {
        free(t);
        return NULL;
    }
    t->nbytes = n;
    t->owns = 1;
    return t;
}

static RAI_Tensor *tensorAdopt(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                               size_t nbytes, void (*deleter)(void *ctx), void *deleter_ctx) {
    int ok;
    size_t n = HostTensor_Bytes(dtype, dims, ndims, &ok);
    if (!ok || n != nbytes) return NULL;
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = data;
    t->nbytes = nbytes;
    t->deleter = deleter;
    t->deleter_ctx = deleter_ctx;
    return t;
}

static RAI_Tensor *tensorCreateStrings(const int64_t *dims, int ndims, const char *const *elems,
                                       const size_t *lens) {
    RAI_Tensor *t = newTensor((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    if (t == NULL) return NULL;
    size_t total = 0;
    for (size_t i = 0; i < t->length; i++) total += lens[i] + 1;
    t->offsets = malloc(sizeof(uint64_t) * (t->length ? t->length : 1));
    t->data = malloc(total ? total : 1);
    if (t->offsets == NULL || t->data == NULL) {
        free(t->offsets);
        free(t->data);
        free(t);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < t->length; i++) {
        t->offsets[i] = off;
        memcpy((char *)t->data + off, elems[i], lens[i]);
        ((char *)t->data)[off + lens[i]] = '\0';
        off += lens[i] + 1;
    }
    t->nbytes = total;
    t->owns = 1;
    return t;
}

RAI_Tensor *HostTensor_Borrow(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                              size_t nbytes) {
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = data;
    t->nbytes = nbytes;
    t->borrowed = 1;
    return t;
}

static RAI_Tensor *tensorRetain(RAI_Tensor *t) {
    __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

static void tensorRelease(RAI_Tensor *t) {
    if (t == NULL || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (t->deleter) t->deleter(t->deleter_ctx);
    if (t->owns) free(t->data);
    free(t->offsets);
    free(t);
}

int HostTensor_RefCount(const RAI_Tensor *t) {
    return __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE);
}

void HostTensor_ReturnBorrowed(RAI_Tensor *t) {
    if (t->borrowed && HostTensor_RefCount(t) > 1) {
        /* The backend kept a reference past the run: give it data of its
         * own before the arena is reused. Out of memory leaves the pointer
         * (the backend was wrong in-process too), never a dangling free. */
        void *copy = malloc(t->nbytes ? t->nbytes : 1);
        if (copy) {
            memcpy(copy, t->data, t->nbytes);
            t->data = copy;
            t->owns = 1;
            t->borrowed = 0;
        }
    }
    tensorRelease(t);
}

static RAI_DType tensorDtype(const RAI_Tensor *t) { return t->dtype; }
static int tensorNdims(const RAI_Tensor *t) { return t->ndims; }
static const int64_t *tensorDims(const RAI_Tensor *t) { return t->dims; }
static size_t tensorLength(const RAI_Tensor *t) { return t->length; }
static size_t tensorByteSize(const RAI_Tensor *t) { return t->nbytes; }
static void *tensorData(RAI_Tensor *t) { return t->data; }

static const char *tensorStringAt(const RAI_Tensor *t, size_t i, size_t *len) {
    if (t->dtype.code != RAI_DTYPE_STRING || t->offsets == NULL || i >= t->length) {
        if (len) *len = 0;
        return NULL;
    }
    const char *s = (const char *)t->data + t->offsets[i];
    if (len) *len = strlen(s);
    return s;
}

/* --- diagnostics, errors, settings -------------------------------------------- */

static void hostLog(RAI_LogLevel level, const char *fmt, ...) {
    if ((uint32_t)level < host.verbosity) return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U32(&b, (uint32_t)level);
    IsoBuf_CStr(&b, text);
    /* A datagram is atomic: any thread may send one on the control socket. */
    if (!b.oom) Iso_Send(HOST_CTL_FD, ISO_MSG_LOG, 0, b.data, b.len, NULL, 0);
    IsoBuf_Free(&b);
}

static void hostErrorSet(RAI_Error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Error_SetV(err, fmt, ap);
    va_end(ap);
}

static char *hostErrorTake(RAI_Error *err) {
    if (err == NULL || err->msg == NULL) return NULL;
    char *m = err->msg; /* malloc'd by the shim, as the ABI's free expects */
    err->msg = NULL;
    err->code = 0;
    return m;
}

static long long hostConfigGet(RAI_ConfigKey key) {
    return (unsigned)key < ISO_CONFIG_KEYS ? host.config[key] : 0;
}

static size_t hostRunQueueCount(void) {
    return (size_t)host.run_queue_count;
}

/* --- calls back into Redis: not yet carried (the next step of issue 13) -------- */

#define CALLBACKS_LATER "is not available in an isolated backend host yet"

static RAI_CallReply *hostRedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                    size_t nargs) {
    (void)cmd, (void)args, (void)lens, (void)nargs;
    RAI_CallReply *r = calloc(1, sizeof(*r));
    if (r == NULL) abort();
    static const char text[] = "ERR redis_call " CALLBACKS_LATER;
    r->type = RAI_REPLY_ERROR;
    r->str = text;
    r->len = sizeof(text) - 1;
    return r;
}

static void hostCallReplyFree(RAI_CallReply *r) {
    free(r);
}

static int hostModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                            size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
                            RAI_Error *err) {
    (void)key, (void)key_len, (void)inputs, (void)ninputs, (void)outputs, (void)noutputs;
    Error_Set(err, "ERR model_execute " CALLBACKS_LATER);
    return -1;
}

static void *hostCalloc(size_t n, size_t m) { return calloc(n, m); }

static const RAI_HostApi api = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_HostApi),
    .alloc = malloc,
    .calloc = hostCalloc,
    .realloc = realloc,
    .free = free,
    .strdup = strdup,
    .log = hostLog,
    .error_set = hostErrorSet,
    .config_get = hostConfigGet,
    .tensor_create = tensorCreate,
    .tensor_adopt = tensorAdopt,
    .tensor_create_strings = tensorCreateStrings,
    .tensor_retain = tensorRetain,
    .tensor_release = tensorRelease,
    .tensor_dtype = tensorDtype,
    .tensor_ndims = tensorNdims,
    .tensor_dims = tensorDims,
    .tensor_length = tensorLength,
    .tensor_byte_size = tensorByteSize,
    .tensor_data = tensorData,
    .tensor_string_at = tensorStringAt,
    .redis_call = hostRedisCall,
    .call_reply_free = hostCallReplyFree,
    .model_execute = hostModelExecute,
    .error_take = hostErrorTake,
    .run_queue_count = hostRunQueueCount,
};

const RAI_HostApi *Host_Api(void) {
    return &api;
}

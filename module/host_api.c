/*
 * host_api.c - the RAI_HostApi handed to backends. Each member is a thin,
 * typed adapter over the core, so a backend never needs the core's symbols
 * or its own copies of the RedisModule_* pointers (which stay NULL there).
 */
#include "host_api.h"

#include <stdarg.h>
#include <stdio.h>

#include "config.h"
#include "error.h"
#include "redismodule.h"
#include "tensor.h"

static void *hostAlloc(size_t n) { return RedisModule_Alloc(n); }
static void *hostCalloc(size_t c, size_t n) { return RedisModule_Calloc(c, n); }
static void *hostRealloc(void *p, size_t n) { return RedisModule_Realloc(p, n); }
static void hostFree(void *p) { RedisModule_Free(p); }
static char *hostStrdup(const char *s) { return RedisModule_Strdup(s); }

static void hostLog(RAI_LogLevel level, const char *fmt, ...) {
    static const char *levels[] = {"debug", "verbose", "notice", "warning"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    /* RedisModule_Log with a NULL ctx is allowed from any thread. */
    RedisModule_Log(NULL, levels[level <= RAI_LOG_WARNING ? level : RAI_LOG_WARNING], "%s", buf);
}

static void hostErrorSet(RAI_Error *err, const char *fmt, ...) {
    if (err == NULL || Error_IsSet(err)) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return Error_Set(err, "ERR backend error");
    char *buf = RedisModule_Alloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    Error_Set(err, buf);
    RedisModule_Free(buf);
}

static long long hostConfigGet(RAI_ConfigKey key) {
    switch (key) {
    case RAI_CONFIG_THREADS_PER_QUEUE: return rai_config.threads_per_queue;
    case RAI_CONFIG_INTRA_OP_PARALLELISM: return rai_config.intra_op_parallelism;
    case RAI_CONFIG_INTER_OP_PARALLELISM: return rai_config.inter_op_parallelism;
    case RAI_CONFIG_MODEL_EXECUTION_TIMEOUT: return rai_config.model_execution_timeout;
    case RAI_CONFIG_BACKEND_MEMORY_LIMIT: return rai_config.backend_memory_limit;
    }
    return 0;
}

static RAI_Tensor *hostTensorCreate(RAI_DType dt, const int64_t *dims, int ndims) {
    if (DType_IsString(dt)) return NULL;
    return Tensor_New(dt, dims, ndims, 0);
}

static RAI_DType hostTensorDType(const RAI_Tensor *t) { return t->dtype; }
static int hostTensorNDims(const RAI_Tensor *t) { return t->ndims; }
static const int64_t *hostTensorDims(const RAI_Tensor *t) { return t->dims; }
static size_t hostTensorLength(const RAI_Tensor *t) { return t->len; }
static size_t hostTensorByteSize(const RAI_Tensor *t) { return t->nbytes; }
static void *hostTensorData(RAI_Tensor *t) { return t->data; }

static const RAI_HostApi host_api = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_HostApi),
    .alloc = hostAlloc,
    .calloc = hostCalloc,
    .realloc = hostRealloc,
    .free = hostFree,
    .strdup = hostStrdup,
    .log = hostLog,
    .error_set = hostErrorSet,
    .config_get = hostConfigGet,
    .tensor_create = hostTensorCreate,
    .tensor_adopt = Tensor_NewAdopted,
    .tensor_create_strings = Tensor_NewStrings,
    .tensor_retain = Tensor_Retain,
    .tensor_release = Tensor_Release,
    .tensor_dtype = hostTensorDType,
    .tensor_ndims = hostTensorNDims,
    .tensor_dims = hostTensorDims,
    .tensor_length = hostTensorLength,
    .tensor_byte_size = hostTensorByteSize,
    .tensor_data = hostTensorData,
    .tensor_string_at = Tensor_StringAt,
};

const RAI_HostApi *HostApi_Get(void) {
    return &host_api;
}

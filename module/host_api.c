/*
 * host_api.c - the RAI_HostApi handed to backends. Each member is a thin,
 * typed adapter over the core, so a backend never needs the core's symbols
 * or its own copies of the RedisModule_* pointers (which stay NULL there).
 */
#include "host_api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "config.h"
#include "error.h"
#include "model.h"
#include "redismodule.h"
#include "run_queue.h"
#include "tensor.h"

#include <string.h>

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
    va_list ap;
    va_start(ap, fmt);
    Error_SetV(err, fmt, ap);
    va_end(ap);
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

/* ------------------------- 1.1: calls into Redis ------------------------- */

static void convertReply(RedisModuleCallReply *r, RAI_CallReply *out);

static void setReplyString(RAI_CallReply *out, const char *p, size_t len) {
    char *s = RedisModule_Alloc(len + 1);
    if (len) memcpy(s, p, len);
    s[len] = '\0';
    out->str = s;
    out->len = len;
}

static void convertReply(RedisModuleCallReply *r, RAI_CallReply *out) {
    memset(out, 0, sizeof(*out));
    size_t len = 0;
    const char *p;
    switch (r ? RedisModule_CallReplyType(r) : REDISMODULE_REPLY_NULL) {
    case REDISMODULE_REPLY_STRING:
        out->type = RAI_REPLY_STRING;
        p = RedisModule_CallReplyStringPtr(r, &len);
        setReplyString(out, p, len);
        break;
    case REDISMODULE_REPLY_ERROR:
        out->type = RAI_REPLY_ERROR;
        p = RedisModule_CallReplyStringPtr(r, &len);
        setReplyString(out, p, len);
        break;
    case REDISMODULE_REPLY_INTEGER:
        out->type = RAI_REPLY_INTEGER;
        out->integer = RedisModule_CallReplyInteger(r);
        break;
    case REDISMODULE_REPLY_DOUBLE:
        out->type = RAI_REPLY_DOUBLE;
        out->dbl = RedisModule_CallReplyDouble(r);
        break;
    case REDISMODULE_REPLY_ARRAY:
    case REDISMODULE_REPLY_SET:
        out->type = RAI_REPLY_ARRAY;
        out->nelems = RedisModule_CallReplyLength(r);
        out->elems = RedisModule_Calloc(out->nelems ? out->nelems : 1, sizeof(RAI_CallReply));
        for (size_t i = 0; i < out->nelems; i++) {
            convertReply(RedisModule_CallReplyArrayElement(r, i), &out->elems[i]);
        }
        break;
    default:
        out->type = RAI_REPLY_NULL;
        break;
    }
}

static void freeReplyContents(RAI_CallReply *r) {
    if (r->str) RedisModule_Free((char *)r->str);
    for (size_t i = 0; i < r->nelems; i++) freeReplyContents(&r->elems[i]);
    if (r->elems) RedisModule_Free(r->elems);
}

static void hostCallReplyFree(RAI_CallReply *r) {
    if (r == NULL) return;
    freeReplyContents(r);
    RedisModule_Free(r);
}

/* Runs on a worker thread: takes Redis's global lock for the call only.
 * DB 0 and propagation ("!") as RedisAI 1.2; errors come back as replies
 * ("E") so that scripts can raise them with Redis's own text. */
static RAI_CallReply *hostRedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                    size_t nargs) {
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(NULL);
    RedisModule_ThreadSafeContextLock(ctx);
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * (nargs ? nargs : 1));
    for (size_t i = 0; i < nargs; i++) argv[i] = RedisModule_CreateString(ctx, args[i], lens[i]);
    RedisModuleCallReply *r = RedisModule_Call(ctx, cmd, "!Ev", argv, nargs);
    RAI_CallReply *out = RedisModule_Alloc(sizeof(*out));
    if (r == NULL) {
        memset(out, 0, sizeof(*out));
        out->type = RAI_REPLY_ERROR;
        const char *why = errno == ENOENT ? "ERR unknown command" : "ERR command could not be called";
        setReplyString(out, why, strlen(why));
    } else {
        convertReply(r, out);
        RedisModule_FreeCallReply(r);
    }
    for (size_t i = 0; i < nargs; i++) RedisModule_FreeString(ctx, argv[i]);
    RedisModule_Free(argv);
    RedisModule_ThreadSafeContextUnlock(ctx);
    RedisModule_FreeThreadSafeContext(ctx);
    return out;
}

/* Looks the model up under the lock, then runs it in this thread. */
static int hostModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                            size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
                            RAI_Error *err) {
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(NULL);
    RedisModule_ThreadSafeContextLock(ctx);
    RedisModuleString *name = RedisModule_CreateString(ctx, key, key_len);
    RAI_Model *m = Model_FromKey(ctx, name, err);
    RedisModule_FreeString(ctx, name);
    RedisModule_ThreadSafeContextUnlock(ctx);
    RedisModule_FreeThreadSafeContext(ctx);
    if (m == NULL) return -1;
    int rc = -1;
    if (ninputs != m->ninputs) {
        Error_Set(err, "Number of keys given as INPUTS here does not match model definition");
    } else if (m->noutputs != 0 && noutputs != m->noutputs) {
        Error_Set(err, "Number of keys given as OUTPUTS here does not match model definition");
    } else {
        RAI_RunInfo info = {.size = sizeof(RAI_RunInfo), .worker_index = RunQueue_WorkerIndex()};
        rc = m->be->model_run(m->handle, &info, inputs, ninputs, outputs, noutputs, err);
        for (size_t i = 0; rc == 0 && i < noutputs; i++) {
            if (outputs[i] == NULL) {
                Error_Set(err, "ERR Model did not generate the expected number of outputs");
                rc = -1;
            }
        }
        if (rc != 0) {
            for (size_t i = 0; i < noutputs; i++) {
                Tensor_Release(outputs[i]);
                outputs[i] = NULL;
            }
        }
    }
    /* The key may have been deleted meanwhile: a last release frees the
     * model's statistics, which only the main thread (or a lock holder)
     * may touch. */
    ctx = RedisModule_GetThreadSafeContext(NULL);
    RedisModule_ThreadSafeContextLock(ctx);
    Model_Release(m);
    RedisModule_ThreadSafeContextUnlock(ctx);
    RedisModule_FreeThreadSafeContext(ctx);
    return rc;
}

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
    .redis_call = hostRedisCall,
    .call_reply_free = hostCallReplyFree,
    .model_execute = hostModelExecute,
};

const RAI_HostApi *HostApi_Get(void) {
    return &host_api;
}

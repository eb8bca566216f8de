/*
 * host_api.c - the RAI_HostApi handed to backends. Each member is a thin,
 * typed adapter over the core, so a backend never needs the core's symbols
 * or its own copies of the RedisModule_* pointers (which stay NULL there).
 */
#include "engine/host_api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/error.h"
#include "core/main_thread.h"
#include "core/messages.h"
#include "core/server.h"
#include "core/tensor.h"
#include "engine/caller.h"
#include "engine/command_arity.h"
#include "engine/dag.h"
#include "engine/noperm.h"
#include "engine/run_queue.h"
#include "engine/write_gate.h"
#include "redisai/reply_texts.h"
#include "redismodule.h"
#include "types/model_type.h"

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

static char *hostErrorTake(RAI_Error *err) {
    if (err == NULL || err->msg == NULL) return NULL;
    char *msg = err->msg;
    err->msg = NULL;
    return msg; /* RedisModule_Alloc'd: the backend frees it with hostFree */
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
        /* RESP3 replies (Redis 7.0's "3" flag, not asked for): defensive */
        out->dbl = RedisModule_CallReplyDouble ? RedisModule_CallReplyDouble(r) : 0;
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

static RAI_CallReply *errorReply(const char *text) {
    RAI_CallReply *out = RedisModule_Calloc(1, sizeof(*out));
    out->type = RAI_REPLY_ERROR;
    setReplyString(out, text, strlen(text));
    return out;
}

/* The AI.* commands that block their client. Their handlers refuse a client
 * that may not block (Dag_RefuseIfCannotBlock); refusing here too means no
 * command of ours ever blocks the temporary client of a RedisModule_Call,
 * on which Redis aborts. */
static const char *const blocking_commands[] = {
    "AI.MODELRUN", "AI.MODELEXECUTE", "AI.SCRIPTRUN",    "AI.SCRIPTEXECUTE",
    "AI.DAGRUN",   "AI.DAGRUN_RO",    "AI.DAGEXECUTE",   "AI.DAGEXECUTE_RO",
};

static const char *blockingCommand(const char *cmd) {
    for (size_t i = 0; i < sizeof(blocking_commands) / sizeof(blocking_commands[0]); i++) {
        if (!strcasecmp(cmd, blocking_commands[i])) return blocking_commands[i];
    }
    return NULL;
}

/* Why user u may not run argv, told as Redis tells a client (the NOPERM
 * texts of processCommand, in the server's words: noperm.h), with an ACL
 * LOG entry for the user. Redis's own ACL DRYRUN says which rule refused it
 * (command, key or channel; with selectors the same choice as for a
 * client). NULL when DRYRUN gives no verdict (an arity error): the call
 * then reports that itself, and its "C" flag still checks the ACL. */
static RAI_CallReply *refusal(RedisModuleCtx *ctx, RedisModuleUser *u, RedisModuleString *uname,
                              RedisModuleString **argv, int argc) {
    NoPermVerdict v;
    RAI_CallReply *out = NULL;
    size_t len;
    const char *obj;
    switch (NoPerm_DryRun(ctx, uname, argv, argc, &v)) {
    case NOPERM_NONE:
        return NULL;
    case NOPERM_COMMAND: {
        obj = RedisModule_StringPtrLen(v.object, &len);
        char *msg = NoPerm_CommandText(uname, obj, len);
        out = errorReply(msg);
        RedisModule_Free(msg);
        RedisModule_ACLAddLogEntry(ctx, u, v.object, REDISMODULE_ACL_LOG_CMD);
        break;
    }
    case NOPERM_KEY:
        out = errorReply(NoPerm_KeyText());
        RedisModule_ACLAddLogEntry(ctx, u, v.object, REDISMODULE_ACL_LOG_KEY);
        break;
    case NOPERM_CHANNEL:
        out = errorReply(NoPerm_ChannelText());
        RedisModule_ACLAddLogEntry(ctx, u, v.object, REDISMODULE_ACL_LOG_CHANNEL);
        break;
    }
    NoPerm_Clear(ctx, &v);
    return out;
}

/* NULL when user u may run argv (command and keys, Redis 7 rules), else the
 * refusal. Redis checks the arity before the ACL, and so must we: with too
 * few arguments a built-in command's key positions lie past argv (Redis
 * panics). An unknown command or a wrong arity is left to the call, which
 * reports it before it would run anything. */
static RAI_CallReply *checkPermissions(RedisModuleCtx *ctx, RedisModuleUser *u,
                                       RedisModuleString *uname, RedisModuleString **argv,
                                       int argc) {
    if (CommandArity_Check(ctx, argv, argc) != COMMAND_ARITY_OK) return NULL;
    if (RedisModule_ACLCheckCommandPermissions(u, argv, argc) == REDISMODULE_OK) return NULL;
    return refusal(ctx, u, uname, argv, argc);
}

/* Redis's global lock around a call back into Redis from a run: worker
 * threads take it; the main thread already holds it (an LLAPI client's
 * synchronous run from its command), and would deadlock taking it again. */
static void lockRedis(RedisModuleCtx *ctx) {
    if (!MainThread_Is()) RedisModule_ThreadSafeContextLock(ctx);
}

static void unlockRedis(RedisModuleCtx *ctx) {
    if (!MainThread_Is()) RedisModule_ThreadSafeContextUnlock(ctx);
}

/* Calls argv (argv[0] the command) with RedisModule_Call's flags fmt
 * (without its trailing "v"). */
static RAI_CallReply *callConverted(RedisModuleCtx *ctx, const char *fmt, RedisModuleString **argv,
                                    int argc) {
    char f[8];
    /* While writes are paused, propagating one makes Redis assert (a write
     * could be lost in a failover; engine/write_gate.h): "W" has Redis
     * refuse write commands, in its own words. */
    snprintf(f, sizeof(f), "%s%sv", fmt, WriteGate_Paused() ? "W" : "");
    RedisModuleCallReply *r = RedisModule_Call(
        ctx, RedisModule_StringPtrLen(argv[0], NULL), f, argv + 1, (size_t)(argc - 1));
    if (r == NULL) {
        return errorReply(errno == ENOENT ? "ERR unknown command" : "ERR command could not be called");
    }
    RAI_CallReply *out = RedisModule_Alloc(sizeof(*out));
    convertReply(r, out);
    RedisModule_FreeCallReply(r);
    return out;
}

/* Whether COMMAND INFO lists the command as deny-oom. */
static int denyOom(RedisModuleCtx *ctx, RedisModuleString *cmd) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "COMMAND", "cs", "INFO", cmd);
    if (r == NULL) return 0;
    int found = 0;
    RedisModuleCallReply *info = RedisModule_CallReplyArrayElement(r, 0);
    RedisModuleCallReply *flags = info ? RedisModule_CallReplyArrayElement(info, 2) : NULL;
    size_t n = flags ? RedisModule_CallReplyLength(flags) : 0;
    for (size_t i = 0; i < n && !found; i++) {
        size_t len;
        const char *f =
            RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(flags, i), &len);
        found = f != NULL && len == 7 && !memcmp(f, "denyoom", 7);
    }
    RedisModule_FreeCallReply(r);
    return found;
}

/* A server without the module ACL API (Redis 6.2) can check neither the
 * caller's user nor maxmemory for a call (RedisModule_Call's "C" and "M"
 * arrived with that API in 7.0): a caller with a user is refused unless the
 * operator chose UNSAFE_NO_ACL_CHECKS, and a deny-oom command is refused
 * over maxmemory here, as Redis refuses it to a Lua script. */
static RAI_CallReply *callUnaided(RedisModuleCtx *ctx, const RAI_Caller *caller,
                                  RedisModuleString **argv, int argc) {
    if (caller != NULL && caller->user != NULL && !rai_config.unsafe_no_acl_checks) {
        return errorReply(SERVER_NO_ACL_CALL);
    }
    if ((RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_OOM) && denyOom(ctx, argv[0])) {
        return errorReply(RAI_OOM_MSG);
    }
    /* No "W" before 7.0: while writes are paused every call waits for none
     * and is refused, reads too (their flags are not known here). */
    if (WriteGate_Paused()) return errorReply(CALL_WRITES_PAUSED);
    return callConverted(ctx, "!", argv, argc);
}

/* Acts for the caller: when it has an ACL user, only for what that user
 * may run, the command then running as that user ("C", so that e.g. an EVAL
 * it calls is checked against it too). "M": deny-oom commands are refused
 * over maxmemory, as for a client. Errors come back as replies ("E") so
 * that scripts can raise them with Redis's own text. */
static RAI_CallReply *callChecked(RedisModuleCtx *ctx, const RAI_Caller *caller,
                                  RedisModuleString **argv, int argc, RedisModuleUser **user) {
    if (caller == NULL || caller->user == NULL) return callConverted(ctx, "!EM", argv, argc);
    int gone = 0;
    *user = Caller_User(caller, &gone);
    if (*user == NULL) return errorReply(CALLER_NOPERM_GONE);
    RAI_CallReply *out = checkPermissions(ctx, *user, caller->user, argv, argc);
    if (out != NULL) return out;
    RedisModule_SetContextUser(ctx, *user);
    return callConverted(ctx, "!EMC", argv, argc);
}

/* Runs on a worker thread: takes Redis's global lock for the call only.
 * Acts for the run's caller (caller.h): in its DB and, as far as the server
 * can check, with its ACL user's rights. Propagation ("!") as RedisAI 1.2. */
static RAI_CallReply *hostRedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                    size_t nargs) {
    const char *blocking = blockingCommand(cmd);
    if (blocking != NULL) {
        char msg[192];
        snprintf(msg, sizeof(msg), DAG_WOULD_BLOCK_FMT, blocking);
        return errorReply(msg);
    }
    const RAI_Caller *caller = Caller_Current();
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(NULL);
    lockRedis(ctx);
    if (caller != NULL) RedisModule_SelectDb(ctx, caller->db);
    int argc = (int)nargs + 1;
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * (size_t)argc);
    argv[0] = RedisModule_CreateString(ctx, cmd, strlen(cmd));
    for (size_t i = 0; i < nargs; i++) {
        argv[i + 1] = RedisModule_CreateString(ctx, args[i], lens[i]);
    }
    RedisModuleUser *user = NULL;
    RAI_CallReply *out = Server_HasAclApi() ? callChecked(ctx, caller, argv, argc, &user)
                                            : callUnaided(ctx, caller, argv, argc);
    for (int i = 0; i < argc; i++) RedisModule_FreeString(ctx, argv[i]);
    RedisModule_Free(argv);
    unlockRedis(ctx);
    RedisModule_FreeThreadSafeContext(ctx);
    /* after the context that pointed at it */
    if (user != NULL) RedisModule_FreeModuleUser(user);
    return out;
}

/* Looks the model up under the lock, in the caller's DB and after checking
 * the caller may read its key, then runs it in this thread. */
static int hostModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                            size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
                            RAI_Error *err) {
    const RAI_Caller *caller = Caller_Current();
    RedisModuleCtx *ctx = RedisModule_GetThreadSafeContext(NULL);
    lockRedis(ctx);
    if (caller != NULL) RedisModule_SelectDb(ctx, caller->db);
    RedisModuleString *name = RedisModule_CreateString(ctx, key, key_len);
    RAI_Model *m = NULL;
    if (caller == NULL ||
        Caller_CheckKey(ctx, caller, name, REDISMODULE_CMD_KEY_ACCESS, err) == REDISMODULE_OK) {
        m = Model_FromKey(ctx, name, err);
    }
    RedisModule_FreeString(ctx, name);
    unlockRedis(ctx);
    RedisModule_FreeThreadSafeContext(ctx);
    if (m == NULL) return -1;
    int rc = -1;
    if (ninputs != m->ninputs) {
        Error_Set(err, RAI_ERR_INPUT_KEYS);
    } else if (m->noutputs != 0 && noutputs != m->noutputs) {
        Error_Set(err, RAI_ERR_OUTPUT_KEYS);
    } else {
        RAI_RunInfo info = {
            .size = sizeof(RAI_RunInfo),
            .worker_index = RunQueue_WorkerIndex(),
            .key = key,
            .key_len = key_len,
        };
        rc = m->be->model_run(m->handle, &info, inputs, ninputs, outputs, noutputs, err);
        for (size_t i = 0; rc == 0 && i < noutputs; i++) {
            if (outputs[i] == NULL) {
                Error_Set(err, RAI_ERR_OUTPUT_COUNT);
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
    lockRedis(ctx);
    Model_Release(m);
    unlockRedis(ctx);
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
    .error_take = hostErrorTake,
    .run_queue_count = RunQueue_Count,
};

const RAI_HostApi *HostApi_Get(void) {
    return &host_api;
}

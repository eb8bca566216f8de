/*
 * host_api.c - the RAI_HostApi a backend gets inside the host (see
 * docs/isolation.md, "The protocol"); its tensors are
 * host_tensor.c's.
 *
 * Memory is libc's: it shows in the host's RSS, not in Redis's used_memory.
 * Errors are the core's own RAI_Error (error.c compiled in), so texts follow
 * the same first-wins and CR/LF rules. The calls back into Redis
 * (redis_call, model_execute) go over the channel of the run that makes
 * them: host_calls.c.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isolation/host/host.h"

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

/* --- calls back into Redis: over the run's channel (host_calls.c) ------------ */

static RAI_CallReply *hostRedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                    size_t nargs) {
    return HostCall_RedisCall(cmd, args, lens, nargs);
}

static void hostCallReplyFree(RAI_CallReply *r) {
    HostCall_ReplyFree(r);
}

static int hostModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                            size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
                            RAI_Error *err) {
    return HostCall_ModelExecute(key, key_len, inputs, ninputs, outputs, noutputs, err);
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
    .tensor_create = HostTensor_Create,
    .tensor_adopt = HostTensor_Adopt,
    .tensor_create_strings = HostTensor_CreateStrings,
    .tensor_retain = HostTensor_Retain,
    .tensor_release = HostTensor_Release,
    .tensor_dtype = HostTensor_DType,
    .tensor_ndims = HostTensor_NDims,
    .tensor_dims = HostTensor_Dims,
    .tensor_length = HostTensor_Length,
    .tensor_byte_size = HostTensor_ByteSize,
    .tensor_data = HostTensor_Data,
    .tensor_string_at = HostTensor_StringAt,
    .redis_call = hostRedisCall,
    .call_reply_free = hostCallReplyFree,
    .model_execute = hostModelExecute,
    .error_take = hostErrorTake,
    .run_queue_count = hostRunQueueCount,
};

const RAI_HostApi *Host_Api(void) {
    return &api;
}

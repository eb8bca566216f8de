/*
 * error.c - RAI_Error, see error.h. Safe to use from worker threads:
 * it only allocates through Redis's thread-safe allocator.
 */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "redismodule.h"

void Error_Init(RAI_Error *err) {
    err->msg = NULL;
    err->code = 0;
}

void Error_Clear(RAI_Error *err) {
    if (err->msg) RedisModule_Free(err->msg);
    err->msg = NULL;
    err->code = 0;
}

int Error_IsSet(const RAI_Error *err) {
    return err->msg != NULL;
}

const char *Error_Message(const RAI_Error *err) {
    return err->msg ? err->msg : "ERR unknown error";
}

void Error_Set(RAI_Error *err, const char *msg) {
    if (err == NULL || err->msg) return;
    err->msg = RedisModule_Strdup(msg ? msg : "ERR unknown error");
    for (char *p = err->msg; *p; p++) {
        if (*p == '\r' || *p == '\n') *p = ' ';
    }
}

void Error_SetV(RAI_Error *err, const char *fmt, va_list ap) {
    if (err == NULL || err->msg) return;
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) {
        Error_Set(err, "ERR could not format error message");
        return;
    }
    char *buf = RedisModule_Alloc((size_t)n + 1);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    Error_Set(err, buf);
    RedisModule_Free(buf);
}

void Error_SetFmt(RAI_Error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    Error_SetV(err, fmt, ap);
    va_end(ap);
}

void Error_SetCode(RAI_Error *err, int code) {
    if (err && err->msg && err->code == 0) err->code = code;
}

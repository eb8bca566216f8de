/*
 * llapi_error.c - the LLAPI's errors and its version: what every other
 * file of the folder uses to fail.
 */
#include "llapi/llapi_internal.h"

void LLAPI_Fail(RAI_Error *err, int code, const char *msg) {
    Error_Set(err, msg);
    Error_SetCode(err, code);
}

int RedisAI_GetLLAPIVersion(void) {
    return REDISAI_LLAPI_VERSION;
}

/* --------------------------------- errors --------------------------------- */

int RedisAI_InitError(RAI_Error **err) {
    *err = RedisModule_Alloc(sizeof(RAI_Error));
    Error_Init(*err);
    return REDISMODULE_OK;
}

void RedisAI_ClearError(RAI_Error *err) {
    if (err) Error_Clear(err);
}

void RedisAI_FreeError(RAI_Error *err) {
    if (err == NULL) return;
    Error_Clear(err);
    RedisModule_Free(err);
}

/* NULL while no error is set, as in 1.2. Our messages never hold a
 * newline (Error_Set turns CR/LF into spaces), so the one-line form is the
 * same text. */
const char *RedisAI_GetError(RAI_Error *err) {
    return err ? err->msg : NULL;
}

const char *RedisAI_GetErrorOneLine(RAI_Error *err) {
    return err ? err->msg : NULL;
}

RedisAI_ErrorCode RedisAI_GetErrorCode(RAI_Error *err) {
    return err ? (RedisAI_ErrorCode)err->code : RedisAI_ErrorCode_OK;
}

/* dest becomes a copy of src (1.2 overwrote dest; we free what it held). */
void RedisAI_CloneError(RAI_Error *dest, const RAI_Error *src) {
    if (dest == NULL || dest == src) return;
    Error_Clear(dest);
    if (src == NULL || src->msg == NULL) return;
    dest->msg = RedisModule_Strdup(src->msg);
    dest->code = src->code;
}

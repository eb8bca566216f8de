/*
 * error.h - RAI_Error: the one error value that travels from a parser or a
 * backend to the reply. The first error recorded wins; CR/LF become spaces
 * so that every reply is one line (docs/commands.md, "Conventions").
 */
#ifndef REDISAI_ERROR_H
#define REDISAI_ERROR_H

#include <stdarg.h>

#include "redisai/backend_abi.h"

struct RAI_Error {
    char *msg; /* NULL while no error is set; owned, RedisModule_Alloc'd */
    int code;  /* the LLAPI's RedisAI_ErrorCode of msg; 0 (OK) until Error_SetCode */
};

void Error_Init(RAI_Error *err);
void Error_Clear(RAI_Error *err);
int Error_IsSet(const RAI_Error *err);
const char *Error_Message(const RAI_Error *err);
void Error_Set(RAI_Error *err, const char *msg);
void Error_SetFmt(RAI_Error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void Error_SetV(RAI_Error *err, const char *fmt, va_list ap);
/* Gives the error set on err its LLAPI code (redisai/llapi.h's
 * RedisAI_ErrorCode), unless it has one already: the commands never read
 * codes, the LLAPI sets them where it knows which operation failed. */
void Error_SetCode(RAI_Error *err, int code);

#endif

/*
 * noperm.h - the module's ACL refusals in the running server's words.
 * Redis 7.0 and 7.2+ word them differently (core/messages.h has both:
 * CALLER_NOPERM_KEY and CALLER_NOPERM_KEY_72). Valkey reports version 7.2.4,
 * so the wording is learned from the server itself: from the text of an
 * ACL DRYRUN refusal, asked the first time the module refuses something
 * (the same user's DRYRUN is refused too, so it always answers in words).
 * Until then, and on servers without ACL DRYRUN (6.2), 7.0's words.
 */
#ifndef REDISAI_NOPERM_H
#define REDISAI_NOPERM_H

#include <stddef.h>

#include "redismodule.h"

typedef enum NoPermKind {
    NOPERM_NONE,    /* DRYRUN allowed it, or gave no verdict (an arity error) */
    NOPERM_COMMAND, /* the command or subcommand */
    NOPERM_KEY,
    NOPERM_CHANNEL,
} NoPermKind;

typedef struct NoPermVerdict {
    NoPermKind kind;
    RedisModuleString *object; /* the command, key or channel refused; NULL with NOPERM_NONE */
} NoPermVerdict;

/* Asks ACL DRYRUN whether user `uname` may run argv, learning the server's
 * words from a refusal. Fills v; free its object with NoPerm_Clear. Needs
 * the GIL. */
NoPermKind NoPerm_DryRun(RedisModuleCtx *ctx, RedisModuleString *uname, RedisModuleString **argv,
                         int argc, NoPermVerdict *v);
void NoPerm_Clear(RedisModuleCtx *ctx, NoPermVerdict *v);

/* Learns the server's words, once, from a DRYRUN of argv for uname (one the
 * user is refused). */
void NoPerm_Learn(RedisModuleCtx *ctx, RedisModuleString *uname, RedisModuleString **argv,
                  int argc);

/* The refusal a client of this server gets, "NOPERM ...". The command text
 * names the user on 7.2+ servers; free it with RedisModule_Free. */
char *NoPerm_CommandText(RedisModuleString *uname, const char *cmd, size_t cmd_len);
const char *NoPerm_KeyText(void);
const char *NoPerm_ChannelText(void);

#endif

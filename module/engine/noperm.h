/*
 * noperm.h - the module's ACL refusals in the running server's words.
 * Redis 7.0 and 7.2+ word them differently (core/messages.h has both:
 * CALLER_NOPERM_KEY and CALLER_NOPERM_KEY_72). Valkey reports version 7.2.4,
 * so the wording is learned from the server itself, at load: the text of an
 * ACL DRYRUN refusal of a user of the module's own that may run nothing
 * (NoPerm_Init). Where that cannot be asked (6.2 has no ACL DRYRUN), 7.0's.
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

/* Learns the server's words; from OnLoad, on a server with the module ACL
 * API. The probe user lives only while the module holds Redis's lock (no
 * client can see it) and is never replicated or saved. */
void NoPerm_Init(RedisModuleCtx *ctx);

/* Asks ACL DRYRUN whether user `uname` may run argv. Fills v; free its
 * object with NoPerm_Clear. Needs the GIL. */
NoPermKind NoPerm_DryRun(RedisModuleCtx *ctx, RedisModuleString *uname, RedisModuleString **argv,
                         int argc, NoPermVerdict *v);
void NoPerm_Clear(RedisModuleCtx *ctx, NoPermVerdict *v);

/* The refusal a client of this server gets, "NOPERM ...". The command text
 * names the user on 7.2+ servers (uname NULL, a caller the module cannot
 * name: 7.0's words on every server); free it with RedisModule_Free. */
char *NoPerm_CommandText(RedisModuleString *uname, const char *cmd, size_t cmd_len);
const char *NoPerm_KeyText(void);
const char *NoPerm_ChannelText(void);

#endif

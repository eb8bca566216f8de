/*
 * caller.h - who a run acts for: the ACL user and the DB of the client that
 * started it. A DAG records its caller on the main thread; the worker that
 * runs a script publishes it in a thread-local, so that redis.execute and
 * redisAI.model_execute (host_api.c) run in the caller's DB and are checked
 * against the caller's ACL user, with Redis's own NOPERM texts.
 */
#ifndef REDISAI_CALLER_H
#define REDISAI_CALLER_H

#include "core/error.h"
#include "core/messages.h"
#include "redismodule.h"

typedef struct RAI_Caller {
    int known;              /* 0: not captured (an LLAPI run: trusted module code); every
                               check passes, DB 0 */
    RedisModuleString *user; /* owned; NULL: a client with no ACL user (unrestricted) */
    int db;
} RAI_Caller;

typedef enum CallerLookup {
    CALLER_FOUND,   /* c filled (its user may be NULL: unrestricted) */
    CALLER_UNKNOWN, /* a Lua script, or a server that cannot say: refuse what needs it */
} CallerLookup;

/* Main thread (or a worker holding the GIL inside redis.execute), in a
 * command's ctx. A client connection gives its user by id; inside our own
 * redis.execute the run's caller is inherited; another module's
 * RedisModule_Call runs as the user that module asked for with "C" (Redis
 * 7.2+ and Valkey attach it to the call's client), or with none, as Redis
 * runs that call, without "C". Lua's client is UNKNOWN (Redis hands modules
 * no script caller), and so is a module's call with "C" where the server's
 * RedisModule_Call has no dry run to ask safely (before 7.2). */
CallerLookup Caller_Capture(RedisModuleCtx *ctx, RAI_Caller *c);
void Caller_Clear(RAI_Caller *c);

/* Resolves the caller's user; NULL when the caller has no user (set *gone
 * when it had one that no longer exists, or on a server without the module
 * ACL API, core/server.h, where no user can be resolved). Free with
 * RedisModule_FreeModuleUser. Needs the GIL. */
RedisModuleUser *Caller_User(const RAI_Caller *c, int *gone);

/* Checks one key for the caller with REDISMODULE_CMD_KEY_* access flags.
 * Refused: an ACL LOG entry (reason key) and err = the server's NOPERM key
 * text (noperm.h), or CALLER_NOPERM_GONE. On a server without the module
 * ACL API, Caller_MayAccessAllKeys instead. Needs the GIL. */
int Caller_CheckKey(RedisModuleCtx *ctx, const RAI_Caller *c, RedisModuleString *key, int flags,
                    RAI_Error *err);

/* Where no single key can be checked (Redis 6.2): allowed when the caller
 * has no user, its user may access every key (ACL GETUSER's "allkeys"), or
 * the operator set UNSAFE_NO_ACL_CHECKS; else err = SERVER_NO_ACL_KEY (or
 * CALLER_NOPERM_GONE). Needs the GIL. */
int Caller_MayAccessAllKeys(RedisModuleCtx *ctx, const RAI_Caller *c, RAI_Error *err);

/* The caller of the op the current worker thread runs (NULL off a run). */
const RAI_Caller *Caller_Current(void);
/* Sets it, returning the previous value to restore. */
const RAI_Caller *Caller_SetCurrent(const RAI_Caller *c);

#endif

/*
 * command_arity.h - whether a command a run calls has the number of
 * arguments the server wants, checked before the caller's ACL as Redis
 * checks a client (with too few arguments a built-in command's key
 * positions lie past argv, and the ACL check would read them).
 *
 * The arity comes from the server's COMMAND INFO, read once per command
 * (and per subcommand of a container command: CONFIG GET, CLIENT LIST) and
 * kept. RedisModule_GetCommandKeys would say it too, but on Redis 7.0-7.4
 * and Valkey 8-9 it loses its key-position buffer on every call with more
 * keys than its stack holds (redis/redis#14208, valkey-io/valkey#3087).
 * Nothing here decides who may run what: the ACL check does.
 */
#ifndef REDISAI_COMMAND_ARITY_H
#define REDISAI_COMMAND_ARITY_H

#include "redismodule.h"

typedef enum CommandArity {
    COMMAND_ARITY_OK,
    COMMAND_ARITY_WRONG,   /* the call will answer Redis's arity error */
    COMMAND_ARITY_UNKNOWN, /* no such command or subcommand: the call says so */
} CommandArity;

/* Whether argv (argv[0] the command) has an arity the server accepts.
 * Needs the GIL; asks the server with ctx the first time it sees a name. */
CommandArity CommandArity_Check(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Forgets what was learned: commands come and go with the modules that
 * register them (MODULE LOAD, MODULE UNLOAD). Needs the GIL. */
void CommandArity_Reset(void);

#endif

/*
 * messages.h - the core's reply texts that more than one place sends, in
 * one place (texts that backends send too are include/redisai/reply_texts.h).
 * Each is RedisAI 1.2's (or Redis's) reply byte for byte unless its comment
 * says otherwise; docs/commands.md lists them per command. Only string
 * literals: nothing to link, usable by the backend host too.
 */
#ifndef REDISAI_MESSAGES_H
#define REDISAI_MESSAGES_H

/* --- Redis's own texts --- */
#define RAI_WRONGTYPE_MSG "WRONGTYPE Operation against a key holding the wrong kind of value"
/* Redis's reply to a deny-oom command over the limit (shared.oomerr). */
#define RAI_OOM_MSG "OOM command not allowed when used memory > 'maxmemory'."
#define RAI_ERR_WRONG_ARITY_FMT "ERR wrong number of arguments for '%s' command"
/* Redis 7.0.15's refusals (server.c processCommand), byte for byte. */
#define CALLER_NOPERM_KEY \
    "NOPERM this user has no permissions to access one of the keys used as arguments"
#define CALLER_NOPERM_CHANNEL \
    "NOPERM this user has no permissions to access one of the channels used as arguments"
#define CALLER_NOPERM_CMD_FMT "NOPERM this user has no permissions to run the '%.*s' command"
/* Redis 7.2+'s and Valkey's (server.c getAclErrorMessage): a server's own
 * words are learned from it (engine/noperm.h). */
#define CALLER_NOPERM_KEY_72 "NOPERM No permissions to access a key"
#define CALLER_NOPERM_CHANNEL_72 "NOPERM No permissions to access a channel"
#define CALLER_NOPERM_CMD_FMT_72 "NOPERM User %.*s has no permissions to run the '%.*s' command"
/* Ours: the user was deleted (ACL DELUSER) while its run waited or ran. */
#define CALLER_NOPERM_GONE "NOPERM the user that started this run no longer exists"

/* --- servers without the module ACL API (Redis 6.2; core/server.h) --- */
/* Ours: what only an operator may do cannot be checked there. */
#define SERVER_NO_ACL_CONFIG_FMT                                                             \
    "ERR AI.CONFIG %s is not available on this server (%s): it lacks the module ACL API "   \
    "(Redis 7.0) needed to check who may run it; set it with module arguments instead"
/* Ours: a script's call into Redis cannot be checked against its caller. */
#define SERVER_NO_ACL_CALL                                                                   \
    "ERR redis.execute is refused on this server: it lacks the module ACL API (Redis 7.0) "  \
    "needed to check the command against the caller's ACL user (the module argument "       \
    "UNSAFE_NO_ACL_CHECKS yes runs it unchecked)"
/* Ours: a key Redis did not check, for a user not allowed every key. */
#define SERVER_NO_ACL_KEY                                                                    \
    "ERR this server cannot check a key against the caller's ACL user: it lacks the module " \
    "ACL API (Redis 7.0) and the user may not access every key (the module argument "       \
    "UNSAFE_NO_ACL_CHECKS yes skips the check)"
/* Ours: a run's call while writes are paused, on a server whose
 * RedisModule_Call cannot refuse only the writes ("W", Redis 7.0). */
#define CALL_WRITES_PAUSED                                                                   \
    "ERR redis.execute is refused while writes are paused (CLIENT PAUSE or a failover) on "  \
    "this server: it cannot tell a write from a read here; run it again when the pause ends"

/* --- keys --- */
#define RAI_ERR_MODEL_KEY_EMPTY "ERR model key is empty"
#define RAI_ERR_SCRIPT_KEY_EMPTY "ERR script key is empty"

/* --- backends and devices --- */
#define RAI_ERR_UNSUPPORTED_BACKEND "ERR unsupported backend"
#define RAI_ERR_LOAD_BACKEND "ERR Could not load backend"
#define RAI_ERR_INVALID_DEVICE "ERR Invalid DEVICE"

/* --- MODELSTORE / MODELSET options --- */
#define RAI_ERR_BATCHSIZE "ERR Invalid argument for BATCHSIZE"
#define RAI_ERR_MINBATCHSIZE "ERR Invalid argument for MINBATCHSIZE"
#define RAI_ERR_MINBATCHTIMEOUT "ERR Invalid argument for MINBATCHTIMEOUT"
#define RAI_ERR_MINBATCH_WITHOUT_BATCH "ERR MINBATCHSIZE specified without BATCHSIZE"
#define RAI_ERR_MINBATCHTIMEOUT_WITHOUT_MINBATCH \
    "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE"
/* A model that waits for more samples than one batch may hold would never
 * run (1.2 accepted it and its MODELEXECUTE hung): refused by MODELSTORE,
 * MODELSET and RDB load. Not a 1.2 text: 1.2 had no such check. */
#define RAI_MINBATCH_TOO_LARGE_MSG "ERR MINBATCHSIZE cannot be larger than BATCHSIZE"
#define RAI_ERR_INPUTS_NOT_SPECIFIED "ERR INPUTS not specified"
#define RAI_ERR_OUTPUTS_NOT_SPECIFIED "ERR OUTPUTS not specified"
#define RAI_ERR_TF_INPUTS_NOT_SPECIFIED "ERR INPUTS not specified for TF"
#define RAI_ERR_TF_OUTPUTS_NOT_SPECIFIED "ERR OUTPUTS not specified for TF"
#define RAI_ERR_INPUT_COUNT_ARG "ERR Invalid argument for input_count"
#define RAI_ERR_OUTPUT_COUNT_ARG "ERR Invalid argument for output_count"

/* --- execution --- */
#define RAI_ERR_TIMEOUT_MISSING "ERR No value provided for TIMEOUT"
#define RAI_ERR_TIMEOUT_VALUE "ERR Invalid value for TIMEOUT"
#define RAI_ERR_TIMEOUT_IN_DAG "ERR TIMEOUT not allowed within a DAG command"
#define RAI_ERR_RUN_FAILED "ERR model run failed"
#define RAI_ERR_BATCH_SIZE "ERR Model did not generate the expected batch size"
#define RAI_ERR_DAG_EMPTY "ERR DAG is empty"
#define RAI_ERR_DAG_INPUT_NOT_FOUND "ERR INPUT key cannot be found in DAG"
/* Ours: an execution command where its client may not block. */
#define DAG_WOULD_BLOCK_FMT \
    "ERR %s cannot run inside a script's redis.execute or a module's call: it would block"
/* Ours: a run acts for its caller (engine/caller.h), who could not be named. */
#define DAG_CALLER_UNKNOWN_FMT \
    "ERR %s refused: the ACL user it would act for cannot be known here"

#endif

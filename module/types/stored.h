/*
 * stored.h - what models and scripts share as stored objects: the run queue
 * of their device, given by a factory the engine registers (types/ sits
 * below the engine and never names its queues), and the copies each makes
 * of what the user gave it.
 */
#ifndef REDISAI_STORED_H
#define REDISAI_STORED_H

#include <stddef.h>

#include "core/error.h"
#include "redismodule.h"

struct RAI_RunQueue;

/* The run queue of a device string, made if new (engine/run_queue.h's
 * RunQueue_Ensure): NULL after err. Main thread. */
typedef struct RAI_RunQueue *(*Stored_QueueFactory)(const char *device_str, RAI_Error *err);

/* Set once at module load, before any model or script can be built. */
void Stored_SetQueueFactory(Stored_QueueFactory factory);
/* The queue a model or script on device_str runs on; NULL after err. */
struct RAI_RunQueue *Stored_QueueFor(const char *device_str, RAI_Error *err);

/* The value of type at keyname, or NULL after err: `empty` when the key
 * does not exist, WRONGTYPE when it holds another type. Not retained:
 * valid while Redis's lock is held. */
void *Stored_ValueAt(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleType *type,
                     const char *empty, RAI_Error *err);
/* Deletes the key holding a value of type: NULL, or the error to reply
 * (`empty`, or WRONGTYPE), the key left as it was. */
const char *Stored_DeleteKey(RedisModuleCtx *ctx, RedisModuleString *keyname,
                             RedisModuleType *type, const char *empty);

/* A NUL-terminated copy of len bytes (a tag, a source: they may hold NULs). */
char *Stored_CopyBytes(const char *p, size_t len);
/* Copies of n C strings, in an array of at least one slot; free with
 * Stored_FreeNames. */
char **Stored_CopyNames(size_t n, const char *const *names);
void Stored_FreeNames(size_t n, char **names);

#endif

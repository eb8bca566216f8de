/*
 * config.h - the module's settings, set by the module arguments and
 * AI.CONFIG (commands/config_commands.c). Values are read on any thread but
 * written only on the main thread, before workers that read them exist, or
 * (BACKENDSPATH, MODEL_CHUNK_SIZE) only by the main thread that also reads
 * them.
 */
#ifndef REDISAI_CONFIG_H
#define REDISAI_CONFIG_H

#include "redismodule.h"

typedef struct RAI_Config {
    char *backends_path;
    long long threads_per_queue;
    /* THREADS_PER_QUEUE was given: the queues keep exactly that many
     * workers. Unset, each queue may add helper workers while runs wait
     * (engine/run_queue.c, docs/configuration.md). */
    int threads_per_queue_set;
    long long intra_op_parallelism;
    long long inter_op_parallelism;
    long long model_chunk_size;
    long long model_execution_timeout;
    long long backend_memory_limit;
    /* BACKENDS_CONFINED yes: every backend's real path must lie inside
     * BACKENDSPATH's real path. */
    int backends_confined;
    /* ISOLATE <kind> (repeatable): bit (1u << kind) set for each kind whose
     * backends run in a backend host process (docs/isolation.md). */
    unsigned isolate_kinds;
    /* BACKEND_START_TIMEOUT: ms from a host's spawn to its hello reply. */
    long long backend_start_timeout;
    /* INLINE_RUN_MAX_US: the longest latest run of a model that may run on
     * the main thread when nothing else waits (inline_run.h); 0: never.
     * Read and written on the main thread only. */
    long long inline_run_max_us;
    /* WORKER_SPIN_US: how long a run-queue worker with nothing to do waits
     * for the next request, yielding the CPU, before it sleeps, when at most
     * one client waits for a queued run (run_queue.c); 0: it sleeps at once. */
    long long worker_spin_us;
    /* WORKER_SPIN_US was given (module argument or AI.CONFIG SET): the
     * spins go on during a lone heavy run too (engine/thread_policy.h). */
    int worker_spin_us_set;
    /* UNSAFE_NO_ACL_CHECKS yes: on a server without the module ACL API
     * (core/server.h), run what cannot be checked against the caller's ACL
     * user (a script's redis.execute, keys Redis does not see) unchecked
     * instead of refusing it. No effect where the API exists. */
    int unsafe_no_acl_checks;
} RAI_Config;

extern RAI_Config rai_config;

#define RAI_MIN_BACKEND_START_TIMEOUT 1000 /* ms */
/* 0: every run queued, as RedisAI 1.2. With the spins (WORKER_SPIN_US) a
 * lone client's queued run beat its inline run on every model measured
 * (bench/results/threads-20261207T032731Z.json: 1.16-1.42x on the 2x2
 * models, 1.00-1.02x on the CNNs), so inline runs are an operator's choice. */
#define RAI_DEFAULT_INLINE_RUN_MAX_US 0
/* A run this long on the main thread is a stall that SLOWLOG would show;
 * the queue is there for such models. */
#define RAI_MAX_INLINE_RUN_MAX_US 100000
#define RAI_DEFAULT_WORKER_SPIN_US 200
#define RAI_MAX_WORKER_SPIN_US 10000
#define RAI_DEFAULT_MODEL_CHUNK_SIZE (511LL * 1024 * 1024) /* 535822336, as RedisAI 1.2 */

/* Sets defaults; module_path is the file redisai.so was loaded from. */
void Config_Init(const char *module_path);
/* BACKENDSPATH + "/" + path unless path is absolute; caller frees. */
char *Config_ResolvePath(const char *path);
void Config_SetBackendsPath(const char *path);
/* An integer of at least min into *out: 1, or 0 (nothing set). */
int Config_ParsePositive(RedisModuleString *s, long long min, long long *out);
/* INLINE_RUN_MAX_US from 0 to RAI_MAX_INLINE_RUN_MAX_US: 1, or 0 (not set). */
int Config_SetInlineMax(RedisModuleString *s);
/* WORKER_SPIN_US from 0 to RAI_MAX_WORKER_SPIN_US: 1, or 0 (not set). */
int Config_SetWorkerSpin(RedisModuleString *s);

#endif

/*
 * run_queue.h - one FIFO of DAGs per device (upper-cased device string),
 * each served by THREADS_PER_QUEUE worker threads. Queues are created on the
 * main thread and live for the life of the process.
 */
#ifndef REDISAI_RUN_QUEUE_H
#define REDISAI_RUN_QUEUE_H

#include "core/error.h"
#include "redismodule.h"

struct RAI_Dag;
typedef struct RAI_RunQueue RAI_RunQueue;

/* The queue for this device string, created (with its threads) if new.
 * Main thread only. */
RAI_RunQueue *RunQueue_Ensure(const char *device_str, RAI_Error *err);
/* Appends a DAG and wakes one worker. Any thread. */
void RunQueue_Push(RAI_RunQueue *q, struct RAI_Dag *dag);
const char *RunQueue_Name(const RAI_RunQueue *q);
/* Nothing queued and no worker running: a DAG pushed now would start at
 * once. A snapshot (another thread may push right after). Any thread. */
int RunQueue_Idle(RAI_RunQueue *q);
/* THREADS_PER_QUEUE of this queue (fixed at its creation). */
int RunQueue_Threads(const RAI_RunQueue *q);
/* Index of the calling worker within its queue, -1 off the workers. */
int RunQueue_WorkerIndex(void);
/* Queues created so far (at least CPU's, made at load). Main thread. */
size_t RunQueue_Count(void);
/* INFO fields ai_queue_<DEVICE>_bthread_n<i>_used_cpu_total. Main thread. */
void RunQueue_InfoCpu(RedisModuleInfoCtx *ctx);

#endif

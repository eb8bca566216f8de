/*
 * run_queue.h - one FIFO of DAGs per device (upper-cased device string),
 * each served by THREADS_PER_QUEUE worker threads (and, when that is unset,
 * a helper while runs wait: run_queue.c). Queues are created on the
 * main thread and live for the life of the process.
 */
#ifndef REDISAI_RUN_QUEUE_H
#define REDISAI_RUN_QUEUE_H

#include <stddef.h>

#include "core/error.h"
#include "engine/thread_policy.h"
#include "redismodule.h"

struct RAI_Dag;
typedef struct RAI_RunQueue RAI_RunQueue;
typedef struct RAI_QueueItem RAI_QueueItem;

/* What a worker does with its queue (engine/batch.c, set at module load
 * before any queue exists): take chooses, under the queue's lock, what runs
 * next into (*batch)[0..n), growing *batch (RedisModule_Realloc, *cap
 * entries) as needed, and returns n; 0 with *wait_ms the time until
 * something may become runnable (-1: until a push; RUNQUEUE_WAIT_ANSWERS:
 * not before the worker's runs in flight are answered). run runs those n
 * DAGs, the lock released. */
#define RUNQUEUE_WAIT_ANSWERS (-2)
typedef size_t (*RunQueue_TakeFn)(RAI_RunQueue *q, struct RAI_Dag ***batch, size_t *cap,
                                  long long *wait_ms);
typedef void (*RunQueue_RunFn)(struct RAI_Dag **dags, size_t n, RAI_RunQueue *q);
void RunQueue_SetPolicy(RunQueue_TakeFn take, RunQueue_RunFn run);
/* The queued items, for the take function (queue lock held): walk them in
 * order and unlink (and free) those it takes. */
RAI_QueueItem *RunQueue_First(RAI_RunQueue *q);
RAI_QueueItem *RunQueue_Next(RAI_QueueItem *it);
struct RAI_Dag *RunQueue_ItemDag(RAI_QueueItem *it);
void RunQueue_Unlink(RAI_RunQueue *q, RAI_QueueItem *prev, RAI_QueueItem *it);

/* The queue for this device string, created (with its threads) if new.
 * Main thread only. */
RAI_RunQueue *RunQueue_Ensure(const char *device_str, RAI_Error *err);
/* Appends a DAG and wakes one worker. Any thread. */
void RunQueue_Push(RAI_RunQueue *q, struct RAI_Dag *dag);
/* Queues dag ahead of every pushed DAG, behind the DAGs returned this way
 * before it and not yet taken: runs handed off that their backend never
 * started go back in the order they return (core/async_run.h), and a
 * batch's members with more ops go on in their order (Dag_ContinueBatch).
 * Wakes a worker as a push does. Any thread. */
void RunQueue_PushFront(RAI_RunQueue *q, struct RAI_Dag *dag);
/* Wakes every queue's workers that wait with DAGs queued: a parked DAG
 * (engine/dag_park.h) may have become runnable. Any thread. */
void RunQueue_WakeAll(void);
/* Nothing queued and no worker running: a DAG pushed now would start at
 * once. A snapshot (another thread may push right after). Any thread. */
int RunQueue_Idle(RAI_RunQueue *q);
/* The threads of this queue (fixed at its creation): THREADS_PER_QUEUE
 * workers and, when that was left unset, the helpers (run_queue.c). */
int RunQueue_Threads(const RAI_RunQueue *q);
/* Index of the calling worker within its queue (helpers after the
 * workers), -1 off the workers. */
int RunQueue_WorkerIndex(void);
/* The calling worker's queue as it took what it runs now: its runs
 * running or in flight (this one included), and the requests waiting, the
 * more of the DAGs queued and the clients blocked for a run beyond those
 * running (RunQueue_ClientsWaiting). What the thread policy goes by
 * (engine/run_threads.h). Worker threads only. */
RAI_RunLoad RunQueue_TakenLoad(void);
/* The calling thread is a queue's helper. */
int RunQueue_IsHelper(void);
/* The CPU queue's helpers (0 or 1), and DAGs helpers took since load (INFO). */
int RunQueue_Helpers(void);
unsigned long long RunQueue_HelperRuns(void);
/* Queues created so far (at least CPU's, made at load). Main thread. */
size_t RunQueue_Count(void);
/* INFO fields ai_queue_<DEVICE>_bthread_n<i>_used_cpu_total. Main thread. */
void RunQueue_InfoCpu(RedisModuleInfoCtx *ctx);

/* Clients waiting for a queued run: +1 when one is blocked for it, -1 when
 * its blocked client is freed (main thread). A worker with nothing to do
 * waits for the next push a while before it sleeps only when at most one
 * does and it is a lone client (RunQueue_LoneClient): its next request then
 * finds it awake. Inline runs
 * (inline_run.h) need none waiting. */
void RunQueue_ClientWaits(int delta);
long long RunQueue_ClientsWaiting(void);
/* A client's AI command starts a run (inline or queued), by its client id.
 * Main thread. */
void RunQueue_ClientStarts(unsigned long long client_id);
/* A lone client: at most one waits, and the latest two runs were started by
 * the same client. The spins (worker, main thread) are for it only: many
 * clients whose requests come in turns can all be answered at moments (a
 * load generator on the same CPUs), and spinning then only burns CPU. The
 * spins around isolated runs in flight (the worker's for answers, the
 * host's for the next run) go by RunQueue_FewClients instead. */
int RunQueue_LoneClient(void);
/* At most two clients wait: what two clients taking turns produce (four
 * keep three or four waiting). Any thread. */
int RunQueue_FewClients(void);

#endif

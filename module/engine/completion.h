/*
 * completion.h - the one way a finished DAG reaches its client
 * (docs/architecture.md, "A request's life").
 *
 * A worker (or an isolated run's answer, or a TIMEOUT) that finishes a
 * blocked client's DAG hands it here, and nowhere else. Redis's main thread
 * takes every finished DAG at its next pass of the event loop and unblocks
 * each client (RedisModule_UnblockClient); Redis then runs the reply
 * callbacks (engine/dag_reply.c) in that pass's beforeSleep. So:
 *   - a finished request waits for no other request's run: its bound is one
 *     pass of the event loop, whatever the workers do next;
 *   - N requests finished while the main thread was busy cost one wake-up:
 *     a worker writes the queue's eventfd only when the queue goes from
 *     empty to not empty, and not at all while the main thread is polling
 *     (engine/main_spin.h), which takes the queue itself in every pass;
 *   - Redis's unblocked-clients mutex is taken by the main thread only, so
 *     a worker never sleeps on it behind the main thread.
 * On a server without RedisModule_EventLoopAdd (Redis 6.2), or when the
 * eventfd cannot be made, a worker unblocks its client directly.
 */
#ifndef REDISAI_COMPLETION_H
#define REDISAI_COMPLETION_H

#include "redismodule.h"

/* At module load, main thread: the queue's eventfd in Redis's event loop. */
void Completion_Init(void);

/* A worker's run for bc is done: bc is unblocked with privdata at the main
 * thread's next pass. Any thread. */
void Completion_Push(RedisModuleBlockedClient *bc, void *privdata);

/* The main thread keeps its event loop polling (engine/main_spin.h): while
 * polling is set, a push writes no eventfd and Completion_Drain, called in
 * every pass, takes the queue. Main thread. */
void Completion_SetPolling(int polling);
/* Unblocks every client finished so far. Main thread. */
void Completion_Drain(void);

/* Since load (INFO): clients unblocked through the queue, passes that
 * found the queue not empty, eventfd writes by workers. */
long long Completion_Unblocked(void);
long long Completion_Drains(void);
long long Completion_Wakeups(void);

#endif

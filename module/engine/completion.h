/*
 * completion.h - the one way a finished DAG reaches its client
 * (docs/architecture.md, "A request's life").
 *
 * A worker (or an isolated run's answer, or a TIMEOUT) that finishes a
 * blocked client's DAG hands it here, and nowhere else:
 *   - the worker unblocks the client at once (RedisModule_UnblockClient):
 *     Redis appends it to its list of unblocked clients and writes its
 *     module pipe only when that list was empty, so the main thread is woken
 *     once for every client finished before its next pass, and answers them
 *     all in that pass's beforeSleep;
 *   - while the main thread polls its event loop (engine/main_spin.h), the
 *     worker only queues the client (a mutex of ours, no system call) and
 *     every pass unblocks what is queued: the main thread would otherwise
 *     meet the worker's pipe write on Redis's mutex at every pass.
 * So a finished request waits for no other request's run: its bound is one
 * pass of the event loop, and the main thread never waits for a worker
 * (nothing holds our mutex across a system call). It needs nothing of the
 * server beyond RedisModule_UnblockClient (Redis 6.2 included). It is also
 * the one place where a finished run could wait while Redis pauses writes.
 */
#ifndef REDISAI_COMPLETION_H
#define REDISAI_COMPLETION_H

#include "redismodule.h"

/* A worker's run for bc is done: bc is unblocked with privdata now or at
 * the main thread's next pass. Any thread. */
void Completion_Push(RedisModuleBlockedClient *bc, void *privdata);

/* Unblocks every client queued so far. Main thread: the main-thread spin's
 * passes. */
void Completion_Drain(void);

/* The main thread keeps its event loop polling (engine/main_spin.h): while
 * polling is set, finished clients are queued for its next pass. Main
 * thread; the caller drains after turning it off. */
void Completion_SetPolling(int polling);

/* Since load (INFO): finished clients handed here; of them, the ones a
 * worker unblocked itself (at most one wake-up of the main thread each);
 * passes of the spinning main thread that found clients queued. */
long long Completion_Count(void);
long long Completion_Wakeups(void);
long long Completion_Drains(void);

#endif

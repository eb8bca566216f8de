/*
 * run_gate.h - whether a run may start now without waiting for its backend
 * (docs/isolation.md, "Parked runs"). An isolated backend's host may be
 * restarting or re-creating the model: a worker that waited for it would
 * hold its whole queue, in-process models included. So the engine asks here
 * before a run op and parks the DAG in its queue until the time given
 * (run_queue.h); the isolation proxy answers, and wakes the queues when a
 * host or a model becomes runnable. Registered at module load, so that the
 * engine does not know which backends are isolated.
 */
#ifndef REDISAI_RUN_GATE_H
#define REDISAI_RUN_GATE_H

#include "redisai/backend_abi.h"

/* 0: run it now (it is runnable, or it fails at once with its own error);
 * else the monotonic ms (core/clock.h) at which to ask again. since_ms is
 * when this run was first found waiting: MODEL_EXECUTION_TIMEOUT counts
 * from then, after which it is run to fail. Any thread, no lock held. */
typedef long long (*RunGate_NotBeforeFn)(const RAI_BackendDescriptor *be, void *handle,
                                         long long since_ms, long long now_ms);

void RunGate_Register(RunGate_NotBeforeFn fn);
long long RunGate_NotBefore(const RAI_BackendDescriptor *be, void *handle, long long since_ms,
                            long long now_ms);
/* Who wakes the parked runs (the run queues), set by the engine at load;
 * RunGate_Wake calls it, from any thread, with no lock of the caller's held
 * that a queue's worker may take. */
void RunGate_SetWaker(void (*wake)(void));
void RunGate_Wake(void);
/* The calling thread parks runs instead of waiting for a host: run-queue
 * workers. Elsewhere (another module's thread through the LLAPI) a run
 * still waits for its host, up to MODEL_EXECUTION_TIMEOUT. */
void RunGate_SetParks(int on);
int RunGate_Parks(void);

#endif

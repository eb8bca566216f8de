/*
 * async_run.h - model runs a run-queue worker hands off without waiting
 * for them (docs/isolation.md, "Runs in flight"). The isolation proxy
 * registers its functions here at module load and the engine asks here, so
 * that the engine does not know which backends are isolated and the proxy
 * does not know about DAGs.
 *
 * A submitted run is answered on the thread that submitted it, from that
 * thread's `wait`: `done` runs there, never concurrently with the thread's
 * other work, so the engine continues a DAG where it would have after a
 * run it waited for.
 */
#ifndef REDISAI_ASYNC_RUN_H
#define REDISAI_ASYNC_RUN_H

#include <stddef.h>

#include "core/error.h"
#include "redisai/backend_abi.h"

/* A run's answer: rc 0 with `noutputs` tensors in outputs (owned by the
 * callee from now on; the array is not), rc -1 with the error recorded
 * in the err given to submit, or ASYNC_RUN_NOT_STARTED: the backend went
 * away before it started this run (it was queued behind the run that
 * failed), so the run may be queued again, as a run that was never handed
 * off would have waited in its run queue. */
#define ASYNC_RUN_NOT_STARTED 1
typedef void (*AsyncRun_DoneFn)(void *ctx, int rc, RAI_Tensor **outputs);

typedef struct AsyncRun_Ops {
    /* Runs a thread may have submitted and not yet had answered. */
    size_t max_in_flight;
    /* 1 when this backend's model runs can be submitted. */
    int (*accepts)(const RAI_BackendDescriptor *be);
    /* Hands the run to the backend: 0, and `done` runs later from this
     * thread's `wait` (err, which must live until then, holds the run's
     * error if it fails); or -1 with err set, and `done` never runs. The
     * inputs may be released as soon as it returns. */
    int (*submit)(void *model_handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                  size_t ninputs, size_t noutputs, AsyncRun_DoneFn done, void *ctx,
                  RAI_Error *err);
    /* Runs this thread submitted whose `done` has not run yet. */
    size_t (*pending)(void);
    /* How long the backend's side may look for this thread's next run
     * before it sleeps (WORKER_SPIN_US while at most one client waits, else
     * 0), told before each submit: an isolated host then catches a lone
     * client's next run without a wake-up. */
    void (*spin_hint)(long long spin_us);
    /* Runs the `done` of answered runs; when there are none, first waits up
     * to max_ms (-1: no limit but the runs' own deadlines) for an answer or
     * for wake_fd (-1: none) to become readable. */
    void (*wait)(int wake_fd, long long max_ms);
} AsyncRun_Ops;

void AsyncRun_Register(const AsyncRun_Ops *ops);
/* The registered functions, or NULL. */
const AsyncRun_Ops *AsyncRun_Get(void);
/* Whether the calling thread may submit: set by run-queue workers, whose
 * loop waits for the answers. Any other thread runs and waits as before. */
void AsyncRun_Allow(int allowed);
int AsyncRun_Allowed(void);

#endif

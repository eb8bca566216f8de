/*
 * dag_park.h - a DAG whose next op waits for its backend is parked in its
 * queue (docs/isolation.md, "Parked runs"): the worker takes the requests
 * behind it, and takes it again once its backend can run it
 * (core/run_gate.h), or it has waited MODEL_EXECUTION_TIMEOUT and runs to
 * fail with the backend's own error.
 */
#ifndef REDISAI_DAG_PARK_H
#define REDISAI_DAG_PARK_H

#include "engine/dag.h"

/* 1 when dag's next op may not start yet: *wait_ms (-1: none so far) is
 * lowered to the time until it should be looked at again. 0 when it may
 * run now. Any worker thread; the queue's lock may be held. */
int Dag_Parked(RAI_Dag *dag, long long now_ms, long long *wait_ms);

#endif

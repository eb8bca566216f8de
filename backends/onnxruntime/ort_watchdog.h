/*
 * ort_watchdog.h - MODEL_EXECUTION_TIMEOUT for ONNX runs.
 *
 * Every run registers its own OrtRunOptions for the length of OrtApi::Run.
 * One thread, started at the first run, sleeps until the earliest deadline
 * and sets the terminate flag of each run past it; ORT checks the flag
 * between nodes (Loop bodies included) and fails the run with
 * "Exiting due to terminate flag being set to true." RedisAI 1.2 did this
 * from Redis's cron; a backend has no Redis API, and a thread of its own
 * terminates at the deadline rather than at the next cron tick.
 */
#ifndef REDISAI_ORT_WATCHDOG_H
#define REDISAI_ORT_WATCHDOG_H

#include <time.h>

#include <onnxruntime_c_api.h>

#include "redisai/backend_abi.h"

/* Lives on the stack of the run it watches. */
typedef struct OrtWatchedRun {
    OrtRunOptions *options;
    struct timespec deadline; /* CLOCK_MONOTONIC */
    int terminated;
    struct OrtWatchedRun *prev;
    struct OrtWatchedRun *next;
} OrtWatchedRun;

/* Starts watching run until timeout_ms from now. Returns 1, or 0 after
 * error_set when the watchdog thread cannot be started. */
int ort_watchdog_watch(OrtWatchedRun *run, OrtRunOptions *options, long long timeout_ms,
                       RAI_Error *err);

/* Stops watching; after it returns the watchdog no longer touches the
 * run's options, so they may be released. */
void ort_watchdog_unwatch(OrtWatchedRun *run);

#endif

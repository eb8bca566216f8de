/*
 * clock.h - monotonic time in ms and µs, for timeouts and run times (never
 * wall-clock: a clock step must not fire or stretch a TIMEOUT).
 */
#ifndef REDISAI_CLOCK_H
#define REDISAI_CLOCK_H

#include <pthread.h>
#include <time.h>

static inline long long Clock_NowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static inline long long Clock_NowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* A condition variable whose timed waits count on CLOCK_MONOTONIC: a
 * deadline of the wall clock moves when the clock is stepped. */
static inline int Clock_CondInit(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

/* The absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait
 * on a condition of Clock_CondInit. */
static inline struct timespec Clock_DeadlineAfterMs(long long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

#endif

/*
 * clock.h - monotonic time in ms and µs, for timeouts and run times (never
 * wall-clock: a clock step must not fire or stretch a TIMEOUT).
 */
#ifndef REDISAI_CLOCK_H
#define REDISAI_CLOCK_H

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

#endif

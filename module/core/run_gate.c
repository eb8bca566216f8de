/*
 * run_gate.c - the registry of run_gate.h.
 */
#include "core/run_gate.h"

#include <stddef.h>

static RunGate_NotBeforeFn not_before;
static void (*waker)(void);
static __thread int parks;

void RunGate_Register(RunGate_NotBeforeFn fn) {
    not_before = fn;
}

long long RunGate_NotBefore(const RAI_BackendDescriptor *be, void *handle, long long since_ms,
                            long long now_ms) {
    return not_before && be ? not_before(be, handle, since_ms, now_ms) : 0;
}

void RunGate_SetWaker(void (*wake)(void)) {
    waker = wake;
}

void RunGate_Wake(void) {
    if (waker) waker();
}

void RunGate_SetParks(int on) {
    parks = on;
}

int RunGate_Parks(void) {
    return parks;
}

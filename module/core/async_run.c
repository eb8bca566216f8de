/*
 * async_run.c - the registry of async_run.h.
 */
#include "core/async_run.h"

static const AsyncRun_Ops *registered;
static __thread int allowed;

void AsyncRun_Register(const AsyncRun_Ops *ops) {
    registered = ops;
}

const AsyncRun_Ops *AsyncRun_Get(void) {
    return registered;
}

void AsyncRun_Allow(int on) {
    allowed = on;
}

int AsyncRun_Allowed(void) {
    return allowed;
}

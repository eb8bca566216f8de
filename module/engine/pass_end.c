/*
 * pass_end.c - see pass_end.h. Main thread only: no locks.
 */
#include "engine/pass_end.h"

static PassEnd_Fn due[PASS_END_MAX];
static int ndue = 0;

static void onTimer(RedisModuleCtx *ctx, void *data) {
    REDISMODULE_NOT_USED(ctx);
    REDISMODULE_NOT_USED(data);
    /* A function may ask for the next pass's end: copy the list first. */
    PassEnd_Fn fns[PASS_END_MAX];
    int n = ndue;
    for (int i = 0; i < n; i++) fns[i] = due[i];
    ndue = 0;
    for (int i = 0; i < n; i++) fns[i]();
}

void PassEnd_Call(RedisModuleCtx *ctx, PassEnd_Fn fn) {
    for (int i = 0; i < ndue; i++) {
        if (due[i] == fn) return;
    }
    if (ndue == PASS_END_MAX) return; /* a fixed set of callers: never reached */
    if (ndue == 0) RedisModule_CreateTimer(ctx, 0, onTimer, NULL);
    due[ndue++] = fn;
}

/*
 * test_blocked_time.c - module/engine/blocked_time.c: when a blocked
 * client's runs may start, and what Redis is told. Redis's timer and
 * Start/End functions are fakes that record their calls; the release
 * points are driven by hand: the next Hold, and the timer firing.
 */
#include <pthread.h>
#include <time.h>

#include "engine/blocked_time.h"
#include "unit.h"
#include "unit_shim.h"

static int timers;
static RedisModuleTimerProc timer_cb;
static int starts, ends;

static RedisModuleTimerID fakeCreateTimer(RedisModuleCtx *ctx, mstime_t period,
                                          RedisModuleTimerProc cb, void *data) {
    (void)ctx;
    (void)data;
    CHECK_INT(period, 0);
    timers++;
    timer_cb = cb;
    return (RedisModuleTimerID)timers;
}

static int fakeStart(RedisModuleBlockedClient *bc) {
    (void)bc;
    __atomic_add_fetch(&starts, 1, __ATOMIC_SEQ_CST);
    return REDISMODULE_OK;
}

static int fakeEnd(RedisModuleBlockedClient *bc) {
    (void)bc;
    __atomic_add_fetch(&ends, 1, __ATOMIC_SEQ_CST);
    return REDISMODULE_OK;
}

/* Redis's event loop reaching the timer. */
static void firePassEnd(void) {
    RedisModuleTimerProc cb = timer_cb;
    timer_cb = NULL;
    if (CHECK(cb != NULL)) cb(NULL, NULL);
}

/* Distinct blocked-client handles; blocked_time.c never looks inside. */
static char clients[8];
#define BC(i) ((RedisModuleBlockedClient *)&clients[i])

static int released(RAI_BlockedTime *t) {
    return __atomic_load_n(&t->released, __ATOMIC_SEQ_CST);
}

/* Held until the next Hold or the end of the pass; one timer per pass. */
static void testReleasePoints(void) {
    RAI_BlockedTime a, b, c;
    BlockedTime_Hold(NULL, &a, BC(0));
    CHECK(!released(&a));
    CHECK_INT(timers, 1);
    BlockedTime_Hold(NULL, &b, BC(1)); /* a's command has returned */
    CHECK(released(&a));
    CHECK(!released(&b));
    CHECK_INT(timers, 1);
    firePassEnd();
    CHECK(released(&b));
    BlockedTime_Hold(NULL, &c, BC(2)); /* the next pass needs a timer again */
    CHECK_INT(timers, 2);
    firePassEnd();
    CHECK(released(&c));
}

/* A DAG answered before its release is forgotten: nothing writes to it. */
static void testForget(void) {
    RAI_BlockedTime d, e;
    BlockedTime_Hold(NULL, &d, BC(3));
    BlockedTime_Forget(&d);
    d.released = 7; /* as freed memory would be reused */
    firePassEnd();
    CHECK_INT(d.released, 7);
    BlockedTime_Hold(NULL, &d, BC(3));
    BlockedTime_Hold(NULL, &e, BC(4));
    BlockedTime_Forget(&d); /* released already: nothing to undo */
    firePassEnd();
    CHECK(released(&e));
}

/* No blocked client (the LLAPI, inline runs) or no Start/End in this
 * Redis: nothing to wait for and nothing told. */
static void testNothingMeasured(void) {
    RAI_BlockedTime f, g;
    int timers_before = timers, starts_before = starts;
    BlockedTime_Hold(NULL, &f, NULL);
    CHECK(released(&f));
    BlockedTime_RunStart(&f);
    BlockedTime_RunEnd(&f);
    RedisModule_BlockedClientMeasureTimeStart = NULL;
    BlockedTime_Hold(NULL, &g, BC(5));
    CHECK(released(&g));
    BlockedTime_RunStart(&g);
    RedisModule_BlockedClientMeasureTimeStart = fakeStart;
    CHECK_INT(timers, timers_before);
    CHECK_INT(starts, starts_before);
    CHECK_INT(ends, 0);
}

static void *worker(void *arg) {
    BlockedTime_RunStart(arg); /* returns once released, then tells Start */
    return NULL;
}

static void sleepMs(long ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A worker does not start before the release; it starts
 * at once after it; each run is one Start and one End. */
static void testWorkerWaits(void) {
    RAI_BlockedTime h, i;
    int starts_before = starts;
    BlockedTime_Hold(NULL, &h, BC(6));
    pthread_t th;
    CHECK_INT(pthread_create(&th, NULL, worker, &h), 0);
    sleepMs(30); /* long enough for it to be asleep on the condition variable */
    CHECK_INT(__atomic_load_n(&starts, __ATOMIC_SEQ_CST), starts_before);
    BlockedTime_Hold(NULL, &i, BC(7)); /* releases h */
    pthread_join(th, NULL);
    CHECK_INT(starts, starts_before + 1);
    BlockedTime_RunEnd(&h);
    CHECK_INT(ends, 1);

    CHECK_INT(pthread_create(&th, NULL, worker, &i), 0);
    sleepMs(1);
    firePassEnd();
    pthread_join(th, NULL);
    CHECK_INT(starts, starts_before + 2);
    BlockedTime_RunStart(&h); /* a later op of a released DAG: no wait */
    CHECK_INT(starts, starts_before + 3);
}

int main(void) {
    UnitShim_Init();
    RedisModule_CreateTimer = fakeCreateTimer;
    RedisModule_BlockedClientMeasureTimeStart = fakeStart;
    RedisModule_BlockedClientMeasureTimeEnd = fakeEnd;
    testReleasePoints();
    testForget();
    testNothingMeasured();
    testWorkerWaits();
    return Unit_Done("blocked_time");
}

/*
 * test_blocked_time.c - module/engine/blocked_time.c: when a blocked
 * client's runs may start, and what Redis is told. Redis's timer and
 * Start/End functions and its one-shot event are fakes that record their
 * calls; the release points are driven by hand: the next Hold, the timer
 * firing, and the one-shot event a waiting worker asks for.
 */
#include <pthread.h>
#include <time.h>

#include "engine/blocked_time.h"
#include "unit.h"
#include "unit_shim.h"

static int timers;
static RedisModuleTimerProc timer_cb;
static int starts, ends;
static int oneshots; /* atomic: asked for by workers */
static RedisModuleEventLoopOneShotFunc oneshot_cb; /* atomic */

static int fakeAddOneShot(RedisModuleEventLoopOneShotFunc func, void *data) {
    (void)data;
    __atomic_store_n(&oneshot_cb, func, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&oneshots, 1, __ATOMIC_SEQ_CST);
    return REDISMODULE_OK;
}

/* Redis's event loop woken by the module pipe. */
static void fireOneShot(void) {
    RedisModuleEventLoopOneShotFunc cb = __atomic_exchange_n(&oneshot_cb, NULL, __ATOMIC_SEQ_CST);
    if (CHECK(cb != NULL)) cb(NULL);
}

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

/* A server that cannot wake its loop for the module (6.2): nothing is
 * held, so a run never waits for a timer the loop may sleep through. */
static void testNoOneShot(void) {
    RAI_BlockedTime j;
    int timers_before = timers;
    RedisModule_EventLoopAddOneShot = NULL;
    BlockedTime_Hold(NULL, &j, BC(0));
    CHECK(released(&j));
    CHECK_INT(timers, timers_before);
    RedisModule_EventLoopAddOneShot = fakeAddOneShot;
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

/* A client blocked by a command Redis ran after the pass's timers (from
 * beforeSleep): its worker asks for one wake of the event loop, two
 * waiting workers ask once, and the one-shot event releases them. */
static void testWorkerWakesTheLoop(void) {
    RAI_BlockedTime k;
    if (timer_cb != NULL) firePassEnd(); /* a pass begins with no timer pending */
    if (__atomic_load_n(&oneshot_cb, __ATOMIC_SEQ_CST) != NULL) {
        fireOneShot(); /* the wake asked for in the test before, as the loop runs it */
    }
    int starts_before = starts, oneshots_before = oneshots;
    BlockedTime_Hold(NULL, &k, BC(1));
    pthread_t th1, th2;
    CHECK_INT(pthread_create(&th1, NULL, worker, &k), 0);
    CHECK_INT(pthread_create(&th2, NULL, worker, &k), 0);
    sleepMs(30);
    CHECK_INT(__atomic_load_n(&starts, __ATOMIC_SEQ_CST), starts_before);
    CHECK_INT(__atomic_load_n(&oneshots, __ATOMIC_SEQ_CST), oneshots_before + 1);
    fireOneShot(); /* the loop woke: no command is running */
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    CHECK_INT(starts, starts_before + 2);
    CHECK(released(&k));
    firePassEnd(); /* the pass's timer still comes: nothing left to release */

    /* The next wait asks again. */
    RAI_BlockedTime l;
    BlockedTime_Hold(NULL, &l, BC(2));
    CHECK_INT(pthread_create(&th1, NULL, worker, &l), 0);
    sleepMs(30);
    CHECK_INT(__atomic_load_n(&oneshots, __ATOMIC_SEQ_CST), oneshots_before + 2);
    fireOneShot();
    pthread_join(th1, NULL);
    CHECK_INT(starts, starts_before + 3);
    firePassEnd();
}

int main(void) {
    UnitShim_Init();
    RedisModule_CreateTimer = fakeCreateTimer;
    RedisModule_BlockedClientMeasureTimeStart = fakeStart;
    RedisModule_BlockedClientMeasureTimeEnd = fakeEnd;
    RedisModule_EventLoopAddOneShot = fakeAddOneShot;
    testReleasePoints();
    testForget();
    testNothingMeasured();
    testNoOneShot();
    testWorkerWaits();
    testWorkerWakesTheLoop();
    return Unit_Done("blocked_time");
}

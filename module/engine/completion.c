/*
 * completion.c - see completion.h. Two arrays: workers append to `queue`
 * under `lock`; the main thread swaps it with its own empty one under the
 * lock and unblocks the clients with the lock released.
 */
#include "engine/completion.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct Finished {
    RedisModuleBlockedClient *bc;
    void *privdata;
} Finished;

typedef struct FinishedList {
    Finished *items;
    size_t n;
    size_t cap;
} FinishedList;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FinishedList queue;    /* under lock */
static int polling = 0;       /* under lock: the main thread drains every pass */
static FinishedList draining; /* main thread */
static int ready_fd = -1;     /* -1: workers unblock directly */

static long long unblocked = 0; /* main thread */
static long long drains = 0;    /* main thread */
static long long wakeups = 0;   /* atomic */

static void onReadable(int fd, void *data, int mask) {
    REDISMODULE_NOT_USED(data);
    REDISMODULE_NOT_USED(mask);
    /* Reset before the queue is taken: a push after the take writes again
     * and is seen next pass; a push before it is in what is taken. */
    uint64_t v;
    if (read(fd, &v, sizeof(v)) < 0) v = 0;
    Completion_Drain();
}

void Completion_Init(void) {
    if (RedisModule_EventLoopAdd == NULL || ready_fd >= 0) return;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return;
    if (RedisModule_EventLoopAdd(fd, REDISMODULE_EVENTLOOP_READABLE, onReadable, NULL) !=
        REDISMODULE_OK) {
        close(fd);
        return;
    }
    ready_fd = fd;
}

void Completion_Push(RedisModuleBlockedClient *bc, void *privdata) {
    if (ready_fd < 0) {
        RedisModule_UnblockClient(bc, privdata);
        return;
    }
    pthread_mutex_lock(&lock);
    if (queue.n == queue.cap) {
        queue.cap = queue.cap ? queue.cap * 2 : 64;
        queue.items = RedisModule_Realloc(queue.items, queue.cap * sizeof(Finished));
    }
    queue.items[queue.n++] = (Finished){.bc = bc, .privdata = privdata};
    int wake = queue.n == 1 && !polling;
    pthread_mutex_unlock(&lock);
    if (wake) {
        uint64_t one = 1;
        if (write(ready_fd, &one, sizeof(one)) < 0) one = 0; /* already readable */
        __atomic_add_fetch(&wakeups, 1, __ATOMIC_RELAXED);
    }
}

void Completion_SetPolling(int on) {
    pthread_mutex_lock(&lock);
    polling = on;
    pthread_mutex_unlock(&lock);
}

void Completion_Drain(void) {
    pthread_mutex_lock(&lock);
    FinishedList taken = queue;
    queue = draining;
    queue.n = 0;
    pthread_mutex_unlock(&lock);
    if (taken.n > 0) drains++;
    for (size_t i = 0; i < taken.n; i++) {
        RedisModule_UnblockClient(taken.items[i].bc, taken.items[i].privdata);
    }
    unblocked += (long long)taken.n;
    taken.n = 0;
    draining = taken;
}

long long Completion_Unblocked(void) {
    return unblocked;
}

long long Completion_Drains(void) {
    return drains;
}

long long Completion_Wakeups(void) {
    return __atomic_load_n(&wakeups, __ATOMIC_RELAXED);
}

/*
 * ort_watchdog.c - see ort_watchdog.h.
 */
#include "onnxruntime/ort_watchdog.h"

#include <pthread.h>
#include <string.h>

#include "onnxruntime/ort_env.h"

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a run was added, on CLOCK_MONOTONIC */
    pthread_once_t once;
    int started; /* 0: not yet, 1: running, -1: pthread_create failed */
    int start_errno;
    OrtWatchedRun *runs;
    /* When the watchdog wakes next on its own; has_alarm 0: it sleeps with
     * no deadline. A run whose deadline is not earlier needs no wake-up:
     * runs of one server share one timeout, so a new run's deadline is
     * nearly always later than those already watched, and waking the
     * watchdog for each run cost a context switch per request. */
    struct timespec alarm;
    int has_alarm;
} dog = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .once = PTHREAD_ONCE_INIT,
};

static int before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Never returns: the backend is never unloaded (see ort_backend.c). */
static void *watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&dog.lock);
    for (;;) {
        struct timespec now, next = {0};
        int waiting = 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (OrtWatchedRun *r = dog.runs; r; r = r->next) {
            if (r->terminated) {
                continue;
            }
            if (!before(&now, &r->deadline)) {
                ort_discard(ort.api->RunOptionsSetTerminate(r->options));
                r->terminated = 1;
                continue;
            }
            if (!waiting || before(&r->deadline, &next)) {
                next = r->deadline;
                waiting = 1;
            }
        }
        dog.alarm = next;
        dog.has_alarm = waiting;
        if (waiting) {
            pthread_cond_timedwait(&dog.wake, &dog.lock, &next);
        } else {
            pthread_cond_wait(&dog.wake, &dog.lock);
        }
    }
    return NULL;
}

static void start(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dog.wake, &attr);
    pthread_condattr_destroy(&attr);

    pthread_t thread;
    int rc = pthread_create(&thread, NULL, watch, NULL);
    if (rc != 0) {
        dog.started = -1;
        dog.start_errno = rc;
        return;
    }
    pthread_detach(thread);
    dog.started = 1;
}

int ort_watchdog_watch(OrtWatchedRun *run, OrtRunOptions *options, long long timeout_ms,
                       RAI_Error *err) {
    pthread_once(&dog.once, start);
    if (dog.started != 1) {
        ort.host->error_set(err, "ERR could not start the ONNX run watchdog thread: %s",
                            strerror(dog.start_errno));
        return 0;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    *run = (OrtWatchedRun){.options = options, .deadline = deadline};

    pthread_mutex_lock(&dog.lock);
    run->next = dog.runs;
    if (dog.runs) {
        dog.runs->prev = run;
    }
    dog.runs = run;
    /* The watchdog may be asleep until a later deadline, or with none: then
     * it must recompute. An alarm at or before this deadline finds the run
     * (it is in the list before the lock is released). */
    if (!dog.has_alarm || before(&deadline, &dog.alarm)) {
        dog.alarm = deadline;
        dog.has_alarm = 1;
        pthread_cond_signal(&dog.wake);
    }
    pthread_mutex_unlock(&dog.lock);
    return 1;
}

void ort_watchdog_unwatch(OrtWatchedRun *run) {
    pthread_mutex_lock(&dog.lock);
    if (run->prev) {
        run->prev->next = run->next;
    } else {
        dog.runs = run->next;
    }
    if (run->next) {
        run->next->prev = run->prev;
    }
    pthread_mutex_unlock(&dog.lock);
}

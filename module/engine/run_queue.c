/*
 * run_queue.c - run queues and their worker threads, see run_queue.h.
 * Workers sleep on a condition variable until a DAG arrives (no polling),
 * so an idle server costs nothing and a request starts without delay.
 *
 * A worker may hand model runs off without waiting (core/async_run.h: an
 * isolated backend's host runs them). It then takes the next request at
 * once, up to the bound of runs in flight, and while any are in flight it
 * waits in the backend's poll (answers, or the queue's eventfd for a new
 * DAG) instead of on the condition variable. Answers continue their DAGs
 * on this thread, as a run waited for would have.
 *
 * Helpers: when THREADS_PER_QUEUE is unset, the CPU queue also gets a helper
 * worker (none on one core, none when a backend kind is isolated: there a
 * worker already keeps several runs in flight). The helper sleeps on a
 * condition variable of its own, so a push never wakes it instead of an idle
 * worker, and takes a DAG only while more DAGs wait than the workers not
 * running one will take, and the queue's recent DAGs took more of a worker's
 * CPU than their requests take Redis's main thread (and
 * RUNQUEUE_HELP_MIN_RUN_US at least). Then the workers, not the main thread,
 * bound the throughput, and a second run at once uses the core the main
 * thread leaves (the CNNs at 32 clients on 2 cores: THREADS_PER_QUEUE 2 gave
 * 1.18-1.50x). A 2x2 model's DAG takes a worker about 5 us, less than the
 * main thread spends on its request (12-15 us): the main thread bounds
 * those, and a second worker only takes CPU from it (0.84-0.93x), so no
 * helper for them. One client queues one DAG at a time, which the worker
 * takes, so the helper never runs for it, and it never spins. It skips DAGs
 * whose model batches (batch.c): the user asked those to gather while the
 * worker runs.
 */
#include "engine/run_queue.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/async_run.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/cpu_topology.h"
#include "core/device.h"
#include "core/run_gate.h"
#include "redismodule.h"

struct RAI_QueueItem {
    struct RAI_Dag *dag;
    struct RAI_QueueItem *next;
};

struct RAI_RunQueue {
    char name[32];
    pthread_mutex_t lock;
    pthread_cond_t ready;
    RAI_QueueItem *head;
    RAI_QueueItem *tail;
    RAI_QueueItem *returned_tail; /* the last of the DAGs at the head that PushFront returned */
    long queued;   /* DAGs in the list, under lock */
    int nthreads;  /* the workers: THREADS_PER_QUEUE */
    int nhelpers;  /* helper workers, after them in threads[] */
    int busy; /* workers and helpers running a DAG, under lock */
    int workers_busy;  /* workers (not helpers) running a DAG, under lock */
    int helpers_idle;  /* helpers waiting on help, under lock */
    long long run_us;  /* recent CPU time per DAG taken, a moving average, under lock */
    unsigned long takes; /* takes so far, under lock: one in RUNQUEUE_SAMPLE is timed */
    pthread_cond_t help;
    long in_flight; /* runs handed off and not answered, all workers, under lock */
    int pollers;    /* workers waiting on answers: a push writes wake_fd */
    int wake_fd;    /* eventfd, -1 if none could be made (then no hand-off) */
    unsigned long pushes; /* pushes so far: written under lock, read by a spinning worker */
    pthread_t *threads;
    struct RAI_RunQueue *next;
};

typedef struct WorkerArgs {
    RAI_RunQueue *queue;
    int index;
} WorkerArgs;

static RAI_RunQueue *queues = NULL;
static __thread int worker_index = -1;
static __thread int is_helper = 0;
static __thread RAI_RunLoad taken_load;
static unsigned long long helper_runs = 0; /* atomic */

int RunQueue_WorkerIndex(void) {
    return worker_index;
}

RAI_RunLoad RunQueue_TakenLoad(void) {
    return taken_load;
}

int RunQueue_IsHelper(void) {
    return is_helper;
}

unsigned long long RunQueue_HelperRuns(void) {
    return __atomic_load_n(&helper_runs, __ATOMIC_RELAXED);
}

/* The worker's own CPU time, not the wall clock: on few cores a worker
 * preempted by Redis's main thread or the clients would make a short run
 * look long. A system call, so one take in RUNQUEUE_SAMPLE is timed (and
 * every take until the first sample). */
#define RUNQUEUE_SAMPLE 8
static long long threadCpuUs(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Redis's main thread's CPU time per run started, over the latest
 * RUNQUEUE_MAIN_SAMPLE (RunQueue_ClientStarts): all its work, other
 * clients' commands included. Written by the main thread, read by workers. */
#define RUNQUEUE_MAIN_SAMPLE 64
static long long main_us_per_start = 0;

/* The least CPU per DAG for which a helper runs: below it a run is too
 * short to be worth a second thread whatever the main thread spends. */
#define RUNQUEUE_HELP_MIN_RUN_US 10

/* Runs are long enough that the workers, not the main thread, bound the
 * throughput (see the top): a DAG takes a worker more CPU than its request
 * takes the main thread, and at least RUNQUEUE_HELP_MIN_RUN_US. Lock held. */
static int runsAreLong(const RAI_RunQueue *q) {
    return q->run_us >= RUNQUEUE_HELP_MIN_RUN_US &&
           q->run_us > __atomic_load_n(&main_us_per_start, __ATOMIC_RELAXED);
}

/* More DAGs wait than the workers not running one will take, and runs are
 * long. Not "every worker runs one": Redis's main thread pushes a whole
 * event loop's requests before the worker their first push woke takes one,
 * and a helper woken only once the worker runs starts a wake-up late (the
 * Torch CNN at 32 clients: the helper ran 42-45% of the requests, not half,
 * and 0.94-0.96x of THREADS_PER_QUEUE 2). Lock held. */
static int helperWanted(const RAI_RunQueue *q) {
    return q->queued > q->nthreads - q->workers_busy && runsAreLong(q);
}

/* Whether this take is timed: -1 if not, else the thread's CPU time now.
 * Lock held. */
static long long sampleStart(RAI_RunQueue *q) {
    if (q->takes++ % RUNQUEUE_SAMPLE != 0 && q->run_us > 0) return -1;
    return threadCpuUs();
}

/* A timed policy_run of n DAGs ended: the queue's recent CPU time per DAG,
 * weighing the latest a quarter. Lock held. */
static void noteRunTime(RAI_RunQueue *q, long long start_cpu, long long end_cpu, size_t n) {
    if (start_cpu < 0) return;
    long long per = (end_cpu - start_cpu) / (long long)(n ? n : 1);
    if (per < 1) per = 1;
    q->run_us = q->run_us > 0 ? q->run_us + (per - q->run_us) / 4 : per;
}

/* What workers take and how they run it (RunQueue_SetPolicy). */
static RunQueue_TakeFn policy_take;
static RunQueue_RunFn policy_run;

/* Runs the n DAGs taken, the lock released, timing one take in
 * RUNQUEUE_SAMPLE. Called and returns under lock. */
static void runTaken(RAI_RunQueue *q, struct RAI_Dag **batch, size_t n) {
    long long start = sampleStart(q);
    /* A thread stays busy until it comes back for the lock, after its
     * client was answered: a lone client's next DAG may be taken by the
     * helper meanwhile (long runs). Beyond the blocked clients, a busy
     * thread is one such (or an LLAPI run, which blocks no client). */
    int running = q->busy + (int)q->in_flight;
    long clients = (long)RunQueue_ClientsWaiting();
    if (clients >= 1 && running > clients) running = (int)clients;
    long blocked = clients - running;
    taken_load = (RAI_RunLoad){.running = running,
                               .waiting = q->queued > blocked ? q->queued : blocked};
    pthread_mutex_unlock(&q->lock);
    policy_run(batch, n, q);
    long long end = start >= 0 ? threadCpuUs() : 0;
    pthread_mutex_lock(&q->lock);
    noteRunTime(q, start, end, n);
}

void RunQueue_SetPolicy(RunQueue_TakeFn take, RunQueue_RunFn run) {
    policy_take = take;
    policy_run = run;
}

RAI_QueueItem *RunQueue_First(RAI_RunQueue *q) {
    return q->head;
}

RAI_QueueItem *RunQueue_Next(RAI_QueueItem *it) {
    return it->next;
}

struct RAI_Dag *RunQueue_ItemDag(RAI_QueueItem *it) {
    return it->dag;
}

void RunQueue_Unlink(RAI_RunQueue *q, RAI_QueueItem *prev, RAI_QueueItem *it) {
    if (prev) {
        prev->next = it->next;
    } else {
        q->head = it->next;
    }
    if (q->tail == it) q->tail = prev;
    if (q->returned_tail == it) q->returned_tail = prev; /* returned DAGs lead the queue */
    q->queued--;
    RedisModule_Free(it);
}

/* This worker's runs in flight, counted into q->in_flight (lock held). */
static size_t inFlight(RAI_RunQueue *q, const AsyncRun_Ops *async, long *counted) {
    size_t n = async ? async->pending() : 0;
    q->in_flight += (long)n - *counted;
    *counted = (long)n;
    return n;
}

/* Clients waiting for a queued run: written by the main thread, read by
 * workers deciding whether to spin. */
static long long clients_waiting = 0;

/* Before a worker with runs in flight sleeps in the backend's poll: when at
 * most two clients wait, an answer comes within a run's time, and a
 * sleeping worker would pay a wake-up for it (and its host a doorbell). So
 * it looks for answers (no system call on an isolated channel's ring) for
 * up to WORKER_SPIN_US, yielding the CPU to anything runnable. Two, not
 * only a lone client (the other spins' rule): two clients taking turns keep
 * one run in flight and sleep at every hop otherwise (isolated / in-process
 * 0.57 at two clients, 0.72-0.98 with this; docs/isolation.md "The ring").
 * 1 when an answer was delivered or, when watch_pushes, a push came. Lock
 * released. */
static int spinForAnswers(RAI_RunQueue *q, const AsyncRun_Ops *async, int watch_pushes,
                          unsigned long seen) {
    long long spin_us = rai_config.worker_spin_us;
    if (spin_us <= 0 || !RunQueue_FewClients()) return 0;
    size_t before = async->pending();
    long long end = Clock_NowUs() + spin_us;
    while (Clock_NowUs() < end) {
        async->wait(-1, 0);
        if (async->pending() < before) return 1;
        if (watch_pushes && __atomic_load_n(&q->pushes, __ATOMIC_ACQUIRE) != seen) return 1;
        sched_yield();
    }
    return 0;
}

/* Waits (lock released) for answers, a push when wake_fd >= 0, or wait_ms;
 * the answers' DAGs go on here. */
static void awaitAnswers(RAI_RunQueue *q, const AsyncRun_Ops *async, int wake_fd,
                         long long wait_ms) {
    if (wake_fd >= 0) {
        /* Nothing could be taken just now, under the lock: an earlier push's
         * signal is spent. Reset it, or it would wake every poll from now on. */
        uint64_t v;
        if (read(wake_fd, &v, sizeof(v)) < 0) v = 0;
        q->pollers++;
    }
    unsigned long seen = q->pushes;
    pthread_mutex_unlock(&q->lock);
    if (wait_ms == 0 || !spinForAnswers(q, async, wake_fd >= 0, seen)) async->wait(wake_fd, wait_ms);
    pthread_mutex_lock(&q->lock);
    if (wake_fd >= 0) q->pollers--;
}

void RunQueue_ClientWaits(int delta) {
    __atomic_add_fetch(&clients_waiting, delta, __ATOMIC_RELAXED);
}

long long RunQueue_ClientsWaiting(void) {
    return __atomic_load_n(&clients_waiting, __ATOMIC_RELAXED);
}

static unsigned long long last_client = 0; /* main thread */
static int same_client = 0;                 /* written by the main thread */

static unsigned long starts = 0;    /* main thread */
static long long main_cpu_mark = -1; /* main thread */

void RunQueue_ClientStarts(unsigned long long client_id) {
    __atomic_store_n(&same_client, client_id == last_client, __ATOMIC_RELAXED);
    last_client = client_id;
    if (++starts % RUNQUEUE_MAIN_SAMPLE == 0) {
        long long now = threadCpuUs();
        if (main_cpu_mark >= 0) {
            __atomic_store_n(&main_us_per_start, (now - main_cpu_mark) / RUNQUEUE_MAIN_SAMPLE,
                             __ATOMIC_RELAXED);
        }
        main_cpu_mark = now;
    }
}

int RunQueue_LoneClient(void) {
    return __atomic_load_n(&same_client, __ATOMIC_RELAXED) && RunQueue_ClientsWaiting() <= 1;
}

int RunQueue_FewClients(void) {
    return RunQueue_ClientsWaiting() <= 2;
}

/* Before a worker with nothing to do sleeps: when at most one client waits
 * (the lone client whose reply is on its way), its next request comes within
 * a round trip, and a sleeping worker would pay a wake-up for it (about 30 us
 * on these machines, more from an idle CPU). So it looks for a push for up
 * to WORKER_SPIN_US, yielding the CPU to anything runnable. With more
 * clients waiting the main thread needs the CPUs, and the worker sleeps at
 * once. Called and returns under lock: 1 when a push came. */
static int spinForPush(RAI_RunQueue *q) {
    long long spin_us = rai_config.worker_spin_us;
    if (spin_us <= 0 || !RunQueue_LoneClient()) return 0;
    unsigned long seen = q->pushes;
    pthread_mutex_unlock(&q->lock);
    long long end = Clock_NowUs() + spin_us;
    while (__atomic_load_n(&q->pushes, __ATOMIC_ACQUIRE) == seen && Clock_NowUs() < end) {
        sched_yield();
    }
    pthread_mutex_lock(&q->lock);
    /* A push between the last look and the lock signalled no one: seen here. */
    return q->pushes != seen;
}

static void *workerMain(void *arg) {
    WorkerArgs *wa = arg;
    RAI_RunQueue *q = wa->queue;
    worker_index = wa->index;
    RedisModule_Free(wa);
    size_t cap = 16;
    struct RAI_Dag **batch = RedisModule_Alloc(sizeof(struct RAI_Dag *) * cap);
    /* Registered at module load, before any queue exists. */
    const AsyncRun_Ops *async = q->wake_fd >= 0 ? AsyncRun_Get() : NULL;
    AsyncRun_Allow(async != NULL);
    RunGate_SetParks(1);
    long counted = 0;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        long long wait_ms;
        size_t pending = inFlight(q, async, &counted);
        if (pending > 0) {
            /* Answers already read are delivered first: their clients wait. */
            awaitAnswers(q, async, -1, 0);
            pending = inFlight(q, async, &counted);
        }
        if (pending >= (async ? async->max_in_flight : 1) && pending > 0) {
            awaitAnswers(q, async, -1, -1); /* at the bound: only an answer helps */
            continue;
        }
        size_t n = policy_take(q, &batch, &cap, &wait_ms);
        if (n > 0) {
            q->busy++;
            q->workers_busy++;
            runTaken(q, batch, n);
            q->workers_busy--;
            q->busy--;
            continue;
        }
        if (pending > 0) {
            if (wait_ms == RUNQUEUE_WAIT_ANSWERS) {
                awaitAnswers(q, async, -1, -1);
            } else {
                awaitAnswers(q, async, q->wake_fd, wait_ms);
            }
            continue;
        }
        if (wait_ms == RUNQUEUE_WAIT_ANSWERS) wait_ms = -1; /* not reached: none in flight */
        if (wait_ms < 0 && spinForPush(q)) continue;
        if (wait_ms < 0) {
            pthread_cond_wait(&q->ready, &q->lock);
        } else {
            /* MINBATCHTIMEOUT or a held DAG's TIMEOUT: on the monotonic
             * clock, as the deadlines are (Clock_CondInit). */
            struct timespec ts = Clock_DeadlineAfterMs(wait_ms + 1);
            pthread_cond_timedwait(&q->ready, &q->lock, &ts);
        }
    }
    return NULL;
}

/* A helper (see the top): no spin, no hand-off, no timed wait; whatever it
 * leaves (a batch gathering, a DAG held) a worker takes. */
static void *helperMain(void *arg) {
    WorkerArgs *wa = arg;
    RAI_RunQueue *q = wa->queue;
    worker_index = wa->index;
    is_helper = 1;
    RedisModule_Free(wa);
    AsyncRun_Allow(0);
    RunGate_SetParks(1);
    size_t cap = 16;
    struct RAI_Dag **batch = RedisModule_Alloc(sizeof(struct RAI_Dag *) * cap);
    /* Once it has run a DAG it goes on while DAGs wait and runs stay long,
     * as a worker would: sleeping whenever the worker is between two DAGs
     * costs a wake-up per DAG under load. */
    int going = 0;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        long long wait_ms;
        int wanted = going ? q->head != NULL && runsAreLong(q) : helperWanted(q);
        size_t n = wanted ? policy_take(q, &batch, &cap, &wait_ms) : 0;
        if (n == 0) {
            going = 0;
            q->helpers_idle++;
            pthread_cond_wait(&q->help, &q->lock);
            q->helpers_idle--;
            continue;
        }
        going = 1;
        q->busy++;
        runTaken(q, batch, n);
        __atomic_add_fetch(&helper_runs, n, __ATOMIC_RELAXED);
        q->busy--;
    }
    return NULL;
}

/* Links item in after `after` (NULL: first), then wakes a worker, on the
 * condition variable or, if one waits in the backend's poll for answers, on
 * wake_fd. Lock held. */
static void linkAfter(RAI_RunQueue *q, RAI_QueueItem *after, RAI_QueueItem *item) {
    item->next = after ? after->next : q->head;
    if (after) {
        after->next = item;
    } else {
        q->head = item;
    }
    if (q->tail == after) q->tail = item;
    q->queued++;
    __atomic_store_n(&q->pushes, q->pushes + 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&q->ready);
    if (q->helpers_idle > 0 && helperWanted(q)) pthread_cond_signal(&q->help);
    if (q->pollers > 0) {
        uint64_t one = 1;
        if (write(q->wake_fd, &one, sizeof(one)) < 0) one = 0; /* already signalled */
    }
}

void RunQueue_Push(RAI_RunQueue *q, struct RAI_Dag *dag) {
    RAI_QueueItem *item = RedisModule_Alloc(sizeof(*item));
    item->dag = dag;
    pthread_mutex_lock(&q->lock);
    linkAfter(q, q->tail, item);
    pthread_mutex_unlock(&q->lock);
}

void RunQueue_PushFront(RAI_RunQueue *q, struct RAI_Dag *dag) {
    RAI_QueueItem *item = RedisModule_Alloc(sizeof(*item));
    item->dag = dag;
    pthread_mutex_lock(&q->lock);
    /* After the DAGs returned before it and not yet taken: returned DAGs
     * keep the order they return in, all ahead of the pushed ones. */
    linkAfter(q, q->returned_tail, item);
    q->returned_tail = item;
    pthread_mutex_unlock(&q->lock);
}

int RunQueue_Idle(RAI_RunQueue *q) {
    pthread_mutex_lock(&q->lock);
    int idle = q->head == NULL && q->busy == 0 && q->in_flight == 0;
    pthread_mutex_unlock(&q->lock);
    return idle;
}

int RunQueue_Threads(const RAI_RunQueue *q) {
    return q->nthreads + q->nhelpers;
}

int RunQueue_Helpers(void) {
    for (const RAI_RunQueue *q = queues; q; q = q->next) {
        if (!strcmp(q->name, "CPU")) return q->nhelpers;
    }
    return 0;
}

size_t RunQueue_Count(void) {
    size_t n = 0;
    for (const RAI_RunQueue *q = queues; q; q = q->next) n++;
    return n;
}

void RunQueue_InfoCpu(RedisModuleInfoCtx *ctx) {
    for (RAI_RunQueue *q = queues; q; q = q->next) {
        for (int i = 0; i < q->nthreads + q->nhelpers; i++) {
            char field[96], value[64];
            snprintf(field, sizeof(field), "queue_%s_bthread_n%d_used_cpu_total", q->name, i + 1);
            clockid_t cid;
            struct timespec ts;
            if (pthread_getcpuclockid(q->threads[i], &cid) == 0 && clock_gettime(cid, &ts) == 0) {
                snprintf(value, sizeof(value), "%ld.%06ld", (long)ts.tv_sec, ts.tv_nsec / 1000);
            } else {
                snprintf(value, sizeof(value), "N/A");
            }
            RedisModule_InfoAddFieldCString(ctx, field, value);
        }
    }
}

/* Helpers for a new queue (see the top): the CPU queue's, with
 * THREADS_PER_QUEUE unset, no kind isolated and a second CPU. Other
 * devices' queues keep their workers: a second thread per GPU was not
 * measured here. The CPU queue is made at load, on the main thread: the
 * topology is read here, before any run needs it. */
static int helpersFor(const char *name) {
    if (rai_config.threads_per_queue_set || rai_config.isolate_kinds != 0) return 0;
    if (strcmp(name, "CPU") != 0) return 0;
    return CpuTopology_Get()->logical >= 2 ? 1 : 0;
}

RAI_RunQueue *RunQueue_Ensure(const char *device_str, RAI_Error *err) {
    char name[32];
    Device_QueueName(device_str, name, sizeof(name));
    for (RAI_RunQueue *q = queues; q; q = q->next) {
        if (!strcmp(q->name, name)) return q;
    }
    RAI_RunQueue *q = RedisModule_Calloc(1, sizeof(*q));
    snprintf(q->name, sizeof(q->name), "%s", name);
    pthread_mutex_init(&q->lock, NULL);
    Clock_CondInit(&q->ready);
    q->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_cond_init(&q->help, NULL);
    q->nthreads = (int)rai_config.threads_per_queue;
    int helpers = helpersFor(name);
    q->threads = RedisModule_Calloc(q->nthreads + helpers, sizeof(pthread_t));
    for (int i = 0; i < q->nthreads; i++) {
        WorkerArgs *wa = RedisModule_Alloc(sizeof(*wa));
        *wa = (WorkerArgs){.queue = q, .index = i};
        if (pthread_create(&q->threads[i], NULL, workerMain, wa) != 0) {
            RedisModule_Free(wa);
            /* Threads already started keep serving; a queue with none
             * would hang its clients, so refuse it. */
            if (i == 0) {
                if (q->wake_fd >= 0) close(q->wake_fd);
                RedisModule_Free(q->threads);
                RedisModule_Free(q);
                Error_Set(err, "ERR Could not initialize queue on requested device");
                return NULL;
            }
            q->nthreads = i;
            helpers = 0;
            break;
        }
    }
    for (int i = 0; i < helpers; i++) {
        WorkerArgs *wa = RedisModule_Alloc(sizeof(*wa));
        *wa = (WorkerArgs){.queue = q, .index = q->nthreads + i};
        if (pthread_create(&q->threads[q->nthreads + i], NULL, helperMain, wa) != 0) {
            RedisModule_Free(wa);
            break; /* the workers serve alone */
        }
        q->nhelpers++;
    }
    q->next = queues;
    __atomic_store_n(&queues, q, __ATOMIC_RELEASE); /* RunQueue_WakeAll reads it anywhere */
    return q;
}

void RunQueue_WakeAll(void) {
    for (RAI_RunQueue *q = __atomic_load_n(&queues, __ATOMIC_ACQUIRE); q; q = q->next) {
        pthread_mutex_lock(&q->lock);
        if (q->head) {
            __atomic_store_n(&q->pushes, q->pushes + 1, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&q->ready);
            if (q->pollers > 0) {
                uint64_t one = 1;
                if (write(q->wake_fd, &one, sizeof(one)) < 0) one = 0; /* already signalled */
            }
        }
        pthread_mutex_unlock(&q->lock);
    }
}

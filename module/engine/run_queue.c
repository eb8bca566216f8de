/*
 * run_queue.c - run queues and their worker threads, see run_queue.h.
 * Workers sleep on a condition variable until a DAG arrives (no polling),
 * so an idle server costs nothing and a request starts without delay.
 */
#include "engine/run_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "engine/dag.h"
#include "types/model.h"
#include "core/device.h"
#include "redismodule.h"

typedef struct QueueItem {
    struct RAI_Dag *dag;
    struct QueueItem *next;
} QueueItem;

struct RAI_RunQueue {
    char name[32];
    pthread_mutex_t lock;
    pthread_cond_t ready;
    QueueItem *head;
    QueueItem *tail;
    int nthreads;
    int busy; /* workers running a DAG, under lock */
    pthread_t *threads;
    struct RAI_RunQueue *next;
};

typedef struct WorkerArgs {
    RAI_RunQueue *queue;
    int index;
} WorkerArgs;

static RAI_RunQueue *queues = NULL;
static __thread int worker_index = -1;

int RunQueue_WorkerIndex(void) {
    return worker_index;
}

const char *RunQueue_Name(const RAI_RunQueue *q) {
    return q->name;
}

static long long nowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void unlink_item(RAI_RunQueue *q, QueueItem *prev, QueueItem *it) {
    if (prev) {
        prev->next = it->next;
    } else {
        q->head = it->next;
    }
    if (q->tail == it) q->tail = prev;
}

static size_t takeAlone(RAI_RunQueue *q, QueueItem *prev, QueueItem *it, RAI_Dag **batch) {
    unlink_item(q, prev, it);
    batch[0] = it->dag;
    RedisModule_Free(it);
    return 1;
}

/* A DAG held for MINBATCHSIZE keeps its TIMEOUT: once it has passed the DAG
 * is taken alone, so the engine answers +TIMEDOUT; until then the worker
 * must wake at its deadline. */
static int heldExpired(const RAI_Dag *dag, long long now, long long *wait_ms) {
    if (dag->timeout_ms <= 0) return 0;
    long long left = dag->timeout_ms - (now - dag->enqueued_ms);
    if (left <= 0) return 1;
    if (*wait_ms < 0 || left < *wait_ms) *wait_ms = left;
    return 0;
}

/* Under the lock: takes the first DAG that can run now, with the queued
 * DAGs that batch with it (spec 7.1), into batch[]. A DAG whose model wants
 * MINBATCHSIZE and has not got it stays queued (with every DAG of that
 * model) until enough arrive or MINBATCHTIMEOUT passes; *wait_ms is then
 * the time to the nearest such timeout or held DAG's TIMEOUT (-1: none).
 * Returns the count. */
static size_t takeWork(RAI_RunQueue *q, RAI_Dag ***batch, size_t *cap, long long *wait_ms) {
    long long now = nowMs();
    *wait_ms = -1;
    const RAI_Model *held[16];
    size_t nheld = 0;
    QueueItem *prev = NULL;
    for (QueueItem *it = q->head; it; prev = it, it = it->next) {
        RAI_Dag *dag = it->dag;
        RAI_DagOp *op = Dag_BatchableOp(dag);
        long long d0 = op ? Dag_BatchDim(dag) : -1;
        if (op == NULL || d0 < 0 || d0 >= op->model->batchsize) {
            return takeAlone(q, prev, it, *batch);
        }
        const RAI_Model *m = op->model;
        int is_held = 0;
        for (size_t i = 0; i < nheld; i++) is_held |= held[i] == m;
        if (is_held) {
            if (heldExpired(dag, now, wait_ms)) return takeAlone(q, prev, it, *batch);
            continue;
        }

        size_t n = 1;
        long long total = d0;
        (*batch)[0] = dag;
        for (QueueItem *j = it->next; j && total < m->batchsize; j = j->next) {
            long long d;
            if (!Dag_BatchCompatible(dag, j->dag) || (d = Dag_BatchDim(j->dag)) < 0) continue;
            if (n == *cap) {
                *cap *= 2;
                *batch = RedisModule_Realloc(*batch, sizeof(RAI_Dag *) * *cap);
            }
            (*batch)[n++] = j->dag;
            total += d;
        }
        if (m->minbatchsize > 0 && total < m->minbatchsize) {
            long long waited = now - dag->enqueued_ms;
            if (m->minbatchtimeout <= 0 || waited < m->minbatchtimeout) {
                if (m->minbatchtimeout > 0) {
                    long long left = m->minbatchtimeout - waited;
                    if (*wait_ms < 0 || left < *wait_ms) *wait_ms = left;
                }
                if (nheld < sizeof(held) / sizeof(held[0])) held[nheld++] = m;
                if (heldExpired(dag, now, wait_ms)) return takeAlone(q, prev, it, *batch);
                continue;
            }
        }
        /* Unlink every member: the first is `it`, the others follow it. */
        size_t k = 0;
        QueueItem *p = prev;
        for (QueueItem *j = it; j && k < n;) {
            QueueItem *next = j->next;
            if (j->dag == (*batch)[k]) {
                unlink_item(q, p, j);
                RedisModule_Free(j);
                k++;
            } else {
                p = j;
            }
            j = next;
        }
        return n;
    }
    return 0;
}

static void *workerMain(void *arg) {
    WorkerArgs *wa = arg;
    RAI_RunQueue *q = wa->queue;
    worker_index = wa->index;
    RedisModule_Free(wa);
    size_t cap = 16;
    RAI_Dag **batch = RedisModule_Alloc(sizeof(RAI_Dag *) * cap);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        long long wait_ms;
        size_t n = takeWork(q, &batch, &cap, &wait_ms);
        if (n > 0) {
            q->busy++;
            pthread_mutex_unlock(&q->lock);
            Dag_RunBatch(batch, n, q);
            pthread_mutex_lock(&q->lock);
            q->busy--;
            continue;
        }
        if (wait_ms < 0) {
            pthread_cond_wait(&q->ready, &q->lock);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (wait_ms + 1) / 1000;
            ts.tv_nsec += ((wait_ms + 1) % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&q->ready, &q->lock, &ts);
        }
    }
    return NULL;
}

void RunQueue_Push(RAI_RunQueue *q, struct RAI_Dag *dag) {
    QueueItem *item = RedisModule_Alloc(sizeof(*item));
    item->dag = dag;
    item->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail) {
        q->tail->next = item;
    } else {
        q->head = item;
    }
    q->tail = item;
    pthread_cond_signal(&q->ready);
    pthread_mutex_unlock(&q->lock);
}

int RunQueue_Idle(RAI_RunQueue *q) {
    pthread_mutex_lock(&q->lock);
    int idle = q->head == NULL && q->busy == 0;
    pthread_mutex_unlock(&q->lock);
    return idle;
}

int RunQueue_Threads(const RAI_RunQueue *q) {
    return q->nthreads;
}

size_t RunQueue_Count(void) {
    size_t n = 0;
    for (const RAI_RunQueue *q = queues; q; q = q->next) n++;
    return n;
}

void RunQueue_InfoCpu(RedisModuleInfoCtx *ctx) {
    for (RAI_RunQueue *q = queues; q; q = q->next) {
        for (int i = 0; i < q->nthreads; i++) {
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

RAI_RunQueue *RunQueue_Ensure(const char *device_str, RAI_Error *err) {
    char name[32];
    Device_QueueName(device_str, name, sizeof(name));
    for (RAI_RunQueue *q = queues; q; q = q->next) {
        if (!strcmp(q->name, name)) return q;
    }
    RAI_RunQueue *q = RedisModule_Calloc(1, sizeof(*q));
    snprintf(q->name, sizeof(q->name), "%s", name);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->ready, NULL);
    q->nthreads = (int)rai_config.threads_per_queue;
    q->threads = RedisModule_Calloc(q->nthreads, sizeof(pthread_t));
    for (int i = 0; i < q->nthreads; i++) {
        WorkerArgs *wa = RedisModule_Alloc(sizeof(*wa));
        *wa = (WorkerArgs){.queue = q, .index = i};
        if (pthread_create(&q->threads[i], NULL, workerMain, wa) != 0) {
            RedisModule_Free(wa);
            /* Threads already started keep serving; a queue with none
             * would hang its clients, so refuse it. */
            if (i == 0) {
                RedisModule_Free(q->threads);
                RedisModule_Free(q);
                Error_Set(err, "ERR Could not initialize queue on requested device");
                return NULL;
            }
            q->nthreads = i;
            break;
        }
    }
    q->next = queues;
    queues = q;
    return q;
}

/*
 * run_queue.c - run queues and their worker threads, see run_queue.h.
 * Workers sleep on a condition variable until a DAG arrives (no polling),
 * so an idle server costs nothing and a request starts without delay.
 */
#include "run_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "dag.h"
#include "device.h"
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

static void *workerMain(void *arg) {
    WorkerArgs *wa = arg;
    RAI_RunQueue *q = wa->queue;
    worker_index = wa->index;
    RedisModule_Free(wa);
    for (;;) {
        pthread_mutex_lock(&q->lock);
        while (q->head == NULL) pthread_cond_wait(&q->ready, &q->lock);
        QueueItem *item = q->head;
        q->head = item->next;
        if (q->head == NULL) q->tail = NULL;
        pthread_mutex_unlock(&q->lock);
        struct RAI_Dag *dag = item->dag;
        RedisModule_Free(item);
        Dag_RunStep(dag, q);
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

/*
 * backend_threads.h - the intra-op thread count a backend uses when the user
 * left INTRA_OP_PARALLELISM at 0 ("the backend chooses").
 *
 * A framework's own default is one intra-op thread per core (ONNX Runtime,
 * TensorFlow) or per physical core (libtorch's OpenMP pool). Inside Redis
 * those cores are not free: Redis's main thread parses every request and
 * writes every reply, and each run-queue worker is already a thread calling
 * the framework. On a machine with few cores the pool's threads spin or
 * yield against both (measured on 2 cores, 32 clients, MNIST-sized CNN:
 * libtorch's 2-thread pool served 150-1,600 req/s, 1 thread 6,200; ONNX
 * Runtime's spinning pool thread took half of the server's CPU; see
 * docs/performance.md). So the default gives each worker of a queue an
 * equal share of the cores left after the main thread:
 *
 *     intra = max(1, (cores - 1) / THREADS_PER_QUEUE)
 *
 * where cores is the number this process may run on (its CPU affinity), so
 * 1 on 2 cores, 3 on 4 cores, 15 on 16 cores with one worker per queue. An
 * explicit INTRA_OP_PARALLELISM always wins. The engine computes the same
 * count (module/engine/thread_policy.c) and tells each run it, or one
 * thread per physical core for a lone heavy run (RAI_RunInfo's
 * intra_op_threads, ABI 1.6).
 */
#ifndef REDISAI_BACKEND_THREADS_H
#define REDISAI_BACKEND_THREADS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <unistd.h>

#include "redisai/backend_abi.h"

static inline long long rai_usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) {
            return n;
        }
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* INTRA_OP_PARALLELISM when set, else the default above. */
static inline long long rai_intra_op_threads(const RAI_HostApi *host) {
    long long intra = host->config_get(RAI_CONFIG_INTRA_OP_PARALLELISM);
    if (intra > 0) {
        return intra;
    }
    long long per_queue = host->config_get(RAI_CONFIG_THREADS_PER_QUEUE);
    if (per_queue < 1) {
        per_queue = 1;
    }
    long long n = (rai_usable_cores() - 1) / per_queue;
    return n < 1 ? 1 : n;
}

#endif

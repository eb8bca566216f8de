/*
 * run_threads.c - see run_threads.h.
 */
#include "engine/run_threads.h"

#include "core/config.h"
#include "core/cpu_topology.h"
#include "engine/run_queue.h"

static int standing_down = 0;                 /* lone heavy runs running, atomic */
static unsigned long long lone_heavy_runs = 0; /* atomic */

static RAI_ThreadSettings settings(void) {
    return (RAI_ThreadSettings){
        .threads_per_queue = rai_config.threads_per_queue,
        .intra_op = rai_config.intra_op_parallelism,
        .inter_op = rai_config.inter_op_parallelism,
        .worker_spin_set = rai_config.worker_spin_us_set,
    };
}

RAI_ThreadChoice RunThreads_Choose(const RAI_Model *m) {
    /* A GPU run's intra-op threads only feed the device: not the policy's. */
    if (RunQueue_WorkerIndex() < 0 || m->device != RAI_DEVICE_CPU) return (RAI_ThreadChoice){0};
    RAI_RunLoad load = RunQueue_TakenLoad();
    RAI_ThreadSettings user = settings();
    long long work = __atomic_load_n(&m->recent_work_us, __ATOMIC_RELAXED);
    return ThreadPolicy_ForRun(CpuTopology_Get(), &load, &user, work);
}

void RunThreads_Begin(RAI_ThreadChoice c) {
    if (c.lone_heavy) __atomic_add_fetch(&lone_heavy_runs, 1, __ATOMIC_RELAXED);
    if (c.spins_stand_down) __atomic_add_fetch(&standing_down, 1, __ATOMIC_RELAXED);
}

void RunThreads_End(RAI_ThreadChoice c) {
    if (c.spins_stand_down) __atomic_sub_fetch(&standing_down, 1, __ATOMIC_RELAXED);
}

/* recent_work_us of a model whose first run was its only one: that run
 * held the framework's warm-up (a TF session's first run initialises its
 * graph, milliseconds for a 2x2 model), and would make a light model look
 * heavy for the next several runs. */
#define WORK_AFTER_WARM_UP (-2)

/* The latest weighs a quarter, as the run queue's own average. */
void RunThreads_Ran(RAI_Model *m, RAI_ThreadChoice c, long long duration_us) {
    long long prev = __atomic_load_n(&m->recent_work_us, __ATOMIC_RELAXED);
    if (prev == -1) {
        __atomic_store_n(&m->recent_work_us, WORK_AFTER_WARM_UP, __ATOMIC_RELAXED);
        return;
    }
    int threads = c.intra_op_threads;
    if (threads < 1) {
        RAI_ThreadSettings user = settings();
        threads = ThreadPolicy_Shared(CpuTopology_Get(), &user);
    }
    long long work = duration_us * threads;
    long long next = prev < 0 ? work : prev + (work - prev) / 4;
    __atomic_store_n(&m->recent_work_us, next, __ATOMIC_RELAXED);
}

int RunThreads_SpinsStandDown(void) {
    return __atomic_load_n(&standing_down, __ATOMIC_RELAXED) > 0;
}

unsigned long long RunThreads_LoneHeavyRuns(void) {
    return __atomic_load_n(&lone_heavy_runs, __ATOMIC_RELAXED);
}

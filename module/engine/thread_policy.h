/*
 * thread_policy.h - how many intra-op threads one model run gets, and
 * whether the module's spins stand down while it runs (docs/performance.md,
 * "Thread defaults"). Pure: no clock, no Redis, no globals; the engine
 * gathers what it needs (engine/run_threads.c) and tells the backend the
 * answer in RAI_RunInfo.intra_op_threads.
 *
 * Under load every worker gets an equal share of the cores left after
 * Redis's main thread, max(1, (logical - 1) / THREADS_PER_QUEUE), fixed as
 * before: the runs, the main thread and the helper already fill the CPUs.
 * A lone heavy run is different: one request running, none waiting, and a
 * model whose recent runs took at least RAI_LONE_RUN_MIN_US. Nothing else
 * wants the CPUs then, so that run gets one thread per physical core (SMT
 * siblings count once: a second thread on a busy core adds nothing), and
 * the spins (WORKER_SPIN_US: the main thread's polling) stand down so that
 * none of them takes a core from it.
 *
 * The user's settings keep their meaning: INTRA_OP_PARALLELISM set is every
 * run's count; INTER_OP_PARALLELISM set leaves the framework's pools as the
 * user sized them (no boost on top of them); THREADS_PER_QUEUE divides the
 * cores under load as before (a lone run still gets them all: the other
 * workers are idle); WORKER_SPIN_US set keeps the spins going.
 */
#ifndef REDISAI_THREAD_POLICY_H
#define REDISAI_THREAD_POLICY_H

#include "core/cpu_topology.h"

/* The crossover: a model whose recent runs take at least this long (in
 * one thread's terms) gains from every core when it runs alone; shorter
 * ones lose more to waking the framework's pool than the extra cores
 * give. A placeholder until measured (docs/performance.md). */
#define RAI_LONE_RUN_MIN_US 500

/* The queue's load as a run starts. */
typedef struct RAI_RunLoad {
    int running;  /* runs of the queue running or in flight, this one included */
    long waiting; /* requests waiting behind them: DAGs queued, clients blocked for one */
} RAI_RunLoad;

/* The settings the policy reads; 0 for one the user left unset. */
typedef struct RAI_ThreadSettings {
    long long threads_per_queue; /* workers per queue, at least 1 */
    long long intra_op;          /* INTRA_OP_PARALLELISM */
    long long inter_op;          /* INTER_OP_PARALLELISM */
    int worker_spin_set;         /* WORKER_SPIN_US was given */
} RAI_ThreadSettings;

typedef struct RAI_ThreadChoice {
    int intra_op_threads; /* at least 1 */
    int lone_heavy;       /* a lone heavy run: given one thread per physical core */
    int spins_stand_down; /* the module's spins must not run while it runs */
} RAI_ThreadChoice;

/* The shared count: INTRA_OP_PARALLELISM, else max(1, (logical - 1) /
 * THREADS_PER_QUEUE), what backends/common/backend_threads.h gives a
 * backend's sessions. */
int ThreadPolicy_Shared(const RAI_CpuTopology *topo, const RAI_ThreadSettings *user);
/* The choice for one run of a model whose recent run time is run_us (< 0:
 * not known yet, as before its first run). */
RAI_ThreadChoice ThreadPolicy_ForRun(const RAI_CpuTopology *topo, const RAI_RunLoad *load,
                                     const RAI_ThreadSettings *user, long long run_us);

#endif

/*
 * run_threads.h - the thread policy (thread_policy.h) applied to one model
 * run: what the engine knows (this process's topology, the worker's load,
 * the settings, the model's recent run time) in, RAI_RunInfo's
 * intra_op_threads out; while a lone heavy run runs, the module's spins
 * stand down (main_spin.c asks RunThreads_SpinsStandDown).
 */
#ifndef REDISAI_RUN_THREADS_H
#define REDISAI_RUN_THREADS_H

#include "engine/thread_policy.h"
#include "types/model.h"

/* The choice for a run of m on the calling thread: the policy's for a CPU
 * model on a run-queue worker, else {0} (intra_op_threads 0: the
 * backend's default; inline runs on the main thread, LLAPI runs, GPU
 * models). */
RAI_ThreadChoice RunThreads_Choose(const RAI_Model *m);
/* Around the backend's run: a lone heavy run stands the spins down. Any
 * thread. */
void RunThreads_Begin(RAI_ThreadChoice c);
void RunThreads_End(RAI_ThreadChoice c);
/* A run of m given c took duration_us: the model's recent time in one
 * thread's terms. Any thread. */
void RunThreads_Ran(RAI_Model *m, RAI_ThreadChoice c, long long duration_us);
/* A lone heavy run is running: the spins must not compete with it. */
int RunThreads_SpinsStandDown(void);
/* INFO MODULES: runs given one thread per physical core since load. */
unsigned long long RunThreads_LoneHeavyRuns(void);

#endif

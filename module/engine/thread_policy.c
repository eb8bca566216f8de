/*
 * thread_policy.c - see thread_policy.h.
 */
#include "engine/thread_policy.h"

#include <limits.h>

int ThreadPolicy_Shared(const RAI_CpuTopology *topo, const RAI_ThreadSettings *user) {
    if (user->intra_op > 0) return user->intra_op > INT_MAX ? INT_MAX : (int)user->intra_op;
    long long per_queue = user->threads_per_queue < 1 ? 1 : user->threads_per_queue;
    long long n = (topo->logical - 1) / per_queue;
    return n < 1 ? 1 : (int)n;
}

RAI_ThreadChoice ThreadPolicy_ForRun(const RAI_CpuTopology *topo, const RAI_RunLoad *load,
                                     const RAI_ThreadSettings *user, long long run_us) {
    RAI_ThreadChoice c = {.intra_op_threads = ThreadPolicy_Shared(topo, user)};
    if (user->intra_op > 0 || user->inter_op > 0) return c;
    int lone = load->running <= 1 && load->waiting <= 0;
    if (!lone || run_us < RAI_LONE_RUN_MIN_US) return c;
    c.intra_op_threads = topo->physical < 1 ? 1 : topo->physical;
    c.lone_heavy = 1;
    c.spins_stand_down = !user->worker_spin_set;
    return c;
}

/*
 * cpu_topology.h - the CPUs this process may run on, and the physical cores
 * among them: what the thread policy (engine/thread_policy.h) sizes a run's
 * threads by. A framework's intra-op threads gain nothing from the second
 * SMT thread of a core the first already keeps busy, so a lone run gets one
 * thread per physical core, not per logical CPU.
 *
 * Linux only: a CPU's core is (physical_package_id, core_id) under
 * /sys/devices/system/cpu/cpuN/topology/. Read once; the reader takes the
 * sysfs folder and the affinity as arguments so that a unit test can give
 * it a fake tree.
 */
#ifndef REDISAI_CPU_TOPOLOGY_H
#define REDISAI_CPU_TOPOLOGY_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t */
#endif
#include <sched.h>

typedef struct RAI_CpuTopology {
    int logical;  /* CPUs in the affinity, at least 1 */
    int physical; /* distinct cores among them, at least 1: SMT siblings count once */
} RAI_CpuTopology;

/* The topology of the CPUs in allowed, from the cpuN/topology/ files under
 * sysfs_cpu. A CPU whose files are missing or unreadable counts as a core
 * of its own (a kernel without them, a container hiding them): the
 * physical count is then the logical one, as before this reader. */
RAI_CpuTopology CpuTopology_Read(const char *sysfs_cpu, const cpu_set_t *allowed);
/* This process's, read at the first call from /sys/devices/system/cpu and
 * its affinity then (sysconf's online count when the affinity cannot be
 * read). Any thread. */
const RAI_CpuTopology *CpuTopology_Get(void);

#endif

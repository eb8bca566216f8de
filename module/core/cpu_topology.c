/*
 * cpu_topology.c - see cpu_topology.h.
 */
#include "core/cpu_topology.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/* One topology file's integer, -1 when it cannot be read. */
static long readId(const char *sysfs_cpu, int cpu, const char *file) {
    char path[512];
    snprintf(path, sizeof(path), "%s/cpu%d/topology/%s", sysfs_cpu, cpu, file);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1 || v < 0) v = -1;
    fclose(f);
    return v;
}

RAI_CpuTopology CpuTopology_Read(const char *sysfs_cpu, const cpu_set_t *allowed) {
    /* (package, core) of each core seen so far; a CPU without its files
     * gets a key no other CPU has (package -1, its own number). */
    long seen[CPU_SETSIZE][2];
    int logical = 0, physical = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, allowed)) continue;
        logical++;
        long package = readId(sysfs_cpu, cpu, "physical_package_id");
        long core = readId(sysfs_cpu, cpu, "core_id");
        if (package < 0 || core < 0) {
            package = -1;
            core = cpu;
        }
        int known = 0;
        for (int i = 0; i < physical && !known; i++) {
            known = seen[i][0] == package && seen[i][1] == core;
        }
        if (!known) {
            seen[physical][0] = package;
            seen[physical][1] = core;
            physical++;
        }
    }
    if (logical < 1) logical = 1;
    if (physical < 1) physical = 1;
    return (RAI_CpuTopology){.logical = logical, .physical = physical};
}

static RAI_CpuTopology topology;
static pthread_once_t topology_once = PTHREAD_ONCE_INIT;

static void readOwn(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        CPU_ZERO(&set);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET(i, &set);
    }
    topology = CpuTopology_Read("/sys/devices/system/cpu", &set);
}

const RAI_CpuTopology *CpuTopology_Get(void) {
    pthread_once(&topology_once, readOwn);
    return &topology;
}

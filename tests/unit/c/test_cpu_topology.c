/*
 * test_cpu_topology.c - module/core/cpu_topology.c: physical cores from a
 * fake sysfs tree (a temporary folder of cpuN/topology/ files), restricted
 * to an affinity set; and this machine's, which must be sane.
 */
#define _GNU_SOURCE /* CPU_SET, before any libc header */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu_topology.h"
#include "unit.h"

static char root[] = "/tmp/rai-topology-XXXXXX";

/* cpuN/topology/ with its package and core; a negative one is left out. */
static void fakeCpu(int cpu, int package, int core) {
    char path[256];
    snprintf(path, sizeof(path), "%s/cpu%d", root, cpu);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/cpu%d/topology", root, cpu);
    mkdir(path, 0700);
    struct {
        const char *file;
        int v;
    } ids[] = {{"physical_package_id", package}, {"core_id", core}};
    for (int i = 0; i < 2; i++) {
        if (ids[i].v < 0) continue;
        snprintf(path, sizeof(path), "%s/cpu%d/topology/%s", root, cpu, ids[i].file);
        FILE *f = fopen(path, "w");
        if (!CHECK(f != NULL)) return;
        fprintf(f, "%d\n", ids[i].v);
        fclose(f);
    }
}

static cpu_set_t cpus(int from, int to) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = from; i <= to; i++) CPU_SET(i, &set);
    return set;
}

static void removeTree(void) {
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    CHECK_INT(system(cmd), 0);
}

int main(void) {
    if (!CHECK(mkdtemp(root) != NULL)) return Unit_Done("cpu_topology");

    /* 2 real cores. */
    fakeCpu(0, 0, 0);
    fakeCpu(1, 0, 1);
    cpu_set_t set = cpus(0, 1);
    RAI_CpuTopology t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 2);
    CHECK_INT(t.physical, 2);

    /* 64 cores with SMT on 2 packages: cpu i and i+64 are siblings, each
     * package numbers its cores from 0. */
    for (int i = 0; i < 128; i++) fakeCpu(i, (i % 64) / 32, i % 32);
    set = cpus(0, 127);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 128);
    CHECK_INT(t.physical, 64);

    /* The affinity restricts it: one core's two siblings are one core... */
    CPU_ZERO(&set);
    CPU_SET(3, &set);
    CPU_SET(67, &set);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 2);
    CHECK_INT(t.physical, 1);
    /* ...and the first 16 CPUs are 16 cores. */
    set = cpus(0, 15);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 16);
    CHECK_INT(t.physical, 16);
    /* The same core_id in two packages is two cores. */
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CPU_SET(32, &set);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.physical, 2);

    /* A CPU without its files (cpu200: no folder; cpu129: no core_id) is a
     * core of its own, never merged with another. */
    fakeCpu(129, 0, -1);
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    CPU_SET(129, &set);
    CPU_SET(200, &set);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 3);
    CHECK_INT(t.physical, 3);

    /* An empty set still says one CPU. */
    CPU_ZERO(&set);
    t = CpuTopology_Read(root, &set);
    CHECK_INT(t.logical, 1);
    CHECK_INT(t.physical, 1);
    removeTree();

    /* This machine's: read once, sane. */
    const RAI_CpuTopology *own = CpuTopology_Get();
    CHECK(own == CpuTopology_Get());
    CHECK(own->logical >= 1);
    CHECK(own->physical >= 1 && own->physical <= own->logical);
    printf("this machine: %d logical, %d physical\n", own->logical, own->physical);
    return Unit_Done("cpu_topology");
}

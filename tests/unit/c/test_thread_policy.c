/*
 * test_thread_policy.c - module/engine/thread_policy.c: a run's intra-op
 * threads and whether the spins stand down, over fake topologies (2 real
 * cores, 1 core with 2 SMT threads, 16 cores, 64 cores with SMT) and loads
 * (one client: one running, none waiting; 8 and 32 clients: requests
 * waiting), and with each user setting given.
 */
#include "engine/thread_policy.h"
#include "unit.h"

static const RAI_CpuTopology two_cores = {.logical = 2, .physical = 2};
static const RAI_CpuTopology one_core_smt = {.logical = 2, .physical = 1};
static const RAI_CpuTopology sixteen = {.logical = 16, .physical = 16};
static const RAI_CpuTopology sixty_four_smt = {.logical = 128, .physical = 64};

static const RAI_RunLoad one_client = {.running = 1, .waiting = 0};
static const RAI_RunLoad eight_clients = {.running = 1, .waiting = 7};
static const RAI_RunLoad thirty_two = {.running = 2, .waiting = 30};
/* Two workers (THREADS_PER_QUEUE 2) each running one, none waiting. */
static const RAI_RunLoad two_running = {.running = 2, .waiting = 0};

static const RAI_ThreadSettings defaults = {.threads_per_queue = 1};

#define HEAVY (RAI_LONE_RUN_MIN_US * 4)
#define LIGHT (RAI_LONE_RUN_MIN_US / 10)

static void checkChoice(RAI_ThreadChoice c, int threads, int lone_heavy, int stand_down,
                        const char *what) {
    if (!CHECK_INT(c.intra_op_threads, threads) || !CHECK_INT(c.lone_heavy, lone_heavy) ||
        !CHECK_INT(c.spins_stand_down, stand_down)) {
        fprintf(stderr, "  in: %s\n", what);
    }
}

/* The default under load is today's: max(1, (logical - 1) / THREADS_PER_QUEUE). */
static void testShared(void) {
    CHECK_INT(ThreadPolicy_Shared(&two_cores, &defaults), 1);
    CHECK_INT(ThreadPolicy_Shared(&one_core_smt, &defaults), 1);
    CHECK_INT(ThreadPolicy_Shared(&sixteen, &defaults), 15);
    CHECK_INT(ThreadPolicy_Shared(&sixty_four_smt, &defaults), 127);
    RAI_ThreadSettings four = {.threads_per_queue = 4};
    CHECK_INT(ThreadPolicy_Shared(&two_cores, &four), 1);
    CHECK_INT(ThreadPolicy_Shared(&sixteen, &four), 3);
    RAI_ThreadSettings zero = {.threads_per_queue = 0}; /* never below one worker */
    CHECK_INT(ThreadPolicy_Shared(&sixteen, &zero), 15);
    RAI_CpuTopology one = {.logical = 1, .physical = 1};
    CHECK_INT(ThreadPolicy_Shared(&one, &defaults), 1);
}

/* One client, a heavy model: every physical core, the spins stand down. */
static void testLoneHeavy(void) {
    checkChoice(ThreadPolicy_ForRun(&two_cores, &one_client, &defaults, HEAVY), 2, 1, 1,
                "2 cores, 1 client, heavy");
    checkChoice(ThreadPolicy_ForRun(&one_core_smt, &one_client, &defaults, HEAVY), 1, 1, 1,
                "1 core 2 SMT, 1 client, heavy: SMT siblings count once");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &defaults, HEAVY), 16, 1, 1,
                "16 cores, 1 client, heavy");
    checkChoice(ThreadPolicy_ForRun(&sixty_four_smt, &one_client, &defaults, HEAVY), 64, 1, 1,
                "64 cores with SMT, 1 client, heavy: physical, not logical");
    /* The crossover itself counts as heavy, one below it does not. */
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &defaults, RAI_LONE_RUN_MIN_US), 16,
                1, 1, "at the crossover");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &defaults, RAI_LONE_RUN_MIN_US - 1),
                15, 0, 0, "just below the crossover");
}

/* One client, a light model or one never run: the shared count, spins on. */
static void testLoneLight(void) {
    checkChoice(ThreadPolicy_ForRun(&two_cores, &one_client, &defaults, LIGHT), 1, 0, 0,
                "2 cores, light");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &defaults, LIGHT), 15, 0, 0,
                "16 cores, light");
    checkChoice(ThreadPolicy_ForRun(&sixty_four_smt, &one_client, &defaults, -1), 127, 0, 0,
                "64 cores SMT, never run");
}

/* 8 and 32 clients (requests waiting), or two runs at once: the shared
 * count whatever the model, spins as they were. */
static void testUnderLoad(void) {
    const RAI_CpuTopology *topos[] = {&two_cores, &one_core_smt, &sixteen, &sixty_four_smt};
    const int shared[] = {1, 1, 15, 127};
    const RAI_RunLoad *loads[] = {&eight_clients, &thirty_two, &two_running};
    for (int t = 0; t < 4; t++) {
        for (int l = 0; l < 3; l++) {
            char what[64];
            snprintf(what, sizeof(what), "topology %d, load %d, heavy", t, l);
            checkChoice(ThreadPolicy_ForRun(topos[t], loads[l], &defaults, HEAVY), shared[t], 0,
                        0, what);
        }
    }
    /* One waiting is enough: it would wait behind every core. */
    RAI_RunLoad one_waiting = {.running = 1, .waiting = 1};
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_waiting, &defaults, HEAVY), 15, 0, 0,
                "one waiting");
}

/* Each user setting keeps its meaning. */
static void testUserSettings(void) {
    /* INTRA_OP_PARALLELISM: always that, alone or under load, spins on. */
    RAI_ThreadSettings intra = {.threads_per_queue = 1, .intra_op = 3};
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &intra, HEAVY), 3, 0, 0,
                "INTRA 3, lone heavy");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &thirty_two, &intra, HEAVY), 3, 0, 0,
                "INTRA 3, 32 clients");
    checkChoice(ThreadPolicy_ForRun(&two_cores, &one_client, &intra, HEAVY), 3, 0, 0,
                "INTRA 3 on 2 cores: the user's number, not capped");
    /* INTER_OP_PARALLELISM: the user sized the pools; the shared intra count. */
    RAI_ThreadSettings inter = {.threads_per_queue = 1, .inter_op = 2};
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &inter, HEAVY), 15, 0, 0,
                "INTER 2, lone heavy");
    /* THREADS_PER_QUEUE: divides the cores under load; a lone run gets them all. */
    RAI_ThreadSettings four = {.threads_per_queue = 4};
    checkChoice(ThreadPolicy_ForRun(&sixteen, &eight_clients, &four, HEAVY), 3, 0, 0,
                "THREADS_PER_QUEUE 4, 8 clients");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &four, HEAVY), 16, 1, 1,
                "THREADS_PER_QUEUE 4, lone heavy");
    /* WORKER_SPIN_US given: the spins go on, the threads as without it. */
    RAI_ThreadSettings spin = {.threads_per_queue = 1, .worker_spin_set = 1};
    checkChoice(ThreadPolicy_ForRun(&sixteen, &one_client, &spin, HEAVY), 16, 1, 0,
                "WORKER_SPIN_US set, lone heavy");
    checkChoice(ThreadPolicy_ForRun(&sixteen, &thirty_two, &spin, HEAVY), 15, 0, 0,
                "WORKER_SPIN_US set, 32 clients");
}

int main(void) {
    testShared();
    testLoneHeavy();
    testLoneLight();
    testUnderLoad();
    testUserSettings();
    return Unit_Done("thread_policy");
}

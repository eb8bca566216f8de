/*
 * module_info.c - the `ai_*` sections of INFO MODULES (docs/info.md), with two
 * additions over RedisAI 1.2: every loaded backend reports its real
 * framework version (Torch included, where 1.2 printed NA), and sections of
 * our own (ai_backends_paths, ai_inline_runs, ai_isolation) follow 1.2's
 * five, which keep 1.2's order.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "commands/module_info.h"

#include <stdio.h>
#include <sys/resource.h>

#include "commands/backend_info_cache.h"
#include "core/config.h"
#include "core/cpu_topology.h"
#include "engine/completion.h"
#include "engine/write_gate.h"
#include "engine/inline_run.h"
#include "engine/main_spin.h"
#include "engine/run_queue.h"
#include "engine/run_threads.h"
#include "isolation/core/iso_info.h"
#include "loader/backend_loader.h"
#include "redisai/llapi.h"
#include "types/model.h"
#include "types/tensor_type.h"

#ifndef REDISAI_VERSION_STRING
#define REDISAI_VERSION_STRING "1.3.0"
#endif
#ifndef REDISAI_GIT_SHA
#define REDISAI_GIT_SHA "unknown"
#endif

/* Field-name prefix of each backend kind, as 1.2 named them. */
static const char *backend_fields[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "TensorFlow",
    [RAI_BACKEND_TFLITE] = "TensorFlowLite",
    [RAI_BACKEND_TORCH] = "Torch",
    [RAI_BACKEND_ONNX] = "onnxruntime",
};

static void addTime(RedisModuleInfoCtx *ctx, const char *field, struct timeval tv) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%ld.%06ld", (long)tv.tv_sec, (long)tv.tv_usec);
    RedisModule_InfoAddFieldCString(ctx, field, buf);
}

static void addCpu(RedisModuleInfoCtx *ctx) {
    struct rusage self, children, thread;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    addTime(ctx, "self_used_cpu_sys", self.ru_stime);
    addTime(ctx, "self_used_cpu_user", self.ru_utime);
    addTime(ctx, "children_used_cpu_sys", children.ru_stime);
    addTime(ctx, "children_used_cpu_user", children.ru_utime);
    /* The info callback runs on the main thread. Unlike 1.2, seconds and
     * microseconds both come from the thread's own usage. */
    if (getrusage(RUSAGE_THREAD, &thread) == 0) {
        addTime(ctx, "main_thread_used_cpu_sys", thread.ru_stime);
        addTime(ctx, "main_thread_used_cpu_user", thread.ru_utime);
    } else {
        RedisModule_InfoAddFieldCString(ctx, "main_thread_used_cpu_sys", "N/A");
        RedisModule_InfoAddFieldCString(ctx, "main_thread_used_cpu_user", "N/A");
    }
    RunQueue_InfoCpu(ctx);
}

static int isKindDefault(const RAI_BackendDescriptor *d) {
    const RAI_LoadedBackend *def = Backend_Loaded(d->kind);
    return def && def->desc == d;
}

void ModuleInfo_Callback(RedisModuleInfoCtx *ctx, int for_crash_report) {
    RedisModule_InfoAddSection(ctx, "versions");
    RedisModule_InfoAddFieldCString(ctx, "RedisAI_version", REDISAI_VERSION_STRING);
    RedisModule_InfoAddFieldLongLong(ctx, "low_level_API_version", REDISAI_LLAPI_VERSION);
    RedisModule_InfoAddFieldLongLong(ctx, "rdb_version", RAI_ENC_VER);

    RedisModule_InfoAddSection(ctx, "git");
    RedisModule_InfoAddFieldCString(ctx, "git_sha", REDISAI_GIT_SHA);

    RedisModule_InfoAddSection(ctx, "load_time_configs");
    RedisModule_InfoAddFieldLongLong(ctx, "threads_per_queue", rai_config.threads_per_queue);
    RedisModule_InfoAddFieldLongLong(ctx, "inter_op_parallelism", rai_config.inter_op_parallelism);
    RedisModule_InfoAddFieldLongLong(ctx, "intra_op_parallelism", rai_config.intra_op_parallelism);
    RedisModule_InfoAddFieldLongLong(ctx, "model_execution_timeout",
                                     rai_config.model_execution_timeout);
    RedisModule_InfoAddFieldLongLong(ctx, "backend_memory_limit", rai_config.backend_memory_limit);

    /* As 1.2: one <Framework>_version line per loaded backend, then what the
     * backend adds itself (ONNX's three lines). Tools count this section's
     * lines, so anything of ours beyond 1.2 goes to backends_paths. */
    RedisModule_InfoAddSection(ctx, "backends_info");
    for (int k = 0; k < RAI_BACKEND_KINDS; k++) {
        const RAI_LoadedBackend *b = Backend_Loaded((RAI_BackendKind)k);
        if (b == NULL) continue;
        char field[64];
        snprintf(field, sizeof(field), "%s_version", backend_fields[k]);
        RedisModule_InfoAddFieldCString(ctx, field, b->desc->framework_version);
        /* A crash report never calls a backend (a host round trip, or the
         * framework that crashed): it prints the lines INFO kept. */
        if (for_crash_report) {
            BackendInfoCache_Print(ctx, b, backend_fields[k]);
        } else {
            BackendInfoCache_Collect(ctx, b);
        }
    }

    RedisModule_InfoAddSection(ctx, "cpu");
    addCpu(ctx);

    /* Ours from here on, after 1.2's five sections: tools split INFO on '#'
     * and take 1.2's sections by position. First, the file each backend was
     * loaded from. */
    RedisModule_InfoAddSection(ctx, "backends_paths");
    for (int k = 0; k < RAI_BACKEND_KINDS; k++) {
        const RAI_LoadedBackend *b = Backend_Loaded((RAI_BackendKind)k);
        if (b == NULL) continue;
        char field[64];
        snprintf(field, sizeof(field), "%s_path", backend_fields[k]);
        RedisModule_InfoAddFieldCString(ctx, field, b->path);
    }
    /* Models whose named backend (MODELSTORE ... BACKEND) this server lacked
     * when a replica, AOF or RDB load built them: they run on their kind's
     * default (docs/isolation.md, "RDB, AOF and replication"). */
    RedisModule_InfoAddFieldLongLong(ctx, "models_on_fallback_backend", Model_FallbackCount());

    /* Runs answered on the main thread (inline_run.h). */
    RedisModule_InfoAddSection(ctx, "inline_runs");
    RedisModule_InfoAddFieldLongLong(ctx, "inline_run_max_us", rai_config.inline_run_max_us);
    RedisModule_InfoAddFieldLongLong(ctx, "inline_runs", InlineRun_Count());
    RedisModule_InfoAddFieldLongLong(ctx, "worker_spin_us", rai_config.worker_spin_us);
    RedisModule_InfoAddFieldLongLong(ctx, "main_spin_passes", MainSpin_Passes());

    /* The completion path (completion.h): finished clients, the ones a
     * worker unblocked itself (a wake-up each at most), and the main
     * thread's drains of the rest. */
    RedisModule_InfoAddSection(ctx, "completions");
    RedisModule_InfoAddFieldLongLong(ctx, "completions", Completion_Count());
    RedisModule_InfoAddFieldLongLong(ctx, "completion_wakeups", Completion_Wakeups());
    RedisModule_InfoAddFieldLongLong(ctx, "completion_drains", Completion_Drains());
    /* Finished runs answered without writing (engine/write_gate.h). */
    RedisModule_InfoAddFieldLongLong(ctx, "completion_paused_refusals",
                                     WriteGate_PausedRefusals());
    RedisModule_InfoAddFieldLongLong(ctx, "completion_redirects", WriteGate_Redirects());

    /* The CPU queue's helper workers (engine/run_queue.c) and the DAGs
     * they took. */
    RedisModule_InfoAddSection(ctx, "helpers");
    RedisModule_InfoAddFieldLongLong(ctx, "helper_workers", RunQueue_Helpers());
    RedisModule_InfoAddFieldLongLong(ctx, "helper_runs", (long long)RunQueue_HelperRuns());

    /* The thread policy (engine/thread_policy.h): the cores it sizes runs
     * by, and the runs it gave one thread per physical core. */
    RedisModule_InfoAddSection(ctx, "threads");
    const RAI_CpuTopology *topo = CpuTopology_Get();
    RedisModule_InfoAddFieldLongLong(ctx, "cpus_logical", topo->logical);
    RedisModule_InfoAddFieldLongLong(ctx, "cpus_physical", topo->physical);
    RedisModule_InfoAddFieldLongLong(ctx, "lone_heavy_run_min_us", RAI_LONE_RUN_MIN_US);
    RedisModule_InfoAddFieldULongLong(ctx, "lone_heavy_runs", RunThreads_LoneHeavyRuns());

    /* Not in a crash report: it takes the isolation locks. */
    if (!for_crash_report) Iso_InfoSection(ctx, isKindDefault);
}

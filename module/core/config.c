/*
 * config.c - the module's settings, see config.h. The module arguments and
 * AI.CONFIG that set them are commands/config_commands.c.
 */
#include "core/config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

RAI_Config rai_config;

void Config_Init(const char *module_path) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", module_path ? module_path : ".");
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof(dir), ".");
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/backends", dir);
    rai_config = (RAI_Config){
        .backends_path = RedisModule_Strdup(path),
        .threads_per_queue = 1,
        .intra_op_parallelism = 0,
        .inter_op_parallelism = 0,
        .model_chunk_size = RAI_DEFAULT_MODEL_CHUNK_SIZE,
        .model_execution_timeout = 5000,
        .backend_memory_limit = 0,
        .backends_confined = 0,
        .isolate_kinds = 0,
        .backend_start_timeout = 60000,
        .inline_run_max_us = RAI_DEFAULT_INLINE_RUN_MAX_US,
        .worker_spin_us = RAI_DEFAULT_WORKER_SPIN_US,
    };
}

/* Beyond 1.2: when BACKENDSPATH has no such file but the server's working
 * directory does, use that one, so that the seed-era command line
 * `--loadmodule install/.../redisai.so TF install/.../redisai_tensorflow.so`
 * works as typed. */
char *Config_ResolvePath(const char *path) {
    if (path[0] == '/') return RedisModule_Strdup(path);
    size_t n = strlen(rai_config.backends_path) + strlen(path) + 2;
    char *full = RedisModule_Alloc(n);
    snprintf(full, n, "%s/%s", rai_config.backends_path, path);
    if (access(full, F_OK) != 0 && access(path, F_OK) == 0) {
        char cwd[4096];
        if (getcwd(cwd, sizeof(cwd))) {
            RedisModule_Free(full);
            n = strlen(cwd) + strlen(path) + 2;
            full = RedisModule_Alloc(n);
            snprintf(full, n, "%s/%s", cwd, path);
        }
    }
    return full;
}

void Config_SetBackendsPath(const char *path) {
    RedisModule_Free(rai_config.backends_path);
    rai_config.backends_path = RedisModule_Strdup(path);
}

int Config_ParsePositive(RedisModuleString *s, long long min, long long *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < min) return 0;
    *out = v;
    return 1;
}

/* An integer from 0 to max into *out: 1, or 0 (nothing set). */
static int setBounded(RedisModuleString *s, long long max, long long *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < 0 || v > max) return 0;
    *out = v;
    return 1;
}

int Config_SetInlineMax(RedisModuleString *s) {
    return setBounded(s, RAI_MAX_INLINE_RUN_MAX_US, &rai_config.inline_run_max_us);
}

int Config_SetWorkerSpin(RedisModuleString *s) {
    if (!setBounded(s, RAI_MAX_WORKER_SPIN_US, &rai_config.worker_spin_us)) return 0;
    rai_config.worker_spin_us_set = 1;
    return 1;
}

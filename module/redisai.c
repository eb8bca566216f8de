/*
 * redisai.c - module entry point: wires the layers (what a lower layer needs
 * of a higher one is handed to it here, docs/architecture.md "The layers"),
 * registers the data types and commands and applies the module arguments.
 * The data path runs command parser (commands/) -> key-space object
 * (types/) -> run queue (engine/) -> backend -> reply.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "commands/backend_info_cache.h"
#include "commands/config_commands.h"
#include "commands/dag_commands.h"
#include "commands/info_commands.h"
#include "commands/model_commands.h"
#include "commands/model_execute.h"
#include "commands/module_info.h"
#include "commands/script_commands.h"
#include "commands/script_execute.h"
#include "commands/tensor_commands.h"
#include "core/config.h"
#include "core/main_thread.h"
#include "core/memory.h"
#include "core/run_gate.h"
#include "core/server.h"
#include "engine/batch.h"
#include "engine/command_arity.h"
#include "engine/host_api.h"
#include "engine/noperm.h"
#include "engine/run_queue.h"
#include "isolation/core/iso_proxy.h"
#include "llapi/llapi_internal.h"
#include "loader/backend_loader.h"
#include "redismodule.h"
#include "types/model_type.h"
#include "types/run_stats.h"
#include "types/script_type.h"
#include "types/stored.h"
#include "types/tensor_type.h"

#ifndef REDISAI_VERSION_NUM
#define REDISAI_VERSION_NUM 10300
#endif

typedef struct CommandSpec {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int first, last, step;
} CommandSpec;

/* Flags and first/last/step as RedisAI 1.2 registered them (docs/commands.md,
 * "The command table"); the execution commands report their real keys
 * through getkeys-api. */
static const CommandSpec commands[] = {
    {"ai.tensorset", TensorSet_RedisCommand, "write deny-oom", 1, 1, 1},
    {"ai.tensorget", TensorGet_RedisCommand, "readonly", 1, 1, 1},
    {"ai.modelstore", ModelStore_RedisCommand, "write deny-oom", 1, 1, 1},
    {"ai.modelset", ModelSet_RedisCommand, "write deny-oom", 1, 1, 1},
    {"ai.modelget", ModelGet_RedisCommand, "readonly", 1, 1, 1},
    {"ai.modeldel", ModelDel_RedisCommand, "write", 1, 1, 1},
    {"ai.modelexecute", ModelExecute_RedisCommand, "write deny-oom getkeys-api", 4, 4, 1},
    {"ai.modelrun", ModelRun_RedisCommand, "write deny-oom getkeys-api", 3, 3, 1},
    {"ai.scriptstore", ScriptStore_RedisCommand, "write deny-oom", 1, 1, 1},
    {"ai.scriptset", ScriptSet_RedisCommand, "write deny-oom", 1, 1, 1},
    {"ai.scriptget", ScriptGet_RedisCommand, "readonly", 1, 1, 1},
    {"ai.scriptdel", ScriptDel_RedisCommand, "write", 1, 1, 1},
    {"ai.scriptexecute", ScriptExecute_RedisCommand, "write deny-oom getkeys-api", 5, 5, 1},
    {"ai.scriptrun", ScriptRun_RedisCommand, "write deny-oom getkeys-api", 4, 4, 1},
    {"ai.dagexecute", DagExecute_RedisCommand, "write deny-oom getkeys-api", 3, 3, 1},
    {"ai.dagexecute_ro", DagExecuteRO_RedisCommand, "readonly getkeys-api", 3, 3, 1},
    {"ai.dagrun", DagRun_RedisCommand, "write deny-oom getkeys-api", 3, 3, 1},
    {"ai.dagrun_ro", DagRunRO_RedisCommand, "readonly getkeys-api", 3, 3, 1},
    {"ai.info", Info_RedisCommand, "readonly", 1, 1, 1},
    {"ai._modelscan", ModelScan_RedisCommand, "readonly", 0, 0, 0},
    {"ai._scriptscan", ScriptScan_RedisCommand, "readonly", 0, 0, 0},
    {"ai.config", Config_RedisCommand, "write", 0, 0, 0},
};

/* The file this module was loaded from: BACKENDSPATH defaults to the
 * backends/ folder beside it. */
static const char *modulePath(void) {
    Dl_info info;
    if (dladdr((void *)modulePath, &info) && info.dli_fname) return info.dli_fname;
    return NULL;
}

/* Isolated backends' hosts get SHUTDOWN and a moment to end cleanly;
 * PR_SET_PDEATHSIG ends them anyway if Redis dies any other way. */
static void onShutdown(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)ctx, (void)e, (void)sub, (void)data;
    Iso_Shutdown();
}

/* A module loaded or unloaded adds or takes away commands: what scripts'
 * calls learned of the commands' arity may be wrong now. */
static void onModuleChange(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)ctx, (void)e, (void)sub, (void)data;
    CommandArity_Reset();
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                          RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "ai", REDISAI_VERSION_NUM, REDISMODULE_APIVER_1) ==
        REDISMODULE_ERR) {
        return REDISMODULE_ERR;
    }
    if (Server_Init(ctx) != REDISMODULE_OK) return REDISMODULE_ERR;
    if (Server_HasAclApi()) NoPerm_Init(ctx);
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    MainThread_Init();

    /* Before the types: an RDB load builds models and scripts on their
     * device's queue. */
    RunQueue_SetPolicy(Batch_Take, Batch_Run);
    RunGate_SetWaker(RunQueue_WakeAll);
    Stored_SetQueueFactory(RunQueue_Ensure);
    if (TensorType_Register(ctx) != REDISMODULE_OK ||
        ModelType_Register(ctx) != REDISMODULE_OK || ScriptType_Register(ctx) != REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "could not register the RedisAI data types");
        return REDISMODULE_ERR;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const CommandSpec *c = &commands[i];
        if (RedisModule_CreateCommand(ctx, c->name, c->fn, c->flags, c->first, c->last,
                                      c->step) == REDISMODULE_ERR) {
            RedisModule_Log(ctx, "warning", "could not register command %s", c->name);
            return REDISMODULE_ERR;
        }
    }

    if (RedisModule_RegisterInfoFunc(ctx, ModuleInfo_Callback) == REDISMODULE_ERR) {
        RedisModule_Log(ctx, "warning", "could not register the INFO callback");
        return REDISMODULE_ERR;
    }
    RunStats_Init();
    Memory_Init(ctx);
    Config_Init(modulePath());
    /* The host table backends get: in-process through the loader, isolated
     * ones through the proxy, which calls it on their behalf. */
    const RAI_HostApi *host = HostApi_Get();
    Backend_Init(host);
    Iso_Init(ctx, host);
    RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Shutdown, onShutdown);
    RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ModuleChange, onModuleChange);
    if (Config_ApplyLoadArgs(ctx, argv, argc) != REDISMODULE_OK) return REDISMODULE_ERR;
    BackendInfoCache_CollectInProcess(); /* for a crash report before any INFO */

    RAI_Error err;
    Error_Init(&err);
    if (RunQueue_Ensure("CPU", &err) == NULL) {
        RedisModule_Log(ctx, "warning", "%s", Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_ERR;
    }
    /* Last: other modules may fetch the LLAPI once OnLoad has returned. */
    if (LLAPI_Register(ctx) != REDISMODULE_OK) return REDISMODULE_ERR;
    RedisModule_Log(ctx, "notice", "RedisAI %s loaded, backends path %s",
#ifdef REDISAI_VERSION_STRING
                    REDISAI_VERSION_STRING,
#else
                    "1.3.0",
#endif
                    rai_config.backends_path);
    return REDISMODULE_OK;
}

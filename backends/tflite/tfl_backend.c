/*
 * tfl_backend.c - the TFLITE backend: entry point, descriptor, and the
 * process-wide LiteRT state (the library beside the backend, one
 * environment, the validator's path).
 *
 * Models are in tfl_model.c, compiled instances in tfl_instance.c, the
 * validator in tfl_check.c and tfl_check_main.c, LiteRT's C API as this
 * backend declares it in tfl_api.h.
 */
#include <stdio.h>
#include <string.h>

#include "common/rai_entry.h"
#include "redisai/backend_abi.h"
#include "tflite/tfl_api.h"
#include "tflite/tfl_check.h"
#include "tflite/tfl_model.h"

#ifndef REDISAI_BACKEND_VARIANT
#define REDISAI_BACKEND_VARIANT "cpu"
#endif
#ifndef REDISAI_LITERT_VERSION
#define REDISAI_LITERT_VERSION "unknown"
#endif

/* INFO MODULES, after the core's ai_TensorFlowLite_version (docs/info.md). */
static void tfl_info(void *ctx, void (*add)(void *ctx, const char *field, const char *value)) {
    char value[32];
    snprintf(value, sizeof(value), "%zu", tfl_models());
    add(ctx, "TensorFlowLite_models", value);
    snprintf(value, sizeof(value), "%zu", tfl_instances());
    add(ctx, "TensorFlowLite_compiled_instances", value);
}

RAI_BACKEND_ABI_NOTE(RAI_BACKEND_TFLITE);

static RAI_BackendDescriptor descriptor = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_BackendDescriptor),
    .kind = RAI_BACKEND_TFLITE,
    .framework = "TensorFlow Lite (LiteRT)",
    .framework_version = REDISAI_LITERT_VERSION,
    .variant = REDISAI_BACKEND_VARIANT,
    .model_create = tfl_model_create,
    .model_free = tfl_model_free,
    .model_run = tfl_model_run,
    .script_create = NULL,
    .script_free = NULL,
    .script_run = NULL,
    .info = tfl_info,
};

/* The environment lives as long as the process, as the library does (it is
 * never unloaded). CPU only: without it LiteRT looks for four GPU plugins
 * by bare name at every start. Errors only on Redis's stderr. */
static const RAI_BackendDescriptor *tfl_init(char *errbuf, size_t errlen) {
    char lib[4096], why[1024];
    if (Tfl_Beside((const void *)tfl_init, "lib/libLiteRt.so", lib, sizeof(lib), why, sizeof(why)) != 0 ||
        Tfl_Open(lib, why, sizeof(why)) != 0 ||
        TflCheck_Find((const void *)tfl_init, tflb.checker, sizeof(tflb.checker), why,
                      sizeof(why)) != 0) {
        snprintf(errbuf, errlen, "%s", why);
        return NULL;
    }
    TflEnvOption opts[2] = {
        {.tag = TFL_ENV_AUTO_REGISTER_ACCELERATORS, .value = {.type = TFL_ANY_INT, .v.i = 1}},
        {.tag = TFL_ENV_MIN_LOG_SEVERITY, .value = {.type = TFL_ANY_INT, .v.i = 3}},
    };
    TflStatus st = tfl.CreateEnvironment(2, opts, &tflb.env);
    if (st != 0) {
        tflb.env = NULL;
        snprintf(errbuf, errlen, "%s: could not create a LiteRT environment (%s)", lib,
                 Tfl_StatusText(st));
        return NULL;
    }
    return &descriptor;
}

RAI_BACKEND_ENTRY(h, errbuf, errlen) {
    if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_0, "backend", NULL, errbuf, errlen) != 0) {
        return NULL;
    }
    if (tflb.env) {
        return &descriptor;
    }
    tflb.host = h;
    return tfl_init(errbuf, errlen);
}

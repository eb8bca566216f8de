/*
 * ort_backend.c - the ONNX Runtime backend: entry point, descriptor, and
 * the set-up of the process-wide ORT state of ort_env.h (API table,
 * environment, logger).
 *
 * The model lifecycle is in ort_model.c, tensor conversion in ort_tensor.c,
 * the external-data check in ort_external.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rai_entry.h"
#include "onnxruntime/ort_allocator.h"
#include "onnxruntime/ort_env.h"
#include "onnxruntime/ort_model.h"
#include "redisai/backend_abi.h"

#ifndef REDISAI_BACKEND_VARIANT
#define REDISAI_BACKEND_VARIANT "cpu"
#endif

/* ORT's log lines go to the Redis log rather than to the server's stderr. */
static void ort_log(void *param, OrtLoggingLevel severity, const char *category,
                    const char *logid, const char *code_location, const char *message) {
    (void)param;
    (void)logid;
    (void)code_location;
    RAI_LogLevel level = severity >= ORT_LOGGING_LEVEL_WARNING ? RAI_LOG_WARNING
                         : severity == ORT_LOGGING_LEVEL_INFO  ? RAI_LOG_VERBOSE
                                                               : RAI_LOG_DEBUG;
    ort.host->log(level, "ONNX Runtime [%s]: %s", category ? category : "", message);
}

/* Device queues whose workers may run a session: every queue the core has,
 * whichever backend's model made it, as in 1.2 (a queue's workers serve all
 * backends). A host older than ABI 1.4 cannot tell: its CPU queue only. */
static size_t run_queue_count(void) {
    return ort.host->size >= RAI_HOST_API_SIZE_1_4 ? ort.host->run_queue_count() : 1;
}

/* INFO MODULES, after the core's ai_onnxruntime_version (docs/info.md). One run
 * session per worker thread of each device's queue, as 1.2 counts them. */
static void ort_info(void *ctx, void (*add)(void *ctx, const char *field, const char *value)) {
    char value[32];
    snprintf(value, sizeof(value), "%zu", ort_allocator_bytes());
    add(ctx, "onnxruntime_memory", value);
    snprintf(value, sizeof(value), "%zu", ort_allocator_accesses());
    add(ctx, "onnxruntime_memory_access_num", value);
    long long threads = ort.host->config_get(RAI_CONFIG_THREADS_PER_QUEUE);
    snprintf(value, sizeof(value), "%lld", threads * (long long)run_queue_count());
    add(ctx, "onnxruntime_maximum_run_sessions_number", value);
}

/* ---------------------------------------------------------------------- */

/* The ABI and kind, read by the core from the file before dlopen. */
RAI_BACKEND_ABI_NOTE(RAI_BACKEND_ONNX);

static RAI_BackendDescriptor descriptor = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_BackendDescriptor),
    .kind = RAI_BACKEND_ONNX,
    .framework = "ONNX Runtime",
    .framework_version = NULL, /* the runtime's GetVersionString(), known only at run time */
    .variant = REDISAI_BACKEND_VARIANT,
    .model_create = ort_model_create,
    .model_free = ort_model_free,
    .model_run = ort_model_run,
    .script_create = NULL,
    .script_free = NULL,
    .script_run = NULL,
    .info = ort_info,
};

static const RAI_BackendDescriptor *refuse(char *errbuf, size_t errlen, const char *why,
                                           OrtStatus *status) {
    if (errbuf && errlen) {
        snprintf(errbuf, errlen, "%s%s%s", why, status ? ": " : "",
                 status ? ort.api->GetErrorMessage(status) : "");
    }
    if (status) {
        ort.api->ReleaseStatus(status);
    }
    return NULL;
}

/* The environment, memory info and allocator live as long as the process:
 * ORT is never unloaded (dlclose does not unmap it), and releasing the
 * environment while a session exists would be undefined. */
static const RAI_BackendDescriptor *ort_init(char *errbuf, size_t errlen) {
    const OrtApiBase *base = OrtGetApiBase();
    const char *version = base->GetVersionString();
    ort.api = base->GetApi(RAI_ORT_API_VERSION);
    if (!ort.api) {
        if (errbuf && errlen) {
            snprintf(errbuf, errlen, "ONNX Runtime %s does not provide C API version %d",
                     version ? version : "?", RAI_ORT_API_VERSION);
        }
        return NULL;
    }
    /* ONNX Runtime's telemetry is on by default: as shipped (1.32) it starts
     * threads every few seconds that resolve and contact Microsoft's event
     * collector from inside the server. A model server must not phone out
     * unasked; an operator who wants it sets ORT_DISABLE_TELEMETRY=0, which
     * overwrite=0 leaves alone (docs/security.md). DisableTelemetryEvents
     * alone does not stop those threads (strace: DNS lookups every few
     * seconds); the variable, read when the environment is created, does. */
    setenv("ORT_DISABLE_TELEMETRY", "1", 0);
    const char *why = "could not create the ONNX Runtime environment";
    OrtStatus *status = ort.api->CreateEnvWithCustomLogger(ort_log, NULL, ORT_LOGGING_LEVEL_WARNING,
                                                           "redisai", &ort.env);
    if (status) {
        ort.env = NULL;
        goto fail;
    }
    const char *telemetry_off = getenv("ORT_DISABLE_TELEMETRY");
    if (telemetry_off == NULL || strcmp(telemetry_off, "0") != 0) {
        status = ort.api->DisableTelemetryEvents(ort.env);
        if (status) {
            why = "could not turn off ONNX Runtime's telemetry";
            goto fail;
        }
    }
    why = "could not describe CPU memory to ONNX Runtime";
    status = ort.api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &ort.cpu_memory);
    if (status) {
        ort.cpu_memory = NULL;
        goto fail;
    }
    why = "could not register the counting allocator";
    status = ort_allocator_register(ort.env, ort.cpu_memory);
    if (status) {
        goto fail;
    }
    descriptor.framework_version = version;
    return &descriptor;

fail:
    /* Nothing half-made survives, so a later entry call starts afresh. */
    if (ort.cpu_memory) {
        ort.api->ReleaseMemoryInfo(ort.cpu_memory);
        ort.cpu_memory = NULL;
    }
    if (ort.env) {
        ort.api->ReleaseEnv(ort.env);
        ort.env = NULL;
    }
    return refuse(errbuf, errlen, why, status);
}

RAI_BACKEND_ENTRY(h, errbuf, errlen) {
    if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_0, "backend", NULL, errbuf, errlen) != 0) {
        return NULL;
    }
    /* A second call (the core retrying a load) reuses the first one's state:
     * ORT allows one environment per process. */
    if (ort.env) {
        return &descriptor;
    }
    ort.host = h;
    return ort_init(errbuf, errlen);
}

/*
 * fault_backend.c - entry and descriptor of the fault-injection backend.
 *
 * It poses as ONNX (note, descriptor) so that it sits beside the real ONNX
 * Runtime as a second backend of one kind. Loaded in Redis by mistake, its
 * faults would take the server down, so the entry refuses unless the
 * isolation host says it is the host (REDISAI_BACKEND_HOST=1, which the host
 * sets in its own environment before loading any backend) or a test asks
 * for it explicitly (REDISAI_FAULT_BACKEND_IN_PROCESS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rai_entry.h"
#include "fault_backend.h"

FaultState fault;

#define FAULT_VERSION "1.0"

/* The ABI and kind, read by the core from the file before dlopen. */
RAI_BACKEND_ABI_NOTE(RAI_BACKEND_ONNX);

static const RAI_BackendDescriptor descriptor = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_BackendDescriptor),
    .kind = RAI_BACKEND_ONNX,
    .framework = "fault",
    .framework_version = FAULT_VERSION,
    .variant = "cpu",
    .model_create = fault_model_create,
    .model_free = fault_model_free,
    .model_run = fault_model_run,
    .script_create = NULL,
    .script_free = NULL,
    .script_run = NULL,
    .info = fault_info,
};

/* INFO's fault_models: the models alive in this process, so that a test
 * sees every free the core sent arrive. */
void fault_info(void *ctx, void (*add)(void *ctx, const char *field, const char *value)) {
    char n[32];
    snprintf(n, sizeof(n), "%ld", __atomic_load_n(&fault.models, __ATOMIC_RELAXED));
    add(ctx, "fault_models", n);
}

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

/* Decides where this process is; 0, or -1 with the reason in errbuf. */
static int fault_decide_mode(char *errbuf, size_t errlen) {
    if (env_is("REDISAI_BACKEND_HOST", "1")) {
        fault.mode = FAULT_MODE_HOST;
        return 0;
    }
    if (env_is("REDISAI_FAULT_BACKEND_IN_PROCESS", "1")) {
        fault.mode = FAULT_MODE_IN_PROCESS;
        return 0;
    }
    if (env_is("REDISAI_FAULT_BACKEND_IN_PROCESS", "fatal")) {
        fault.mode = FAULT_MODE_IN_PROCESS_FATAL;
        return 0;
    }
    if (errbuf && errlen) {
        snprintf(errbuf, errlen,
                 "the fault-injection backend runs only inside the isolation host "
                 "(REDISAI_BACKEND_HOST=1 is not set): in-process its faults would crash Redis; "
                 "tests may set REDISAI_FAULT_BACKEND_IN_PROCESS=1 for its non-fatal behaviours");
    }
    return -1;
}

RAI_BACKEND_ENTRY(h, errbuf, errlen) {
    if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_0, "backend", NULL, errbuf, errlen) != 0) {
        return NULL;
    }
    if (fault_decide_mode(errbuf, errlen) != 0) {
        return NULL;
    }
    /* An entry that never returns: the core's hello deadline
     * (BACKEND_START_TIMEOUT) is what ends it. Inside a host only. */
    if (fault.mode == FAULT_MODE_HOST && env_is("REDISAI_FAULT_HANG_ENTRY", "1")) {
        for (;;) pause();
    }
    fault.host = h;
    h->log(RAI_LOG_NOTICE, "fault-injection backend %s loaded (%s)", FAULT_VERSION,
           fault.mode == FAULT_MODE_HOST ? "isolation host"
           : fault.mode == FAULT_MODE_IN_PROCESS ? "in-process, non-fatal behaviours only"
                                                 : "in-process, fatal behaviours allowed");
    return &descriptor;
}

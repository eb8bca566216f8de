/*
 * fault_backend.h - the fault-injection backend, for tests only.
 *
 * A backend of kind ONNX (docs/isolation.md, "The fault-injection backend")
 * whose models do on purpose what frameworks do by accident: crash, abort,
 * hang, allocate without bound, exit. Built by CMake only on request
 * (EXCLUDE_FROM_ALL), never installed; tests/isolation/test_fault_backend.py lays it
 * out in a temporary folder.
 */
#ifndef REDISAI_FAULT_BACKEND_H
#define REDISAI_FAULT_BACKEND_H

#include "redisai/backend_abi.h"

/* Where the backend was allowed to load, decided once by the entry. */
typedef enum FaultMode {
    FAULT_MODE_HOST = 0,      /* REDISAI_BACKEND_HOST=1: inside the isolation host, all faults */
    FAULT_MODE_IN_PROCESS,    /* REDISAI_FAULT_BACKEND_IN_PROCESS=1: non-fatal behaviours only */
    FAULT_MODE_IN_PROCESS_FATAL, /* =fatal: every fault, in Redis itself (tests of today's crash) */
} FaultMode;

/* The magic values a run reads from the first element of its first input. */
typedef enum FaultMagic {
    FAULT_SEGV = 1,   /* a write through NULL: SIGSEGV */
    FAULT_ABORT = 2,  /* abort(): SIGABRT */
    FAULT_HANG = 3,   /* sleeps forever */
    FAULT_ALLOC = 4,  /* malloc + memset of 64 MiB blocks without bound */
    FAULT_EXIT = 5,   /* _exit(3) */
    FAULT_GARBAGE = 6, /* writes garbage on fd 3, the host's socket */
    FAULT_ERROR = 7,  /* returns an error with the model's text */
    FAULT_FPE = 8,    /* raise(SIGFPE) */
    FAULT_KILL = 9,   /* raise(SIGKILL) */
    /* for 2 s, a thread writes an impossible count into the core-to-host
     * ring of every channel ring the host maps (iso_ring.h), then the
     * identity: the core must refuse the ring */
    FAULT_RING_GARBAGE = -6,
} FaultMagic;

typedef struct FaultState {
    const RAI_HostApi *host;
    FaultMode mode;
    long models; /* alive, for INFO (atomic) */
} FaultState;

extern FaultState fault;

void *fault_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err);
void fault_model_free(void *model);
void fault_info(void *ctx, void (*add)(void *ctx, const char *field, const char *value));
int fault_model_run(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                    size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

#endif /* REDISAI_FAULT_BACKEND_H */

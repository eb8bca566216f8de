/*
 * host.h - the backend host's own parts (redisai-backend-host), shared by
 * its files only. See docs/isolation.md, "The host process".
 */
#ifndef REDISAI_ISO_HOST_H
#define REDISAI_ISO_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "backend_abi.h"
#include "error.h"
#include "iso_protocol.h"
#include "iso_wire.h"

#define HOST_CTL_FD 3

/* What argv and HELLO told the host; written by the main thread before any
 * channel thread starts, read-only afterwards. */
typedef struct HostState {
    RAI_BackendKind kind;
    const char *kind_name;
    const char *name;     /* --name */
    const char *so;       /* --so, as the core gave it */
    char *real;           /* HELLO: the real path the core checked */
    char *backends_path;  /* HELLO: BACKENDSPATH */
    int confined;         /* HELLO: BACKENDS_CONFINED */
    long long config[ISO_CONFIG_KEYS];
    uint64_t run_queue_count;
    uint32_t verbosity; /* lowest RAI_LogLevel that is sent to the core */
    const RAI_BackendDescriptor *desc;
    uint32_t note_major, note_minor;
    double load_seconds;
} HostState;

extern HostState host;

/* A protocol error from the core: logged on stderr, then _exit(70). */
void Host_ProtocolError(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* host_shim.c: the RedisModule_* pointers of the shared check files. */
void HostShim_Init(void);

/* host_load.c: the checks the core made, again, then dlopen and the entry.
 * Returns 1, or 0 with the reason in err (the core's texts). */
int Host_Load(RAI_Error *err);

/* host_api.c: the RAI_HostApi the backend gets, and host tensors. */
const RAI_HostApi *Host_Api(void);
RAI_Tensor *HostTensor_Borrow(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                              size_t nbytes);
/* After a run: if the backend still holds t, its borrowed data is copied
 * into memory of its own (the arena is about to be reused); then releases
 * the host's reference. */
void HostTensor_ReturnBorrowed(RAI_Tensor *t);
int HostTensor_RefCount(const RAI_Tensor *t);
/* Bytes of product(dims) elements of dtype; 0 with *ok = 0 when the dtype
 * is not a numeric one or the size overflows. */
size_t HostTensor_Bytes(RAI_DType dtype, const int64_t *dims, int ndims, int *ok);

/* host_models.c: handle id -> backend model, shared by the control thread
 * (create, free) and the channel threads (run). */
int HostModels_Add(uint64_t id, void *model);
void *HostModels_Get(uint64_t id);
void *HostModels_Remove(uint64_t id);
void HostModels_FreeAll(void);

/* host_channel.c: serves one data channel on a thread of its own. Takes
 * ownership of the three descriptors. Returns 0, or -1 with the reason. */
int HostChannel_Open(uint64_t channel_id, int sock, int c2h, int h2c, char *why, size_t whylen);

#endif

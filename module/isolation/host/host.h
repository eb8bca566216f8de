/*
 * host.h - the backend host's own parts (redisai-backend-host), shared by
 * its files only. See docs/isolation.md, "The host process".
 */
#ifndef REDISAI_ISO_HOST_H
#define REDISAI_ISO_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "isolation/iso_protocol.h"
#include "isolation/iso_ring.h"
#include "isolation/iso_wire.h"
#include "redisai/backend_abi.h"

#define HOST_CTL_FD 3

/* What a request that could not get memory here answers. */
#define RAI_ERR_HOST_OOM "ERR out of memory in the backend host"

/* What argv and HELLO told the host; written by the main thread before the
 * work thread and any channel thread start, read-only afterwards. */
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

/* host_state.c: a line on stderr, named after the host. */
void Host_Say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A protocol error from the core: logged on stderr, then _exit(70). */
void Host_ProtocolError(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* host_shim.c: the RedisModule_* pointers of the shared check files. */
void HostShim_Init(void);

/* host_load.c: the checks the core made, again, then dlopen and the entry.
 * Returns 1, or 0 with the reason in err (the core's texts). */
int Host_Load(RAI_Error *err);

/* host_api.c: the RAI_HostApi the backend gets. */
const RAI_HostApi *Host_Api(void);

/* host_tensor.c: host tensors. The members of RAI_HostApi's tensor group: */
RAI_Tensor *HostTensor_Create(RAI_DType dtype, const int64_t *dims, int ndims);
RAI_Tensor *HostTensor_Adopt(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                             size_t nbytes, void (*deleter)(void *ctx), void *deleter_ctx);
RAI_Tensor *HostTensor_CreateStrings(const int64_t *dims, int ndims, const char *const *elems,
                                     const size_t *lens);
RAI_Tensor *HostTensor_Retain(RAI_Tensor *t);
void HostTensor_Release(RAI_Tensor *t);
RAI_DType HostTensor_DType(const RAI_Tensor *t);
int HostTensor_NDims(const RAI_Tensor *t);
const int64_t *HostTensor_Dims(const RAI_Tensor *t);
size_t HostTensor_Length(const RAI_Tensor *t);
size_t HostTensor_ByteSize(const RAI_Tensor *t);
void *HostTensor_Data(RAI_Tensor *t);
const char *HostTensor_StringAt(const RAI_Tensor *t, size_t i, size_t *len);
/* and what the channels use: */
/* A tensor over data the host does not own (an arena or a sealed
 * region's mapping): release(ctx) runs when the last reference goes, so
 * that the data stays valid as long as anyone, a backend that kept it
 * included, holds it. */
RAI_Tensor *HostTensor_Borrow(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                              size_t nbytes, void (*release)(void *ctx), void *ctx);
/* A numeric tensor of the host's own holding a copy of the nbytes at src. */
RAI_Tensor *HostTensor_Copy(RAI_DType dtype, const int64_t *dims, int ndims, const void *src,
                            size_t nbytes);
/* A STRING tensor from the wire layout (n = product(dims) u64 offsets, then
 * the NUL-terminated bytes): copied first, then checked, so that a sender
 * cannot change what was checked. Returns 1 with *out (NULL: out of
 * memory), or 0 with the reason in why when the layout is malformed. */
int HostTensor_FromWireStrings(const int64_t *dims, int ndims, const void *src, size_t nbytes,
                               RAI_Tensor **out, char *why, size_t whylen);
/* The bytes of t on the wire, in at most two parts (STRING: its offsets,
 * then its bytes; others: the data and nothing). */
void HostTensor_WireParts(RAI_Tensor *t, const void **p1, size_t *n1, const void **p2,
                          size_t *n2);
/* Whether anyone but the caller holds a reference to t (a backend that
 * kept an input past its run). */
int HostTensor_Shared(const RAI_Tensor *t);
/* Bytes of product(dims) elements of dtype; 0 with *ok = 0 when the dtype
 * is not a numeric one or the size overflows. */
size_t HostTensor_Bytes(RAI_DType dtype, const int64_t *dims, int ndims, int *ok);
/* Elements of dims (product), 0 with *ok = 0 on overflow or a bad ndims. */
size_t HostTensor_Elements(const int64_t *dims, int ndims, int *ok);

/* host_models.c: handle id -> backend model or script, shared by the
 * work thread (create, free) and the channel threads (run). The core
 * chooses the ids from one counter for both kinds. */
typedef enum HostHandleKind {
    HOST_HANDLE_MODEL = 1,
    HOST_HANDLE_SCRIPT = 2,
} HostHandleKind;
int HostHandles_Add(uint64_t id, HostHandleKind kind, void *obj);
/* The object of that id and kind; NULL when none, with *other set when the
 * id names an object of the other kind. */
void *HostHandles_Get(uint64_t id, HostHandleKind kind, int *other);
void *HostHandles_Remove(uint64_t id, HostHandleKind kind);
int HostHandles_Exists(uint64_t id);
void HostHandles_FreeAll(void);

/* --- channels (host_channel.c, host_wire.c, host_calls.c) -------------------- */

/* A read-only shared mapping that lives as long as its references: the
 * one of its user (a channel, a message) and one per tensor on it. */
typedef struct HostMapping {
    int refs; /* atomic: tensors on any thread release theirs */
    unsigned char *map;
    size_t len;
} HostMapping;
HostMapping *HostMapping_New(void *map, size_t len); /* one reference; NULL out of memory */
void HostMapping_Release(void *mapping);            /* the tensor release of HostTensor_Borrow */

typedef struct HostChannel {
    uint64_t id;
    IsoRing ring; /* the socket (ring.sock) and the ring every message goes through */
    int c2h_fd;       /* kept to map the arena again when a view is retired */
    HostMapping *c2h; /* core to host arena: the current view, read-only */
    unsigned char *h2c; /* host to core arena */
    size_t h2c_len;
    int dead; /* the core closed the channel in the middle of a callback */
} HostChannel;

/* host_channel.c: serves one data channel on a thread of its own. Takes
 * ownership of the descriptors (ring -1: the socket alone). 0; -2 when the
 * arenas or the ring are not what the protocol says (a protocol error); -1
 * when a resource ran out (mapping, thread), with why. */
int HostChannel_Open(uint64_t channel_id, int sock, int c2h, int h2c, int ring, char *why,
                     size_t whylen);
/* Serves one MODEL_RUN or SCRIPT_RUN (also a nested one, from a callback's
 * wait) and answers it on the channel. */
void HostChannel_Serve(HostChannel *ch, IsoMsg *m);

/* host_wire.c: tensors between the wire and host tensors. */
typedef struct HostRegions {
    HostMapping *map[ISO_MAX_FDS]; /* the message's references, dropped by HostWire_Unmap */
} HostRegions;
/* The tensor of descriptor d of message m (what names it in a protocol
 * error: "input 2"). borrow (run inputs): numeric data stays where it lies,
 * the tensor holding a reference on the mapping; else (callback replies)
 * it is copied. STRING is always copied and checked. A descriptor that
 * does not fit its region or dtype ends the host (protocol error). NULL:
 * out of memory. */
RAI_Tensor *HostWire_TensorIn(HostChannel *ch, IsoMsg *m, HostRegions *regions,
                              const IsoTensorDesc *d, int borrow, const char *what, uint32_t i);
void HostWire_Unmap(HostRegions *regions);
/* After a run, before its inputs are released: inputs in the c2h arena
 * that a backend still holds get pages of their own at the same address
 * (their data pointer stays valid and unchanged), and the channel maps the
 * arena again for the next requests. */
void HostWire_KeepArenaInputs(HostChannel *ch, RAI_Tensor *const *inputs,
                              const IsoTensorDesc *descs, uint32_t n);
/* Places n tensors for the core, for the message `id`: in that id's part of
 * the h2c arena (Iso_ArenaPart; at most ISO_ARENA_TENSOR_MAX each, while
 * they fit), else in one sealed region for the message, returned in *large
 * (-1 when none). Returns 0, or -1 with errno. */
int HostWire_Place(HostChannel *ch, uint64_t id, RAI_Tensor *const *tensors, size_t n,
                   IsoTensorDesc *descs, int *large);
/* Sends on the channel: 0, or -1 with errno; a core that is gone marks the
 * channel dead (nothing is sent on it any more). */
int HostWire_Send(HostChannel *ch, uint16_t type, uint64_t id, IsoBuf *b, const int *fds,
                  int nfds);
/* Answers a request: the message, or an ERROR saying why it could not go. */
void HostWire_Reply(HostChannel *ch, uint16_t type, uint64_t id, IsoBuf *b, const int *fds,
                    int nfds);
void HostWire_SendError(HostChannel *ch, uint64_t id, const char *text);

/* host_frame.c: the channel as a call stack (docs/isolation.md, "The
 * protocol"). A channel thread enters a frame for each request it serves;
 * the backend's redis_call and model_execute (host_calls.c) send on the
 * channel of the innermost one and wait for their answer, serving any
 * request the core nests meanwhile. */
typedef struct HostFrame {
    HostChannel *ch;
    uint64_t id;  /* the request this frame waits to answer or be answered */
    int requests; /* core requests on this thread's stack, up to this frame */
    struct HostFrame *up;
} HostFrame;
/* Request ids the host chooses (its callbacks) have this bit; the core's
 * never do. A core request with it ends the host. */
#define HOST_ID_BIT (1ULL << 63)
/* Nested requests served on one channel thread at most (each nesting is
 * a callback of the run below it): a bound on the thread's stack. */
#define HOST_NEST_MAX 16
/* A request of the core's must not carry the host's id bit: else it ends the host. */
void HostFrame_CheckCoreId(HostChannel *ch, const IsoMsg *m);
/* Enters a frame for core request id on ch (one more request on the stack). */
void HostFrame_Enter(HostFrame *f, HostChannel *ch, uint64_t id);
/* Pushes a frame the caller filled (the host's own request); Leave pops either. */
void HostFrame_Push(HostFrame *f);
void HostFrame_Leave(HostFrame *f);
/* The innermost frame of this thread, NULL when it serves no request. */
HostFrame *HostFrame_Top(void);

/* host_calls.c: the backend's calls back into Redis, over that channel. */
RAI_CallReply *HostCall_RedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                  size_t nargs);
void HostCall_ReplyFree(RAI_CallReply *r);
int HostCall_ModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                          size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

#endif

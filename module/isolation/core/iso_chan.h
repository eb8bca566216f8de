/*
 * iso_chan.h - a core thread's data channel to one host (iso_chan.c),
 * shared by the runs waited for (iso_channel.c) and the runs in flight
 * (iso_pipeline.c).
 * Internal to module/isolation/core.
 */
#ifndef REDISAI_ISO_CHAN_H
#define REDISAI_ISO_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "isolation/core/iso_slot.h"
#include "isolation/iso_ring.h"

#define ISO_HOST_ID_BIT (1ULL << 63)

struct IsoInflight;
struct IsoArenaView;

typedef struct IsoChan {
    IsoSlot *slot;
    uint64_t generation;
    IsoRing ring;       /* the socket (ring.sock) and the ring every message goes through */
    unsigned char *c2h; /* written here */
    unsigned char *h2c; /* read here: h2c_view's mapping */
    /* Shared with the outputs used in place, which pin their part of it
     * and keep it mapped past the channel (iso_chan.c). */
    struct IsoArenaView *h2c_view;
    size_t len;
    int depth;
    uint64_t next_id;
    /* Arena parts of the requests sent and not answered (bit k: part k). */
    uint32_t busy;
    /* Model runs sent and not answered yet, oldest first (iso_pipeline.c):
     * the host answers them in this order. Owned by the channel's thread. */
    struct IsoInflight *head, *tail;
    int npending;
    struct IsoChan *next_in_slot; /* slot->chans, under slot->mu */
} IsoChan;

/* What fails the runs in flight on a channel that goes (a restart seen
 * by a new run, or its thread's end): iso_pipeline.c's, set at load, so
 * that this file does not call the pipeline, which calls it. */
void IsoChan_SetRetire(void (*fn)(IsoChan *c));
/* Whether new channels get a ring (iso_ring.h), else the socket alone. */
void IsoChan_UseRing(int use);
/* The calling thread's channel to slot s, if it has one (may be stale). */
IsoChan *IsoChan_Current(IsoSlot *s);
/* The calling thread's channel of generation gen, opened when needed. NULL
 * after err, *died when the host died meanwhile. */
IsoChan *IsoChan_Get(IsoSlot *s, uint64_t gen, RAI_Error *err, int *died);
/* Drops the calling thread's channel to s (after its host died), unless a
 * run nested deeper on this thread still reads it. Runs in flight on it
 * must have been failed first (IsoPipeline_FailAll). */
void IsoChan_Drop(IsoSlot *s);
/* The id of the next request on c: one whose arena part is neither a
 * request's in flight nor pinned by an output used in place; the part is
 * busy until IsoChan_Answered. 0 when no part is free (more than
 * ISO_PIPELINE_DEPTH requests nested on one channel). */
uint64_t IsoChan_NextId(IsoChan *c);
/* Request id was answered (or never sent, or failed): its part is free. */
void IsoChan_Answered(IsoChan *c, uint64_t id);
/* Places n tensors for request id: into id's part of the c2h arena when
 * use_arena (and they fit), else into one sealed region (*region, -1 when
 * none). 0, or -1 with errno. */
int IsoChan_Place(IsoChan *c, uint64_t id, int use_arena, RAI_Tensor *const *ts, size_t n,
                  IsoTensorDesc *descs, int *region);
/* Encodes a MODEL_RUN (call NULL) or SCRIPT_RUN for request id into b,
 * its large region in *region. 0, or -1 after err. */
int IsoChan_EncodeRun(IsoChan *c, uint64_t id, IsoHandle *h, const RAI_RunInfo *info,
                      const char *key, const RAI_ScriptCall *call, RAI_Tensor *const *inputs,
                      size_t ninputs, size_t noutputs, IsoBuf *b, int *region, RAI_Error *err);

typedef enum ChanOutcome {
    CHAN_MORE, /* a callback served: keep waiting */
    CHAN_DONE, /* the request's answer: RUN_OK (*result 0) or ERROR (err) */
    CHAN_BAD,  /* a protocol error (why): the host is killed */
} ChanOutcome;

/* One message on c while request id is outstanding: a callback (served
 * here, its time added to *deadline), or id's answer: its numeric outputs
 * of at least ISO_IN_PLACE_MIN bytes used in place (see iso_chan.c), the
 * others copied into the core's memory. */
ChanOutcome IsoChan_OnMessage(IsoChan *c, IsoMsg *m, uint64_t id, uint32_t nout,
                              RAI_Tensor **outputs, int *result, long long *deadline,
                              RAI_Error *err, char *why, size_t wl);
/* MODEL_EXECUTION_TIMEOUT of a run on s, in ms (ONNX gets a second of grace). */
long long IsoChan_RunTimeoutMs(IsoSlot *s);
/* A run counted in slot->inflight: begins (NULL after err; on a run-queue
 * worker, never waiting for its host: core/run_gate.h) and ends. */
IsoChan *IsoChan_BeginRun(IsoHandle *h, const char *key, uint64_t *gen, RAI_Error *err);
/* run_gate.h's answer for h: 0 runnable (or failing at once), else when to
 * ask again. */
long long IsoChan_NotBefore(IsoHandle *h, long long since_ms, long long now_ms);
void IsoChan_EndRun(IsoSlot *s, int rc);
/* The key a run reports: its run info's, else the handle's. */
const char *IsoChan_RunKey(IsoHandle *h, const RAI_RunInfo *info, char *buf, size_t bl);

#endif

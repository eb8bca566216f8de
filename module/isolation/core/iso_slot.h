/*
 * iso_slot.h - the core's private state of isolation: slots (one isolated
 * backend and its host process each), proxy handles, and the few helpers
 * every file of this folder uses. docs/isolation.md says what it does for
 * the user ("The failure table", "The restart policy"). Its files call each other in one direction:
 * iso_slot < iso_spawn < iso_control < iso_channel, iso_handle <
 * iso_restart < iso_proxy (the folder's entry, iso_proxy.h) and iso_info.
 *
 * Threads: the main thread starts hosts (Iso_Load) and creates models;
 * run-queue workers (and LLAPI callers) run them over their own channels;
 * the supervisor thread reads every control connection and pidfd, routes
 * replies to waiters by request id and detects deaths; each slot's
 * restarter thread spawns its host again and re-creates its models. Slot state is guarded by
 * the slot's mutex; waiters sleep on its condition variable.
 */
#ifndef REDISAI_ISO_SLOT_H
#define REDISAI_ISO_SLOT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "isolation/iso_wire.h"
#include "redisai/backend_abi.h"

#define ISO_MAX_HOSTS 16

/* Replies of the proxy itself (a create or run that never reached a host). */
#define RAI_ERR_OOM "ERR out of memory"
#define RAI_ERR_HOST_RESTARTING_FMT \
    "ERR %s backend process is restarting after it exited (%s); try again"

typedef enum IsoState {
    ISO_STARTING = 0,
    ISO_READY = 1,
    ISO_DEAD = 2, /* death seen, restart pending (back-off) */
} IsoState;

typedef enum IsoHandleState {
    ISO_H_LIVE = 0,       /* built in the host of `generation` */
    ISO_H_RECREATING = 1, /* waiting for the restarted host to build it */
    ISO_H_FAILED = 2,     /* the restarted host refused it: `failed` says why */
    ISO_H_QUARANTINED = 3 /* the host died twice while building it */
} IsoHandleState;

typedef struct IsoSlot IsoSlot;

/* What the proxy's model_create/script_create returns as the backend handle. */
typedef struct IsoHandle {
    IsoSlot *slot;
    uint64_t id;
    int is_script;
    char *key;
    /* A model's blob is borrowed: RAI_Model owns that very buffer until it
     * frees the model, when it hands the buffer to the handle (owned_blob,
     * Iso_ModelFree), which frees it with itself: a handle the restarter is
     * re-creating from it outlives the model. A script's source is copied
     * (owned_source): the spec points into the command's argument, which
     * Redis frees after the command, and RAI_Script keeps a copy of its own. */
    const char *blob;
    size_t blob_len;
    char *owned_source;
    char *owned_blob; /* RedisModule_Alloc'd */
    char *device_str;
    int device;
    int64_t device_id;
    size_t ninputs, noutputs; /* spec names (TF), or entry points for scripts */
    char **inputs, **outputs;
    /* guarded by slot->mu */
    IsoHandleState state;
    uint64_t generation;
    int create_deaths;
    int busy;  /* the restarter is building it */
    int freed; /* its model or script was freed while busy: the restarter frees it */
    char *failed;
    struct IsoHandle *next;
} IsoHandle;

/* A control request waiting for its reply (routed by the supervisor). */
typedef struct IsoPending {
    uint64_t id;
    uint16_t type; /* of the request */
    int done;   /* 1: reply in msg; -1: host died first */
    IsoMsg msg;
    struct IsoPending *next;
} IsoPending;

/* A free for the host, queued by whoever freed the model or script (Redis's
 * main thread, which must not wait for a host busy in a create) and sent
 * by the supervisor once the control connection has room (iso_control.c). */
typedef struct IsoFree {
    uint16_t type; /* ISO_MSG_MODEL_FREE or ISO_MSG_SCRIPT_FREE */
    uint64_t handle;
    struct IsoFree *next;
} IsoFree;

struct IsoSlot {
    int index;
    RAI_BackendKind kind;
    char *name;
    char *real;
    char *shown;
    RAI_BackendDescriptor desc; /* the proxy's members, the host's facts */
    char framework[64], version[64], variant[32];
    int has_scripts, has_info;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    IsoState state;
    uint64_t generation; /* +1 at each death */
    pid_t pid;
    int pidfd;
    int ctl; /* -1 while no host */
    IsoPending *pending;
    /* Frees for this generation's host, oldest first; dropped at its death
     * (the next host never had those handles). */
    IsoFree *frees, *frees_tail;
    long frees_queued;
    IsoHandle *handles, *handles_tail;
    long channels;   /* open channels of this generation */
    long inflight;   /* runs sent and not answered */
    /* Run outputs of at least 16 KiB in a host's arena: used in place, and
     * copied all the same (nested, or too many parts pinned); atomic. */
    long long outputs_in_place, outputs_copied;
    /* Why the host of generation `dead_generation` ended. */
    uint64_t dead_generation; /* 0: none yet (generations start at 1) */
    char last_exit[256];      /* "signal 11 SIGSEGV" */
    char last_exit_token[64]; /* "signal_11_SIGSEGV" */
    long long last_exit_time;
    char kill_reason[256]; /* set by whoever kills the host, before the kill */
    int dying_signal;      /* from DYING */
    char exiting_why[64];  /* from EXITING */
    long restarts;
    long failed_starts; /* spawns that failed (no host started): INFO */
    int failures; /* consecutive, for the back-off */
    long long ready_since_ms;
    long long restart_at_ms;
    double last_start_seconds;
    uint64_t next_request_id;
    int retired; /* a first start that failed: never restarted */
    /* The core ends of this generation's channels: a death shuts them down,
     * so a run blocked on one wakes even while a fork child of Redis (a
     * BGSAVE) still holds a copy of the host's end. */
    struct IsoChan *chans;
};

extern IsoSlot *iso_slots[ISO_MAX_HOSTS];

/* The host table the core lends to backends (Iso_Init): the channels read
 * tensors and serve callbacks through it, as an in-process backend would. */
void Iso_SetApi(const RAI_HostApi *api);
const RAI_HostApi *Iso_Api(void);

long long Iso_NowMs(void);
/* Sleeps on the slot's condition variable at most ms (slot->mu held). */
void Iso_CondWaitMs(IsoSlot *s, long long ms);
/* Records an ERROR message's text on err, verbatim. */
void Iso_ErrorText(const IsoMsg *m, RAI_Error *err);

#endif

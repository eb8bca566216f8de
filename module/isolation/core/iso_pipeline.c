/*
 * iso_pipeline.c - model runs in flight on a channel, see iso_pipeline.h
 * and docs/isolation.md, "Runs in flight".
 *
 * A worker sends a MODEL_RUN and returns to its run queue. The host's
 * channel thread serves its channel's requests one after another, so the
 * answers come back in the order the runs were sent: each channel keeps
 * its runs in flight in a FIFO and the answer in hand always belongs to
 * the oldest. Only the oldest run's deadline is armed, from the moment the
 * host could start it (its send, or the answer before it), so
 * MODEL_EXECUTION_TIMEOUT measures the run as when the worker waited.
 *
 * Answers are decoded (small outputs copied out of the arena part, large
 * ones pinning it, iso_chan.c) as soon as they are read, and
 * kept in a thread-local list; the engine's `done` runs from
 * IsoPipeline_Wait only, on the worker's loop, never inside a read.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_pipeline.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "core/tensor.h"
#include "isolation/core/iso_control.h"

typedef struct IsoInflight {
    uint64_t id;
    IsoSlot *slot;
    uint64_t generation;
    char *key;
    uint32_t nout;
    RAI_Tensor **outs;
    int rc;
    RAI_Error *err; /* the engine's, lives until done */
    long long deadline; /* armed while oldest on its channel, else 0 */
    AsyncRun_DoneFn done;
    void *ctx;
    struct IsoInflight *next;
} IsoInflight;

/* Answered runs, oldest first, and runs submitted and not delivered. */
static __thread IsoInflight *done_head, *done_tail;
static __thread size_t tl_pending;

size_t IsoPipeline_Pending(void) {
    return tl_pending;
}

static void pushDone(IsoInflight *r) {
    r->next = NULL;
    if (done_tail) {
        done_tail->next = r;
    } else {
        done_head = r;
    }
    done_tail = r;
}

/* The oldest run of c is answered (r->rc, r->outs, r->err set): the next
 * one's deadline starts now, as the host starts it now. */
static void popAnswered(IsoChan *c) {
    IsoInflight *r = c->head;
    c->head = r->next;
    if (c->head == NULL) c->tail = NULL;
    c->npending--;
    IsoChan_Answered(c, r->id);
    if (c->head) c->head->deadline = Iso_NowMs() + IsoChan_RunTimeoutMs(c->slot);
    IsoChan_EndRun(r->slot, r->rc);
    pushDone(r);
}

/* Answers the host sent before it went are in the ring, or in the socket
 * before its EOF (SEQPACKET keeps the order): they are used, as for a run
 * waited for. */
static void takeSentAnswers(IsoChan *c) {
    while (c->head) {
        char why[300] = "";
        IsoMsg m;
        if (IsoRing_Recv(&c->ring, &m, 0, why, sizeof(why)) != 1) return;
        IsoInflight *r = c->head;
        ChanOutcome o = CHAN_BAD;
        if (m.h.id == r->id && (m.h.type == ISO_MSG_RUN_OK || m.h.type == ISO_MSG_ERROR)) {
            o = IsoChan_OnMessage(c, &m, r->id, r->nout, r->outs, &r->rc, &r->deadline, r->err,
                                  why, sizeof(why));
        }
        IsoMsg_Free(&m);
        if (o != CHAN_DONE) return;
        popAnswered(c);
    }
}

void IsoPipeline_FailAll(IsoChan *c) {
    takeSentAnswers(c);
    /* The host serves a channel's runs one after another: only the oldest
     * can have started. It gets the exit error; the others go back to their
     * run queue, as runs that never left the core. */
    int first = 1;
    while (c->head) {
        IsoInflight *r = c->head;
        for (uint32_t i = 0; i < r->nout; i++) {
            if (r->outs[i]) Tensor_Release(r->outs[i]);
            r->outs[i] = NULL;
        }
        if (first) {
            pthread_mutex_lock(&r->slot->mu);
            IsoControl_ExitError(r->slot, r->generation, "running", r->key, r->err);
            pthread_mutex_unlock(&r->slot->mu);
            r->rc = -1;
        } else {
            r->rc = ASYNC_RUN_NOT_STARTED;
        }
        first = 0;
        popAnswered(c);
    }
}

/* The host of c is gone or being killed: fail its runs, drop the channel. */
static void chanDied(IsoChan *c) {
    IsoSlot *s = c->slot;
    IsoPipeline_FailAll(c);
    IsoChan_Drop(s);
}

/* One message from c's host, if one is there (or EOF). 1 when one was
 * read and the channel lives on. */
static int readOne(IsoChan *c) {
    char why[300] = "";
    IsoMsg m;
    int rc = IsoRing_Recv(&c->ring, &m, 0, why, sizeof(why));
    if (rc == ISO_RING_NOTHING) return 0;
    if (rc == 0 || rc == -1) {
        chanDied(c);
        return 0;
    }
    ChanOutcome o = CHAN_BAD;
    if (rc == 1) {
        IsoInflight *r = c->head;
        if ((m.h.type == ISO_MSG_CB_REDIS_CALL || m.h.type == ISO_MSG_CB_MODEL_EXECUTE) &&
            (m.h.id & ISO_HOST_ID_BIT)) {
            /* Served only for runs waited for: the worker has left this
             * run's caller, and the host would serve the runs queued behind
             * it as nested in the callback. No in-tree backend's model run
             * calls back; one that does is told so. */
            IsoRing_SendError(&c->ring, m.h.id,
                              "ERR a model run in flight on an isolated backend cannot call "
                              "back into Redis");
            o = CHAN_MORE;
        } else {
            o = IsoChan_OnMessage(c, &m, r->id, r->nout, r->outs, &r->rc, &r->deadline, r->err,
                                  why, sizeof(why));
        }
        IsoMsg_Free(&m);
    }
    if (o == CHAN_DONE) {
        popAnswered(c);
    } else if (o == CHAN_BAD) {
        IsoControl_KillForProtocol(c->slot, c->generation, why);
        chanDied(c);
        return 0;
    }
    return 1;
}

/* Every answer c's host has placed in the ring, without waiting. */
static void readReady(IsoChan *c, IsoSlot *s) {
    while (IsoChan_Current(s) == c && c->npending && readOne(c)) {
    }
}

/* The oldest run of c ran past its deadline: as for a run waited for, the
 * host is killed, and every run in flight on it gets the exit error. */
static int checkDeadline(IsoChan *c, long long now) {
    if (c->head == NULL || now < c->head->deadline) return 0;
    char reason[300];
    snprintf(reason, sizeof(reason), "killed after %.200s ran past MODEL_EXECUTION_TIMEOUT (%lld ms)",
             c->head->key, rai_config.model_execution_timeout);
    IsoControl_KillWithReason(c->slot, c->generation, reason, "killed_timeout");
    chanDied(c);
    return 1;
}

void IsoPipeline_Drain(IsoChan *c) {
    IsoSlot *s = c->slot;
    while (IsoChan_Current(s) == c && c->npending) {
        long long left = c->head->deadline - Iso_NowMs();
        struct pollfd p = {.fd = c->ring.sock, .events = POLLIN};
        int pr = 1;
        if (IsoRing_Sleep(&c->ring)) {
            pr = left > 0 ? poll(&p, 1, (int)(left > 1000000 ? 1000000 : left)) : 0;
            IsoRing_Awake(&c->ring);
        }
        if (pr < 0 && errno == EINTR) continue;
        if (pr > 0) {
            if (p.revents) IsoRing_Woken(&c->ring);
            readOne(c);
        } else {
            checkDeadline(c, Iso_NowMs());
        }
    }
}

static __thread long long tl_spin_us;

void IsoPipeline_SpinHint(long long spin_us) {
    tl_spin_us = spin_us;
}

int IsoPipeline_Submit(void *handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                       size_t ninputs, size_t noutputs, AsyncRun_DoneFn done, void *ctx,
                       RAI_Error *err) {
    IsoHandle *h = handle;
    IsoSlot *s = h->slot;
    char kbuf[512];
    const char *key = IsoChan_RunKey(h, info, kbuf, sizeof(kbuf));
    uint64_t gen;
    IsoChan *c = IsoChan_BeginRun(h, key, &gen, err);
    if (c == NULL) return -1;
    /* The engine keeps at most max_in_flight per thread, so this holds;
     * if it did not, the arena parts of the runs in flight would overlap. */
    if (c->npending >= ISO_PIPELINE_DEPTH) IsoPipeline_Drain(c);
    if (IsoChan_Current(s) != c) {
        pthread_mutex_lock(&s->mu);
        IsoControl_ExitError(s, gen, "running", key, err);
        pthread_mutex_unlock(&s->mu);
        IsoChan_EndRun(s, -1);
        return -1;
    }
    uint64_t id = IsoChan_NextId(c);
    IsoInflight *r = calloc(1, sizeof(*r));
    RAI_Tensor **outs = calloc(noutputs ? noutputs : 1, sizeof(*outs));
    char *kcopy = strdup(key);
    if (id == 0 || r == NULL || outs == NULL || kcopy == NULL) {
        /* No free part cannot happen with at most ISO_PIPELINE_DEPTH in flight. */
        if (id) IsoChan_Answered(c, id);
        free(r);
        free(outs);
        free(kcopy);
        Error_Set(err, id ? "ERR out of memory"
                          : "ERR no free arena part on the channel to the backend host");
        IsoChan_EndRun(s, -1);
        return -1;
    }
    IsoRing_SpinHint(&c->ring, tl_spin_us);
    IsoBuf b;
    IsoBuf_Init(&b);
    int region = -1;
    int rc = IsoChan_EncodeRun(c, id, h, info, key, NULL, inputs, ninputs, noutputs, &b, &region,
                               err);
    int sent = rc == 0 && !b.oom &&
               IsoRing_Send(&c->ring, ISO_MSG_MODEL_RUN, id, b.data, b.len, &region,
                            region >= 0 ? 1 : 0) == 0;
    const char *fault = sent ? NULL : IsoRing_SendFault(errno);
    IsoBuf_Free(&b);
    if (region >= 0) close(region);
    if (rc != 0) {
        /* Nothing was sent: its arena part is free again. */
        IsoChan_Answered(c, id);
        free(r);
        free(outs);
        free(kcopy);
        IsoChan_EndRun(s, -1);
        return -1;
    }
    *r = (IsoInflight){
        .id = id,
        .slot = s,
        .generation = gen,
        .key = kcopy,
        .nout = (uint32_t)noutputs,
        .outs = outs,
        .rc = -1,
        .err = err,
        .deadline = c->head ? 0 : Iso_NowMs() + IsoChan_RunTimeoutMs(s),
        .done = done,
        .ctx = ctx,
    };
    if (c->tail) {
        c->tail->next = r;
    } else {
        c->head = r;
    }
    c->tail = r;
    c->npending++;
    tl_pending++;
    /* A send that failed means the host is gone (or broke its ring: it is
     * killed for it): this run and those before it get its exit error,
     * delivered as answers. */
    if (!sent) {
        if (fault) IsoControl_KillForProtocol(c->slot, c->generation, fault);
        chanDied(c);
    }
    return 0;
}

static void deliver(void) {
    while (done_head) {
        IsoInflight *r = done_head;
        done_head = r->next;
        if (done_head == NULL) done_tail = NULL;
        tl_pending--;
        r->done(r->ctx, r->rc, r->outs);
        free(r->outs);
        free(r->key);
        free(r);
    }
}

void IsoPipeline_Wait(int wake_fd, long long max_ms) {
    if (done_head) {
        deliver();
        return;
    }
    struct pollfd p[ISO_MAX_HOSTS + 1];
    IsoSlot *slots[ISO_MAX_HOSTS];
    int asleep[ISO_MAX_HOSTS];
    int n = 0, ready = 0, plain = 0;
    long long now = Iso_NowMs(), timeout = max_ms;
    for (int i = 0; i < ISO_MAX_HOSTS; i++) {
        IsoSlot *s = iso_slots[i];
        IsoChan *c = s ? IsoChan_Current(s) : NULL;
        if (c == NULL || c->npending == 0) continue;
        long long left = c->head->deadline - now;
        if (left < 0) left = 0;
        if (timeout < 0 || left < timeout) timeout = left;
        if (IsoRing_Ready(&c->ring)) ready = 1;
        if (c->ring.mem == NULL) plain = 1;
        slots[n] = s;
        asleep[n] = 0;
        p[n++] = (struct pollfd){.fd = c->ring.sock, .events = POLLIN};
    }
    int nfds = n;
    if (wake_fd >= 0) p[nfds++] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
    if (nfds == 0) return;
    /* Answers already in a ring are read without a system call; a poll
     * that may block first tells each host that it will be rung, at its
     * next answer: the oldest run's client waits for nothing else. */
    for (int i = 0; !ready && timeout != 0 && i < n; i++) {
        IsoChan *c = IsoChan_Current(slots[i]);
        asleep[i] = IsoRing_Sleep(&c->ring);
        if (!asleep[i]) ready = 1;
    }
    if (!ready && (timeout != 0 || plain || wake_fd >= 0)) {
        int pr = poll(p, (nfds_t)nfds, (int)(timeout < 0 || timeout > 1000000 ? 1000000 : timeout));
        if (pr <= 0) {
            for (int i = 0; i < nfds; i++) p[i].revents = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (asleep[i]) IsoRing_Awake(&IsoChan_Current(slots[i])->ring);
    }
    for (int i = 0; i < n; i++) {
        IsoChan *c = IsoChan_Current(slots[i]);
        if (c && p[i].revents) IsoRing_Woken(&c->ring);
        if (c && c->npending && (p[i].revents || IsoRing_Ready(&c->ring))) readReady(c, slots[i]);
    }
    now = Iso_NowMs();
    for (int i = 0; i < n; i++) {
        IsoChan *c = IsoChan_Current(slots[i]);
        if (c && c->npending) checkDeadline(c, now);
    }
    deliver();
}

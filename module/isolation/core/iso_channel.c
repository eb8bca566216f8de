/*
 * iso_channel.c - runs waited for, over the calling thread's channel
 * (iso_chan.c; docs/isolation.md, "The protocol"): scripts,
 * nested runs, and model runs of any thread that does not hand runs off
 * (iso_pipeline.c). The thread sends its request and serves the channel,
 * callbacks included, until the answer.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_channel.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/config.h"
#include "isolation/core/iso_chan.h"
#include "isolation/core/iso_control.h"
#include "isolation/core/iso_pipeline.h"

void IsoChannel_ShutdownAll(IsoSlot *s) {
    for (IsoChan *c = s->chans; c; c = c->next_in_slot) shutdown(c->ring.sock, SHUT_RDWR);
}

/* Sends the encoded request id and serves the channel until its reply.
 * 0 with outputs, or -1 after err. */
static int exchange(IsoChan *c, uint64_t gen, uint64_t id, const char *key, uint16_t type,
                    IsoBuf *b, int region, uint32_t nout, RAI_Tensor **outputs, RAI_Error *err) {
    IsoSlot *s = c->slot;
    char why[300] = "";
    int sent = !b->oom && IsoRing_Send(&c->ring, type, id, b->data, b->len, &region,
                                       region >= 0 ? 1 : 0) == 0;
    const char *fault = sent ? NULL : IsoRing_SendFault(errno);
    if (fault) IsoControl_KillForProtocol(s, gen, fault);
    long long deadline = Iso_NowMs() + IsoChan_RunTimeoutMs(s);
    int result = -1, died = !sent;
    while (!died) {
        long long left = deadline - Iso_NowMs();
        struct pollfd p = {.fd = c->ring.sock, .events = POLLIN};
        int pr = 1;
        if (IsoRing_Sleep(&c->ring)) {
            pr = left > 0 ? poll(&p, 1, (int)(left > 1000000 ? 1000000 : left)) : 0;
            IsoRing_Awake(&c->ring);
        }
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            char reason[300];
            snprintf(reason, sizeof(reason),
                     "killed after %.200s ran past MODEL_EXECUTION_TIMEOUT (%lld ms)", key,
                     rai_config.model_execution_timeout);
            IsoControl_KillWithReason(s, gen, reason, "killed_timeout");
            died = 1;
            break;
        }
        if (p.revents) IsoRing_Woken(&c->ring);
        IsoMsg m;
        int rc = IsoRing_Recv(&c->ring, &m, 0, why, sizeof(why));
        if (rc == ISO_RING_NOTHING) continue; /* a DOORBELL for an entry already read */
        ChanOutcome o = CHAN_BAD;
        if (rc == 0 || rc == -1) {
            died = 1;
            break;
        }
        if (rc == 1) {
            o = IsoChan_OnMessage(c, &m, id, nout, outputs, &result, &deadline, err, why,
                                  sizeof(why));
            IsoMsg_Free(&m);
        }
        if (o == CHAN_DONE) break;
        if (o == CHAN_BAD) {
            IsoControl_KillForProtocol(s, gen, why);
            died = 1;
        }
    }
    IsoChan_Answered(c, id);
    if (died) {
        pthread_mutex_lock(&s->mu);
        IsoControl_ExitError(s, gen, "running", key, err);
        pthread_mutex_unlock(&s->mu);
        IsoChan_Drop(s);
    }
    return result;
}

/* One run, waited for: a model's (call NULL) or a script's. The two
 * requests differ only by the script's function, flag, KEYS and ARGS
 * around the same inputs. */
static int run(IsoHandle *h, const RAI_RunInfo *info, const RAI_ScriptCall *call,
               RAI_Tensor *const *inputs, size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
               RAI_Error *err) {
    char kbuf[512];
    const char *key = IsoChan_RunKey(h, info, kbuf, sizeof(kbuf));
    uint64_t gen;
    IsoChan *c = IsoChan_BeginRun(h, key, &gen, err);
    if (c == NULL) return -1;
    /* A run waited for goes after the runs in flight on this channel, which
     * are answered first (and delivered later, by the run queue worker):
     * then the host serves nothing behind it, its callbacks included. */
    if (c->depth == 0 && c->npending) {
        IsoPipeline_Drain(c);
        if (IsoChan_Current(h->slot) != c) { /* the host died meanwhile */
            pthread_mutex_lock(&h->slot->mu);
            IsoControl_ExitError(h->slot, gen, "running", key, err);
            pthread_mutex_unlock(&h->slot->mu);
            IsoChan_EndRun(h->slot, -1);
            return -1;
        }
    }
    uint64_t id = IsoChan_NextId(c);
    if (id == 0) {
        Error_Set(err, "ERR isolated runs nested too deeply on one channel to the backend host");
        IsoChan_EndRun(h->slot, -1);
        return -1;
    }
    IsoBuf b;
    IsoBuf_Init(&b);
    int region = -1, rc = -1;
    if (IsoChan_EncodeRun(c, id, h, info, key, call, inputs, ninputs, noutputs, &b, &region,
                          err) == 0) {
        rc = exchange(c, gen, id, key, call ? ISO_MSG_SCRIPT_RUN : ISO_MSG_MODEL_RUN, &b, region,
                      (uint32_t)noutputs, outputs, err);
    } else {
        IsoChan_Answered(c, id); /* nothing sent */
    }
    IsoBuf_Free(&b);
    if (region >= 0) close(region);
    IsoChan_EndRun(h->slot, rc);
    return rc;
}

int IsoChannel_ModelRun(IsoHandle *h, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                        size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    return run(h, info, NULL, inputs, ninputs, outputs, noutputs, err);
}

int IsoChannel_ScriptRun(IsoHandle *h, const RAI_RunInfo *info, const RAI_ScriptCall *call,
                         RAI_Tensor **outputs, RAI_Error *err) {
    return run(h, info, call, call->inputs, call->ninputs, outputs, call->noutputs, err);
}

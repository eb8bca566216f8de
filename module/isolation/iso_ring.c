/*
 * iso_ring.c - see iso_ring.h.
 *
 * An entry is a u32 length, a u32 zero, then that many bytes (a message's
 * header and payload), padded to 8 bytes; it never wraps. Length 0 is a
 * marker: the next message is the next non-DOORBELL datagram of the socket.
 * ISO_RING_WRAP fills the rest of the ring: the next entry is at its start.
 * Memfd layout: the c2h counters, the h2c counters, then (from 4096) the
 * c2h bytes and the h2c bytes.
 */
#define _GNU_SOURCE
#include "isolation/iso_ring.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "isolation/iso_shm.h"

#define ISO_RING_WRAP 0xFFFFFFFFu
#define ENTRY_HEAD 8u
#define ROOM_WAIT_US (2LL * 1000 * 1000)

_Static_assert(2 * sizeof(IsoRingCtl) <= 4096, "the counters fit the first page");

static size_t pad8(size_t n) {
    return (n + 7) & ~(size_t)7;
}

void IsoRing_Plain(IsoRing *r, int sock) {
    *r = (IsoRing){.sock = sock};
}

int IsoRing_Create(void) {
    return IsoShm_CreateArena("redisai-ring", ISO_RING_MEM);
}

int IsoRing_Attach(IsoRing *r, int sock, int fd, int host_side, char *why, size_t whylen) {
    IsoRing_Plain(r, sock);
    size_t size;
    if (!IsoShm_Check(fd, F_SEAL_SHRINK | F_SEAL_GROW, ISO_RING_MEM, ISO_RING_MEM, &size, why,
                      whylen))
        return 0;
    unsigned char *mem = IsoShm_Map(fd, ISO_RING_MEM, 1);
    if (mem == NULL) {
        snprintf(why, whylen, "cannot map the ring: %s", strerror(errno));
        return 0;
    }
    IsoRingCtl *c2h = (IsoRingCtl *)mem, *h2c = (IsoRingCtl *)mem + 1;
    unsigned char *c2h_data = mem + 4096, *h2c_data = mem + 4096 + ISO_RING_BYTES;
    r->mem = mem;
    r->out_ctl = host_side ? h2c : c2h;
    r->out_data = host_side ? h2c_data : c2h_data;
    r->in_ctl = host_side ? c2h : h2c;
    r->in_data = host_side ? c2h_data : h2c_data;
    return 1;
}

void IsoRing_Detach(IsoRing *r) {
    if (r->stashed) IsoMsg_Free(&r->stash);
    r->stashed = 0;
    if (r->mem) IsoShm_Unmap(r->mem, ISO_RING_MEM);
    r->mem = NULL;
}

/* --- writing ----------------------------------------------------------------- */

/* Waits until need bytes are free (the reader consumes them). 0, or -1 with
 * errno. */
static int room(IsoRing *r, size_t need) {
    struct timespec nap = {.tv_nsec = 50 * 1000};
    long long until = 0;
    for (;;) {
        uint64_t tail = __atomic_load_n(&r->out_ctl->tail, __ATOMIC_ACQUIRE);
        uint64_t used = r->out_head - tail;
        if (used > ISO_RING_BYTES) {
            errno = EPROTO; /* the reader's counter is not one it could have */
            return -1;
        }
        if (ISO_RING_BYTES - used >= need) return 0;
        if (until == 0) {
            until = Clock_NowUs() + ROOM_WAIT_US;
        } else if (Clock_NowUs() > until) {
            errno = ETIMEDOUT;
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

/* Appends an entry of len bytes (hdr then payload; len 0: a marker). */
static int put(IsoRing *r, const IsoHeader *hdr, const void *payload, size_t plen) {
    size_t len = hdr ? sizeof(*hdr) + plen : 0;
    size_t need = ENTRY_HEAD + pad8(len);
    size_t pos = (size_t)(r->out_head % ISO_RING_BYTES);
    size_t skip = pos + need > ISO_RING_BYTES ? ISO_RING_BYTES - pos : 0;
    if (room(r, skip + need) != 0) return -1;
    if (skip) {
        uint32_t wrap[2] = {ISO_RING_WRAP, 0};
        memcpy(r->out_data + pos, wrap, sizeof(wrap));
        pos = 0;
    }
    uint32_t head[2] = {(uint32_t)len, 0};
    memcpy(r->out_data + pos, head, sizeof(head));
    if (hdr) {
        memcpy(r->out_data + pos + ENTRY_HEAD, hdr, sizeof(*hdr));
        if (plen) memcpy(r->out_data + pos + ENTRY_HEAD + sizeof(*hdr), payload, plen);
    }
    r->out_head += skip + need;
    __atomic_store_n(&r->out_ctl->head, r->out_head, __ATOMIC_RELEASE);
    return 0;
}

/* After a publish: wakes the reader when it sleeps and has not been woken
 * for this sleep yet. The fence pairs with IsoRing_Sleep's: either the
 * reader sees the entry, or this sees it asleep. */
static int ring(IsoRing *r) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t s = __atomic_load_n(&r->out_ctl->sleep, __ATOMIC_ACQUIRE);
    if (!(s & 1) || s == r->rung) return 0;
    r->rung = s;
    return Iso_Send(r->sock, ISO_MSG_DOORBELL, 0, NULL, 0, NULL, 0);
}

int IsoRing_Send(IsoRing *r, uint16_t type, uint64_t id, const void *payload, size_t len,
                 const int *fds, int nfds) {
    if (r->mem == NULL) return Iso_Send(r->sock, type, id, payload, len, fds, nfds);
    if (nfds == 0 && sizeof(IsoHeader) + len <= ISO_RING_ENTRY_MAX) {
        IsoHeader h = {.magic = ISO_MAGIC, .type = type, .id = id, .inline_len = (uint32_t)len};
        if (put(r, &h, payload, len) != 0) return -1;
        return ring(r);
    }
    if (put(r, NULL, NULL, 0) != 0 || ring(r) != 0) return -1;
    return Iso_Send(r->sock, type, id, payload, len, fds, nfds);
}

const char *IsoRing_SendFault(int err) {
    if (err == EPROTO) return "ring: the reader's counter is out of range";
    if (err == ETIMEDOUT) return "ring: full for 2 s";
    return NULL;
}

int IsoRing_SendError(IsoRing *r, uint64_t id, const char *text) {
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_CStr(&b, text);
    int rc = b.oom ? -1 : IsoRing_Send(r, ISO_MSG_ERROR, id, b.data, b.len, NULL, 0);
    IsoBuf_Free(&b);
    return rc;
}

/* --- reading ----------------------------------------------------------------- */

static int bad(char *why, size_t whylen, const char *what) {
    snprintf(why, whylen, "ring: %s", what);
    return -2;
}

/* The next datagram that is not a DOORBELL. */
static int sockMessage(IsoRing *r, IsoMsg *m, int flags, char *why, size_t whylen) {
    for (;;) {
        int rc = Iso_RecvFlags(r->sock, m, flags, why, whylen);
        if (rc != 1 || m->h.type != ISO_MSG_DOORBELL) return rc;
        IsoMsg_Free(m);
    }
}

/* The ring's next entry: 1 a message, ISO_RING_NOTHING when empty, or as
 * Iso_Recv. */
static int take(IsoRing *r, IsoMsg *m, char *why, size_t whylen) {
    for (;;) {
        uint64_t head = __atomic_load_n(&r->in_ctl->head, __ATOMIC_ACQUIRE);
        uint64_t avail = head - r->in_tail;
        if (avail == 0) return ISO_RING_NOTHING;
        if (avail > ISO_RING_BYTES || avail % 8)
            return bad(why, whylen, "the writer's counter is out of range");
        size_t pos = (size_t)(r->in_tail % ISO_RING_BYTES);
        uint32_t eh[2];
        memcpy(eh, r->in_data + pos, sizeof(eh));
        if (eh[0] == ISO_RING_WRAP) {
            if (avail < ISO_RING_BYTES - pos) return bad(why, whylen, "a wrap past the head");
            r->in_tail += ISO_RING_BYTES - pos;
            __atomic_store_n(&r->in_ctl->tail, r->in_tail, __ATOMIC_RELEASE);
            continue;
        }
        size_t len = eh[0];
        size_t need = ENTRY_HEAD + pad8(len);
        if (len > ISO_RING_ENTRY_MAX || need > avail || pos + need > ISO_RING_BYTES)
            return bad(why, whylen, "an entry past the head or the end");
        unsigned char *buf = NULL;
        if (len) {
            if (len < sizeof(IsoHeader)) return bad(why, whylen, "an entry shorter than a header");
            buf = malloc(len);
            if (buf == NULL) return -1;
            memcpy(buf, r->in_data + pos + ENTRY_HEAD, len);
        }
        r->in_tail += need;
        __atomic_store_n(&r->in_ctl->tail, r->in_tail, __ATOMIC_RELEASE);
        if (len == 0 && r->stashed) {
            *m = r->stash;
            r->stashed = 0;
            return 1;
        }
        if (len == 0) return sockMessage(r, m, 0, why, whylen);
        int rc = Iso_FromBytes(m, buf, len, why, whylen);
        if (rc == 1 && m->h.type == ISO_MSG_DOORBELL) {
            IsoMsg_Free(m);
            return bad(why, whylen, "a DOORBELL in the ring");
        }
        return rc;
    }
}

void IsoRing_SpinHint(IsoRing *r, long long spin_us) {
    if (r->mem == NULL) return;
    if (spin_us < 0) spin_us = 0;
    __atomic_store_n(&r->out_ctl->spin_us, (uint64_t)spin_us, __ATOMIC_RELAXED);
}

/* Looks for a message for as long as the writer's hint says (a value past
 * ISO_RING_SPIN_MAX_US is the writer's garbage and capped). 1 when one came. */
static int spinForMessage(IsoRing *r) {
    uint64_t spin = __atomic_load_n(&r->in_ctl->spin_us, __ATOMIC_RELAXED);
    if (spin == 0) return 0;
    if (spin > ISO_RING_SPIN_MAX_US) spin = ISO_RING_SPIN_MAX_US;
    long long end = Clock_NowUs() + (long long)spin;
    while (Clock_NowUs() < end) {
        if (IsoRing_Ready(r)) return 1;
        sched_yield();
    }
    return IsoRing_Ready(r);
}

int IsoRing_Ready(IsoRing *r) {
    return r->mem && __atomic_load_n(&r->in_ctl->head, __ATOMIC_ACQUIRE) != r->in_tail;
}

int IsoRing_Sleep(IsoRing *r) {
    if (r->mem == NULL) return 1;
    r->sleep++;
    __atomic_store_n(&r->in_ctl->sleep, r->sleep, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!IsoRing_Ready(r)) return 1;
    IsoRing_Awake(r);
    return 0;
}

void IsoRing_Awake(IsoRing *r) {
    if (r->mem == NULL) return;
    r->sleep++;
    __atomic_store_n(&r->in_ctl->sleep, r->sleep, __ATOMIC_RELAXED);
}

void IsoRing_Woken(IsoRing *r) {
    if (r->mem == NULL || r->stashed || r->ended) return;
    IsoMsg m;
    int rc = Iso_RecvFlags(r->sock, &m, MSG_DONTWAIT, r->end_why, sizeof(r->end_why));
    if (rc == 1 && m.h.type == ISO_MSG_DOORBELL) {
        IsoMsg_Free(&m);
    } else if (rc == 1) {
        r->stash = m;
        r->stashed = 1;
    } else if (rc != ISO_RING_NOTHING) {
        r->ended = 1;
        r->end_rc = rc;
        r->end_errno = errno;
    }
}

int IsoRing_Recv(IsoRing *r, IsoMsg *m, int block, char *why, size_t whylen) {
    if (r->mem == NULL) return Iso_RecvFlags(r->sock, m, block ? 0 : MSG_DONTWAIT, why, whylen);
    for (;;) {
        int rc = take(r, m, why, whylen);
        if (rc != ISO_RING_NOTHING) return rc;
        if (r->stashed) return bad(why, whylen, "a message in the socket without its marker");
        if (r->ended) {
            snprintf(why, whylen, "%s", r->end_why);
            errno = r->end_errno;
            return r->end_rc;
        }
        /* Not waiting: the socket is read after a poll (IsoRing_Woken) or
         * at a marker, never on the chance of a DOORBELL. */
        if (!block) return ISO_RING_NOTHING;
        if (spinForMessage(r) || !IsoRing_Sleep(r)) continue;
        /* Nothing in the ring when it was looked at. A datagram now is a
         * DOORBELL, or a message whose marker (and the entries before it)
         * the writer published after that look: it waits for its marker. */
        rc = Iso_RecvFlags(r->sock, m, 0, why, whylen);
        IsoRing_Awake(r);
        if (rc == 1 && m->h.type == ISO_MSG_DOORBELL) {
            IsoMsg_Free(m);
            continue;
        }
        if (rc == 1) {
            r->stash = *m;
            r->stashed = 1;
            continue;
        }
        return rc;
    }
}

/*
 * iso_ring.h - a data channel's messages through shared memory, with a
 * system call only when the reader sleeps (docs/isolation.md, "The ring").
 * Compiled into the core and the host; libc only.
 *
 * Over the socket alone every message costs a sendmsg and a recvmsg (and a
 * poll) on each side. With a ring, each direction of a channel has a
 * single-producer single-consumer byte ring in one shared memfd: a message
 * without descriptors that fits ISO_RING_ENTRY_MAX is copied into the ring;
 * any other message leaves a marker in the ring and goes through the socket,
 * so the reader keeps one order. A reader about to block on the socket says
 * so (an odd sleep count, then it looks at the ring once more); a writer that
 * sees it asleep sends one DOORBELL datagram. A reader that finds work
 * never sleeps, and a busy pair of threads exchanges runs without a system
 * call.
 *
 * Everything read from the ring is the peer's and hostile: its counters are
 * checked against the ring's size and each message is copied out before its
 * header is checked, exactly as a datagram's. Each side writes only its own
 * counters; it keeps its own copy of them and never reads them back.
 *
 * Without a ring (IsoRing_Plain: REDISAI_ISOLATED_RING=0, or a peer that
 * opened the channel with three descriptors) the same calls use the socket
 * alone, as before.
 */
#ifndef REDISAI_ISO_RING_H
#define REDISAI_ISO_RING_H

#include <stddef.h>
#include <stdint.h>

#include "isolation/iso_wire.h"

#define ISO_RING_BYTES (256u << 10)   /* per direction */
#define ISO_RING_ENTRY_MAX (16u << 10) /* header and payload; larger goes to the socket */
#define ISO_RING_MEM (4096u + 2u * ISO_RING_BYTES)
#define ISO_RING_SPIN_MAX_US 10000

/* One direction's counters, in the shared memfd. */
typedef struct IsoRingCtl {
    _Alignas(64) uint64_t head; /* the writer's: bytes published */
    uint64_t spin_us;           /* the writer's: how long the reader may look for the next
                                   message before it sleeps (at most ISO_RING_SPIN_MAX_US) */
    _Alignas(64) uint64_t tail; /* the reader's: bytes consumed */
    uint64_t sleep;             /* the reader's: odd while it may block on the socket */
} IsoRingCtl;

typedef struct IsoRing {
    int sock;
    unsigned char *mem; /* NULL: the socket carries everything */
    IsoRingCtl *out_ctl, *in_ctl;
    unsigned char *out_data, *in_data;
    uint64_t out_head; /* own counters, never read back from the memfd */
    uint64_t in_tail;
    uint64_t sleep;
    uint64_t rung; /* the peer's sleep count last woken */
    IsoMsg stash;  /* a socket message read before its marker was seen */
    int stashed;
    int ended;     /* the socket's end (0), failure (-1) or garbage (-2), seen */
    int end_rc, end_errno; /* by IsoRing_Woken: returned once the ring is read */
    char end_why[160];
} IsoRing;

/* The socket alone. */
void IsoRing_Plain(IsoRing *r, int sock);
/* A new ring memfd for a channel (the core makes it). fd, or -1 with errno. */
int IsoRing_Create(void);
/* Maps the ring memfd fd (checked: sealed, ISO_RING_MEM bytes); host_side
 * says which direction is written here. The fd may be closed afterwards.
 * 1, or 0 with the reason in why. */
int IsoRing_Attach(IsoRing *r, int sock, int fd, int host_side, char *why, size_t whylen);
void IsoRing_Detach(IsoRing *r);

/* As Iso_Send / Iso_SendError. A ring full for over two seconds (a peer
 * that stopped reading) or a peer's counter out of range fail with
 * ETIMEDOUT / EPROTO. */
int IsoRing_Send(IsoRing *r, uint16_t type, uint64_t id, const void *payload, size_t len,
                 const int *fds, int nfds);
int IsoRing_SendError(IsoRing *r, uint64_t id, const char *text);
/* Why a failed send's errno is the reader's fault (a protocol error: the
 * reader is to be killed, not mourned), or NULL for any other failure. */
const char *IsoRing_SendFault(int err);

/* As Iso_Recv: the next message in the writer's order. block 0 returns -3
 * when none is there yet (DOORBELLs are taken and dropped). */
#define ISO_RING_NOTHING (-3)
int IsoRing_Recv(IsoRing *r, IsoMsg *m, int block, char *why, size_t whylen);

/* Before a poll that includes r->sock: 0 when a message is already in the
 * ring (do not block); 1 when the writer will ring the socket for the next
 * one. After the poll, IsoRing_Awake for each ring that returned 1. */
int IsoRing_Sleep(IsoRing *r);
void IsoRing_Awake(IsoRing *r);
/* After a poll that found r->sock readable: takes the DOORBELL that woke
 * the reader (else it would wake the next poll at once), or keeps a message
 * or the socket's end for IsoRing_Recv, after what the ring holds. */
void IsoRing_Woken(IsoRing *r);
/* The writer's hint: the reader, about to block in IsoRing_Recv, first
 * looks for the next message for up to spin_us (capped), yielding the CPU. */
void IsoRing_SpinHint(IsoRing *r, long long spin_us);
/* A message (or a marker) is in the ring. */
int IsoRing_Ready(IsoRing *r);

#endif

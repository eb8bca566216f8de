/*
 * iso_wire.h - bounded encoding, decoding, sending and receiving of the
 * messages of iso_protocol.h. Compiled into the core and the host alike;
 * libc only (no Redis call), so that the host links no Redis and the core
 * may use it on any thread.
 *
 * The decoder treats every count and length as hostile, as backend_file.c
 * treats an ELF: each is checked against the bytes that remain before
 * anything is allocated, and a message with bytes left over is malformed.
 */
#ifndef REDISAI_ISO_WIRE_H
#define REDISAI_ISO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "isolation/iso_protocol.h"

/* --- encoding ---------------------------------------------------------------- */

typedef struct IsoBuf {
    unsigned char *data; /* malloc'd */
    size_t len, cap;
    int oom; /* an allocation failed: the message must not be sent */
} IsoBuf;

void IsoBuf_Init(IsoBuf *b);
void IsoBuf_Free(IsoBuf *b);
void IsoBuf_U8(IsoBuf *b, uint8_t v);
void IsoBuf_U32(IsoBuf *b, uint32_t v);
void IsoBuf_U64(IsoBuf *b, uint64_t v);
void IsoBuf_I64(IsoBuf *b, int64_t v);
void IsoBuf_Bytes(IsoBuf *b, const void *p, size_t n); /* raw, no length */
void IsoBuf_Str(IsoBuf *b, const char *s, size_t n);   /* u32 length + bytes */
void IsoBuf_CStr(IsoBuf *b, const char *s);             /* NULL encodes as "" */
void IsoBuf_Tensor(IsoBuf *b, const IsoTensorDesc *t);
/* Sets every field of a descriptor but its dims (the caller copies ndims of
 * them): a compound literal would zero all ISO_DIMS_MAX dims, 8 KiB, once
 * per tensor of every request. */
void IsoTensorDesc_Head(IsoTensorDesc *d, uint8_t code, uint8_t bits, uint32_t ndims,
                        uint64_t nbytes);

/* --- decoding ---------------------------------------------------------------- */

typedef struct IsoReader {
    const unsigned char *p;
    size_t len, pos;
    const char *why; /* first decoding error, NULL while none */
} IsoReader;

void IsoReader_Init(IsoReader *r, const void *p, size_t len);
/* Each getter returns 1, or 0 (and records why) once the reader failed:
 * after a failure every getter fails, so a decoder may check once. */
int IsoReader_U8(IsoReader *r, uint8_t *v);
int IsoReader_U32(IsoReader *r, uint32_t *v);
int IsoReader_U64(IsoReader *r, uint64_t *v);
int IsoReader_I64(IsoReader *r, int64_t *v);
/* A string, borrowed from the message (not NUL-terminated), at most max bytes. */
int IsoReader_StrView(IsoReader *r, const char **s, size_t *n, size_t max);
/* The same, copied into malloc'd memory with a NUL added. */
int IsoReader_StrDup(IsoReader *r, char **s, size_t *n, size_t max);
/* A count of items each taking at least min_item bytes: checked against the
 * bytes left before the caller allocates count items. */
int IsoReader_Count(IsoReader *r, uint32_t *count, uint32_t max, size_t min_item);
int IsoReader_Tensor(IsoReader *r, IsoTensorDesc *t);
/* 1 when every byte was consumed and nothing failed. */
int IsoReader_Done(IsoReader *r);

/* --- one message ------------------------------------------------------------- */

typedef struct IsoMsg {
    IsoHeader h;
    const unsigned char *payload; /* inline (in buf) or the mapped bulk memfd */
    size_t payload_len;
    int fds[ISO_MAX_FDS]; /* the descriptors that came with it, bulk memfd excluded */
    int nfds;
    unsigned char *buf; /* receive buffer, malloc'd */
    void *bulk_map;     /* the bulk mapping, munmap'd by IsoMsg_Free */
    size_t bulk_map_len;
} IsoMsg;

/* Sends one message: payload inline when it fits in ISO_INLINE_MAX, else
 * in a sealed bulk memfd sent as fds[0] before the caller's fds. Returns 0,
 * or -1 with errno (EPIPE once the peer is gone). */
int Iso_Send(int sock, uint16_t type, uint64_t id, const void *payload, size_t len,
             const int *fds, int nfds);
/* The same for a small message without descriptors, never blocking: -1
 * with errno EAGAIN while the socket is full. */
int Iso_TrySend(int sock, uint16_t type, uint64_t id, const void *payload, size_t len);
/* Sends an ERROR message with the text. */
int Iso_SendError(int sock, uint64_t id, const char *text);

/* Receives one message into *m. Returns 1; 0 on EOF; -1 with errno on a
 * system error; -2 when the datagram is malformed, with the reason in why.
 * Every descriptor received is closed again on failure. */
int Iso_Recv(int sock, IsoMsg *m, char *why, size_t whylen);
/* The same with recvmsg flags: with MSG_DONTWAIT, -3 when nothing came. */
int Iso_RecvFlags(int sock, IsoMsg *m, int flags, char *why, size_t whylen);
/* A message copied out of a ring (iso_ring.h): buf (malloc'd, n bytes,
 * header first) becomes m's and is checked as a datagram without
 * descriptors. 1, or -2 (malformed, buf freed) with the reason in why. */
int Iso_FromBytes(IsoMsg *m, unsigned char *buf, size_t n, char *why, size_t whylen);
/* Closes the descriptors still in m (those the caller did not take, set to
 * -1 when taken) and unmaps its payload. */
void IsoMsg_Free(IsoMsg *m);

#endif

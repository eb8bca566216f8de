/*
 * iso_wire.c - bounded encoding, decoding and transport of isolation
 * messages, see iso_wire.h.
 */
#define _GNU_SOURCE /* MSG_CMSG_CLOEXEC, memfd_create */
#include "isolation/iso_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "isolation/iso_shm.h"

static const char *type_names[ISO_MSG_TYPE_MAX + 1] = {
    [ISO_MSG_HELLO] = "HELLO",
    [ISO_MSG_HELLO_OK] = "HELLO_OK",
    [ISO_MSG_MODEL_CREATE] = "MODEL_CREATE",
    [ISO_MSG_MODEL_CREATED] = "MODEL_CREATED",
    [ISO_MSG_MODEL_FREE] = "MODEL_FREE",
    [ISO_MSG_SCRIPT_CREATE] = "SCRIPT_CREATE",
    [ISO_MSG_SCRIPT_CREATED] = "SCRIPT_CREATED",
    [ISO_MSG_SCRIPT_FREE] = "SCRIPT_FREE",
    [ISO_MSG_OPEN_CHANNEL] = "OPEN_CHANNEL",
    [ISO_MSG_CHANNEL_OK] = "CHANNEL_OK",
    [ISO_MSG_MODEL_RUN] = "MODEL_RUN",
    [ISO_MSG_SCRIPT_RUN] = "SCRIPT_RUN",
    [ISO_MSG_RUN_OK] = "RUN_OK",
    [ISO_MSG_CB_REDIS_CALL] = "CB_REDIS_CALL",
    [ISO_MSG_CB_REDIS_REPLY] = "CB_REDIS_REPLY",
    [ISO_MSG_CB_MODEL_EXECUTE] = "CB_MODEL_EXECUTE",
    [ISO_MSG_CB_MODEL_REPLY] = "CB_MODEL_REPLY",
    [ISO_MSG_INFO] = "INFO",
    [ISO_MSG_INFO_REPLY] = "INFO_REPLY",
    [ISO_MSG_LOG] = "LOG",
    [ISO_MSG_DYING] = "DYING",
    [ISO_MSG_EXITING] = "EXITING",
    [ISO_MSG_SHUTDOWN] = "SHUTDOWN",
    [ISO_MSG_ERROR] = "ERROR",
    [ISO_MSG_DOORBELL] = "DOORBELL",
};

const char *Iso_MsgTypeName(uint16_t type) {
    return type <= ISO_MSG_TYPE_MAX && type_names[type] ? type_names[type] : "unknown";
}

/* --- encoding ---------------------------------------------------------------- */

void IsoBuf_Init(IsoBuf *b) {
    *b = (IsoBuf){0};
}

void IsoBuf_Free(IsoBuf *b) {
    free(b->data);
    *b = (IsoBuf){0};
}

static unsigned char *reserve(IsoBuf *b, size_t n) {
    if (b->oom) return NULL;
    if (n > SIZE_MAX - b->len) {
        b->oom = 1;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        unsigned char *d = realloc(b->data, cap);
        if (d == NULL) {
            b->oom = 1;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    unsigned char *p = b->data + b->len;
    b->len += n;
    return p;
}

/* Fields are little-endian; every platform RedisAI builds for is too, so
 * the copy is the encoding (the static assert keeps it honest). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

void IsoBuf_Bytes(IsoBuf *b, const void *p, size_t n) {
    unsigned char *d = reserve(b, n);
    if (d && n) memcpy(d, p, n);
}

void IsoBuf_U8(IsoBuf *b, uint8_t v) { IsoBuf_Bytes(b, &v, 1); }
void IsoBuf_U32(IsoBuf *b, uint32_t v) { IsoBuf_Bytes(b, &v, 4); }
void IsoBuf_U64(IsoBuf *b, uint64_t v) { IsoBuf_Bytes(b, &v, 8); }
void IsoBuf_I64(IsoBuf *b, int64_t v) { IsoBuf_Bytes(b, &v, 8); }

void IsoBuf_Str(IsoBuf *b, const char *s, size_t n) {
    if (n > UINT32_MAX) {
        b->oom = 1;
        return;
    }
    IsoBuf_U32(b, (uint32_t)n);
    IsoBuf_Bytes(b, s, n);
}

void IsoBuf_CStr(IsoBuf *b, const char *s) {
    IsoBuf_Str(b, s ? s : "", s ? strlen(s) : 0);
}

void IsoTensorDesc_Head(IsoTensorDesc *d, uint8_t code, uint8_t bits, uint32_t ndims,
                        uint64_t nbytes) {
    d->code = code;
    d->bits = bits;
    d->region = 0;
    d->pad = 0;
    d->ndims = ndims;
    d->offset = 0;
    d->nbytes = nbytes;
}

void IsoBuf_Tensor(IsoBuf *b, const IsoTensorDesc *t) {
    IsoBuf_U8(b, t->code);
    IsoBuf_U8(b, t->bits);
    IsoBuf_U8(b, t->region);
    IsoBuf_U8(b, 0);
    IsoBuf_U32(b, t->ndims);
    IsoBuf_U64(b, t->offset);
    IsoBuf_U64(b, t->nbytes);
    for (uint32_t i = 0; i < t->ndims && i < ISO_DIMS_MAX; i++) IsoBuf_I64(b, t->dims[i]);
}

/* --- decoding ---------------------------------------------------------------- */

void IsoReader_Init(IsoReader *r, const void *p, size_t len) {
    *r = (IsoReader){.p = p, .len = len};
}

static int fail(IsoReader *r, const char *why) {
    if (r->why == NULL) r->why = why;
    return 0;
}

static int take(IsoReader *r, void *out, size_t n) {
    if (r->why) return 0;
    if (n > r->len - r->pos) return fail(r, "a field runs past the end of the message");
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return 1;
}

int IsoReader_U8(IsoReader *r, uint8_t *v) { return take(r, v, 1); }
int IsoReader_U32(IsoReader *r, uint32_t *v) { return take(r, v, 4); }
int IsoReader_U64(IsoReader *r, uint64_t *v) { return take(r, v, 8); }
int IsoReader_I64(IsoReader *r, int64_t *v) { return take(r, v, 8); }

int IsoReader_StrView(IsoReader *r, const char **s, size_t *n, size_t max) {
    uint32_t len;
    if (!IsoReader_U32(r, &len)) return 0;
    if (len > max) return fail(r, "a string is longer than its limit");
    if (len > r->len - r->pos) return fail(r, "a string runs past the end of the message");
    *s = (const char *)r->p + r->pos;
    *n = len;
    r->pos += len;
    return 1;
}

int IsoReader_StrDup(IsoReader *r, char **s, size_t *n, size_t max) {
    const char *v;
    size_t len;
    if (!IsoReader_StrView(r, &v, &len, max)) return 0;
    char *c = malloc(len + 1);
    if (c == NULL) return fail(r, "out of memory decoding a string");
    memcpy(c, v, len);
    c[len] = '\0';
    *s = c;
    if (n) *n = len;
    return 1;
}

int IsoReader_Count(IsoReader *r, uint32_t *count, uint32_t max, size_t min_item) {
    if (!IsoReader_U32(r, count)) return 0;
    if (*count > max) return fail(r, "a count is over its limit");
    if (min_item && *count > (r->len - r->pos) / min_item)
        return fail(r, "a count promises more items than the message holds");
    return 1;
}

int IsoReader_Tensor(IsoReader *r, IsoTensorDesc *t) {
    uint8_t pad;
    if (!IsoReader_U8(r, &t->code) || !IsoReader_U8(r, &t->bits) ||
        !IsoReader_U8(r, &t->region) || !IsoReader_U8(r, &pad) || !IsoReader_U32(r, &t->ndims) ||
        !IsoReader_U64(r, &t->offset) || !IsoReader_U64(r, &t->nbytes))
        return 0;
    t->pad = 0;
    if (t->ndims > ISO_DIMS_MAX) return fail(r, "a tensor has more dimensions than the protocol carries");
    for (uint32_t i = 0; i < t->ndims; i++) {
        if (!IsoReader_I64(r, &t->dims[i])) return 0;
        if (t->dims[i] < 0) return fail(r, "a tensor has a negative dimension");
    }
    return 1;
}

int IsoReader_Done(IsoReader *r) {
    if (r->why) return 0;
    if (r->pos != r->len) return fail(r, "the message has bytes left over");
    return 1;
}

/* --- transport --------------------------------------------------------------- */

static int sendRaw(int sock, const IsoHeader *h, const void *payload, size_t len,
                   const int *fds, int nfds, int flags) {
    struct iovec iov[2] = {
        {.iov_base = (void *)h, .iov_len = sizeof(*h)},
        {.iov_base = (void *)payload, .iov_len = len},
    };
    union {
        char buf[CMSG_SPACE(sizeof(int) * ISO_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (nfds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
        if (n >= 0) return 0;
        if (errno != EINTR) return -1;
    }
}

int Iso_Send(int sock, uint16_t type, uint64_t id, const void *payload, size_t len,
             const int *fds, int nfds) {
    if (nfds < 0 || nfds > ISO_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    IsoHeader h = {.magic = ISO_MAGIC, .type = type, .id = id, .nfds = (uint32_t)nfds};
    if (len <= ISO_INLINE_MAX) {
        h.inline_len = (uint32_t)len;
        return sendRaw(sock, &h, payload, len, fds, nfds, 0);
    }
    /* Too large for a datagram: the whole payload goes in a sealed memfd. */
    if (nfds >= ISO_MAX_FDS || len > ISO_BULK_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    int bulk = IsoShm_CreateFrozen("redisai-bulk", payload, len);
    if (bulk < 0) return -1;
    int all[ISO_MAX_FDS];
    all[0] = bulk;
    if (nfds) memcpy(all + 1, fds, sizeof(int) * (size_t)nfds);
    h.flags = ISO_F_BULK;
    h.bulk_len = len;
    h.nfds = (uint32_t)nfds + 1;
    int rc = sendRaw(sock, &h, NULL, 0, all, nfds + 1, 0);
    int e = errno;
    close(bulk);
    errno = e;
    return rc;
}

int Iso_TrySend(int sock, uint16_t type, uint64_t id, const void *payload, size_t len) {
    if (len > ISO_INLINE_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    IsoHeader h = {.magic = ISO_MAGIC, .type = type, .id = id, .inline_len = (uint32_t)len};
    return sendRaw(sock, &h, payload, len, NULL, 0, MSG_DONTWAIT);
}

int Iso_SendError(int sock, uint64_t id, const char *text) {
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_CStr(&b, text);
    int rc = b.oom ? -1 : Iso_Send(sock, ISO_MSG_ERROR, id, b.data, b.len, NULL, 0);
    IsoBuf_Free(&b);
    return rc;
}

static int malformed(IsoMsg *m, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int malformed(IsoMsg *m, char *why, size_t whylen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    IsoMsg_Free(m);
    return -2;
}

/* Takes every descriptor that came into m->fds first, so that each one is
 * closed on any failure later (IsoMsg_Free); those past ISO_MAX_FDS are
 * closed here. 0, 1 (a control message that is not SCM_RIGHTS) or 2 (too
 * many descriptors). */
static int takeFds(struct msghdr *mh, IsoMsg *m) {
    int got = 0, bad_cmsg = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            bad_cmsg = 1;
            continue;
        }
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *p = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < k; i++) {
            if (got < ISO_MAX_FDS) {
                m->fds[got++] = p[i];
            } else {
                close(p[i]);
                bad_cmsg = 2;
            }
        }
    }
    m->nfds = got;
    return bad_cmsg;
}

/* The header of a datagram of n bytes: 1 when it describes what came, else
 * malformed()'s -2. */
static int checkHeader(IsoMsg *m, ssize_t n, char *why, size_t whylen) {
    if ((size_t)n < sizeof(IsoHeader))
        return malformed(m, why, whylen, "datagram of %zd bytes is shorter than a header", n);
    memcpy(&m->h, m->buf, sizeof(IsoHeader));
    const IsoHeader *h = &m->h;
    if (h->magic != ISO_MAGIC) return malformed(m, why, whylen, "bad magic 0x%08x", h->magic);
    if (h->type == 0 || h->type > ISO_MSG_TYPE_MAX)
        return malformed(m, why, whylen, "unknown message type %u", h->type);
    if (h->flags & ~ISO_F_BULK)
        return malformed(m, why, whylen, "unknown flags 0x%x", h->flags);
    if (h->inline_len != (size_t)n - sizeof(IsoHeader))
        return malformed(m, why, whylen, "header says %u payload bytes, datagram has %zu",
                         h->inline_len, (size_t)n - sizeof(IsoHeader));
    if (h->nfds != (uint32_t)m->nfds)
        return malformed(m, why, whylen, "header says %u descriptors, %d came", h->nfds,
                         m->nfds);
    return 1;
}

/* A bulk message's payload: the sealed memfd of its first descriptor,
 * mapped, that descriptor closed. 1, -1 with errno, or malformed()'s -2. */
static int mapBulk(IsoMsg *m, char *why, size_t whylen) {
    const IsoHeader *h = &m->h;
    if (h->inline_len != 0 || m->nfds < 1 || h->bulk_len > ISO_BULK_MAX)
        return malformed(m, why, whylen, "bad bulk message (inline %u, fds %d, bulk %llu)",
                         h->inline_len, m->nfds, (unsigned long long)h->bulk_len);
    size_t size;
    char swhy[160];
    if (!IsoShm_Check(m->fds[0], F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, (size_t)h->bulk_len, 0,
                      &size, swhy, sizeof(swhy)))
        return malformed(m, why, whylen, "bulk payload: %s", swhy);
    m->bulk_map_len = (size_t)h->bulk_len;
    m->bulk_map = IsoShm_Map(m->fds[0], m->bulk_map_len, 0);
    if (m->bulk_map == NULL) {
        int e = errno;
        IsoMsg_Free(m);
        errno = e;
        return -1;
    }
    close(m->fds[0]);
    memmove(m->fds, m->fds + 1, sizeof(int) * (ISO_MAX_FDS - 1));
    m->fds[ISO_MAX_FDS - 1] = -1;
    m->nfds--;
    m->payload = m->bulk_map;
    m->payload_len = m->bulk_map_len;
    return 1;
}

int Iso_Recv(int sock, IsoMsg *m, char *why, size_t whylen) {
    return Iso_RecvFlags(sock, m, 0, why, whylen);
}

int Iso_FromBytes(IsoMsg *m, unsigned char *buf, size_t n, char *why, size_t whylen) {
    *m = (IsoMsg){.nfds = 0, .buf = buf};
    for (int i = 0; i < ISO_MAX_FDS; i++) m->fds[i] = -1;
    int rc = checkHeader(m, (ssize_t)n, why, whylen);
    if (rc != 1) return rc;
    if (m->h.flags != 0 || m->h.bulk_len != 0)
        return malformed(m, why, whylen, "a ring message cannot be bulk");
    m->payload = m->buf + sizeof(IsoHeader);
    m->payload_len = m->h.inline_len;
    return 1;
}

int Iso_RecvFlags(int sock, IsoMsg *m, int flags, char *why, size_t whylen) {
    *m = (IsoMsg){.nfds = 0};
    for (int i = 0; i < ISO_MAX_FDS; i++) m->fds[i] = -1;
    m->buf = malloc(sizeof(IsoHeader) + ISO_INLINE_MAX);
    if (m->buf == NULL) return -1;
    struct iovec iov = {.iov_base = m->buf, .iov_len = sizeof(IsoHeader) + ISO_INLINE_MAX};
    union {
        /* Room for one more fd than allowed, so that a sender of too many
         * is seen as such rather than as a truncation. */
        char buf[CMSG_SPACE(sizeof(int) * (ISO_MAX_FDS + 1))];
        struct cmsghdr align;
    } ctl;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        int e = errno;
        IsoMsg_Free(m);
        errno = e;
        return (e == EAGAIN || e == EWOULDBLOCK) && (flags & MSG_DONTWAIT) ? -3 : -1;
    }
    int bad_cmsg = takeFds(&mh, m);
    if (n == 0 && m->nfds == 0) {
        IsoMsg_Free(m);
        return 0;
    }
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        return malformed(m, why, whylen, "datagram or its descriptors truncated");
    if (bad_cmsg == 1) return malformed(m, why, whylen, "unexpected control message");
    if (bad_cmsg == 2) return malformed(m, why, whylen, "more than %d descriptors", ISO_MAX_FDS);
    int rc = checkHeader(m, n, why, whylen);
    if (rc != 1) return rc;
    if (m->h.flags & ISO_F_BULK) return mapBulk(m, why, whylen);
    if (m->h.bulk_len != 0) return malformed(m, why, whylen, "bulk length without bulk flag");
    m->payload = m->buf + sizeof(IsoHeader);
    m->payload_len = m->h.inline_len;
    return 1;
}

void IsoMsg_Free(IsoMsg *m) {
    for (int i = 0; i < ISO_MAX_FDS; i++) {
        if (m->fds[i] >= 0) close(m->fds[i]);
        m->fds[i] = -1;
    }
    m->nfds = 0;
    if (m->bulk_map) IsoShm_Unmap(m->bulk_map, m->bulk_map_len);
    m->bulk_map = NULL;
    free(m->buf);
    m->buf = NULL;
    m->payload = NULL;
}

/*
 * iso_protocol.h - the messages between the core and a backend host
 * (docs/isolation.md, "The protocol"). Shared, unchanged, by redisai.so and
 * redisai-backend-host: core and host are built and installed together, so
 * there is no negotiation, only an exact protocol version and build id.
 *
 * Every message is one SOCK_SEQPACKET datagram, or on a data channel one
 * entry of its ring with the same bytes (iso_ring.h): an IsoHeader, then the
 * inline payload. A message flagged ISO_F_BULK carries its whole payload in
 * a sealed memfd instead (fds[0], bulk_len bytes) and has inline_len 0: the
 * decoder then reads one flat byte range either way.
 */
#ifndef REDISAI_ISO_PROTOCOL_H
#define REDISAI_ISO_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define ISO_MAGIC 0x48494152u /* "RAIH" little-endian */
#define ISO_PROTOCOL_VERSION 3
#define ISO_INLINE_MAX (64 * 1024) /* inline payload; more goes to a bulk memfd */
#define ISO_BULK_MAX (4ULL << 30)  /* a model blob may be large, not unbounded */
#define ISO_MAX_FDS 8              /* descriptors attached to one message */

/* Caps on decoded counts: every count is hostile until checked. */
#define ISO_NAME_MAX (1u << 20)
/* Tensors may have up to 65536 dims in Redis; 1024 keeps a descriptor at 8 KiB and
 * covers every framework (TF stops at 254); the core refuses more with an error. */
#define ISO_DIMS_MAX 1024
#define ISO_TENSORS_MAX 4096
#define ISO_NAMES_MAX 4096
/* Deepest reply of a CB_REDIS_REPLY tree, the outermost at depth 0: the
 * core sends an ERROR leaf in place of anything deeper. */
#define ISO_REPLY_DEPTH_MAX 32

/* Shared memory (iso_shm.h). */
#define ISO_ARENA_SIZE (16u << 20)        /* per channel and direction */
#define ISO_ARENA_TENSOR_MAX (1u << 20)   /* larger tensors go to a large region */
#define ISO_TENSOR_ALIGN 64

/* Runs in flight on one channel (docs/isolation.md, "Runs in flight"): a
 * run-queue worker may send up to ISO_PIPELINE_DEPTH model runs before the
 * first is answered; the host serves them one after another, in order. */
#define ISO_PIPELINE_DEPTH 8

/* Each arena is cut into ISO_ARENA_PARTS parts; request id k writes only
 * part k % ISO_ARENA_PARTS of each (its inputs, its answer's outputs). The
 * core picks ids so that the part of a new request is neither a run's in
 * flight nor pinned by an output it still uses in place (iso_chan.c): at
 * most ISO_ARENA_PINS_MAX parts are pinned, so that a free part is always
 * left for the next of ISO_PIPELINE_DEPTH runs in flight. */
#define ISO_ARENA_PARTS 16
#define ISO_ARENA_PINS_MAX (ISO_ARENA_PARTS - ISO_PIPELINE_DEPTH)

/* The part of an arena of `len` bytes that request `id` writes. */
static inline void Iso_ArenaPart(uint64_t id, size_t len, size_t *base, size_t *part_len) {
    size_t part = (len / ISO_ARENA_PARTS) & ~(size_t)(ISO_TENSOR_ALIGN - 1);
    *base = (size_t)(id % ISO_ARENA_PARTS) * part;
    *part_len = part;
}

/* Exit status of a host that refuses to go on (bad start, protocol error). */
#define ISO_HOST_EXIT_PROTOCOL 70

typedef enum IsoMsgType {
    ISO_MSG_HELLO = 1,
    ISO_MSG_HELLO_OK = 2,
    ISO_MSG_MODEL_CREATE = 3,
    ISO_MSG_MODEL_CREATED = 4,
    ISO_MSG_MODEL_FREE = 5,
    ISO_MSG_SCRIPT_CREATE = 6,
    ISO_MSG_SCRIPT_CREATED = 7,
    ISO_MSG_SCRIPT_FREE = 8,
    ISO_MSG_OPEN_CHANNEL = 9,
    ISO_MSG_CHANNEL_OK = 10,
    ISO_MSG_MODEL_RUN = 11,
    ISO_MSG_SCRIPT_RUN = 12,
    ISO_MSG_RUN_OK = 13,
    ISO_MSG_CB_REDIS_CALL = 14,
    ISO_MSG_CB_REDIS_REPLY = 15,
    ISO_MSG_CB_MODEL_EXECUTE = 16,
    ISO_MSG_CB_MODEL_REPLY = 17,
    ISO_MSG_INFO = 18,
    ISO_MSG_INFO_REPLY = 19,
    ISO_MSG_LOG = 20,
    ISO_MSG_DYING = 21,
    ISO_MSG_EXITING = 22,
    ISO_MSG_SHUTDOWN = 23,
    ISO_MSG_ERROR = 24,
    ISO_MSG_DOORBELL = 25, /* no payload: "look at the ring" (iso_ring.h) */
    ISO_MSG_TYPE_MAX = 25,
} IsoMsgType;

#define ISO_F_BULK 0x1u

typedef struct IsoHeader {
    uint32_t magic;
    uint16_t type;       /* IsoMsgType */
    uint16_t flags;      /* ISO_F_BULK: fds[0] is a memfd holding the bulk_len payload bytes */
    uint64_t id;         /* request id: a push's own, a pop's = the push it answers */
    uint32_t inline_len; /* payload bytes after the header in this datagram */
    uint32_t nfds;       /* SCM_RIGHTS descriptors that must come with it */
    uint64_t bulk_len;
} IsoHeader;

_Static_assert(sizeof(IsoHeader) == 32, "IsoHeader is 32 bytes on the wire");

/* A tensor on the wire (encoded field by field, followed by ndims i64
 * dims). region 0: the channel's arena of the message's direction;
 * k >= 1: the message's fds[k-1], a sealed large region. */
typedef struct IsoTensorDesc {
    uint8_t code, bits; /* RAI_DType */
    uint8_t region;
    uint8_t pad;
    uint32_t ndims;  /* at most ISO_DIMS_MAX */
    uint64_t offset; /* in the region, ISO_TENSOR_ALIGN aligned */
    uint64_t nbytes; /* STRING: n u64 offsets, then the NUL-terminated bytes */
    int64_t dims[ISO_DIMS_MAX];
} IsoTensorDesc;

/* The HELLO's configuration snapshot, indexed by RAI_ConfigKey. */
#define ISO_CONFIG_KEYS 5

const char *Iso_MsgTypeName(uint16_t type);

#endif

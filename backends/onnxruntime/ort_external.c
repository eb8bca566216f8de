/*
 * ort_external.c - a protobuf wire-format walker that visits only the
 * messages of onnx.proto that can hold a TensorProto, and checks each
 * TensorProto for external data. It allocates nothing and copies nothing.
 *
 * Soundness rests on two rules. The walker accepts every encoding protobuf's
 * parser accepts (unknown fields, groups, repeated occurrences of a singular
 * message, which protobuf merges), so nothing ORT would load can hide from
 * it. Where it gives up (bad wire data, nesting deeper than MAX_DEPTH) the
 * protobuf parser inside ORT fails too, since its recursion limit of 100 is
 * below MAX_DEPTH, so ORT never builds a session from what was not scanned.
 */
#include "onnxruntime/ort_external.h"

#include <stdint.h>

/* Messages of onnx.proto on some path from ModelProto to a TensorProto. */
typedef enum PbMessage {
    PB_MODEL,
    PB_GRAPH,
    PB_NODE,
    PB_ATTRIBUTE,
    PB_TENSOR,
    PB_SPARSE_TENSOR,
    PB_FUNCTION,
    PB_TRAINING_INFO,
    PB_NONE, /* any other message, or not a message: not entered */
} PbMessage;

/* Field numbers from onnx/onnx.proto (IR version 11). */
static const struct {
    PbMessage parent;
    uint32_t field;
    PbMessage child;
} children[] = {
    {PB_MODEL, 7, PB_GRAPH},                 /* ModelProto.graph */
    {PB_MODEL, 20, PB_TRAINING_INFO},        /* ModelProto.training_info */
    {PB_MODEL, 25, PB_FUNCTION},             /* ModelProto.functions */
    {PB_GRAPH, 1, PB_NODE},                  /* GraphProto.node */
    {PB_GRAPH, 5, PB_TENSOR},                /* GraphProto.initializer */
    {PB_GRAPH, 15, PB_SPARSE_TENSOR},        /* GraphProto.sparse_initializer */
    {PB_NODE, 5, PB_ATTRIBUTE},              /* NodeProto.attribute */
    {PB_ATTRIBUTE, 5, PB_TENSOR},            /* AttributeProto.t */
    {PB_ATTRIBUTE, 6, PB_GRAPH},             /* AttributeProto.g: If/Loop/Scan bodies */
    {PB_ATTRIBUTE, 10, PB_TENSOR},           /* AttributeProto.tensors */
    {PB_ATTRIBUTE, 11, PB_GRAPH},            /* AttributeProto.graphs */
    {PB_ATTRIBUTE, 22, PB_SPARSE_TENSOR},    /* AttributeProto.sparse_tensor */
    {PB_ATTRIBUTE, 23, PB_SPARSE_TENSOR},    /* AttributeProto.sparse_tensors */
    {PB_SPARSE_TENSOR, 1, PB_TENSOR},        /* SparseTensorProto.values */
    {PB_SPARSE_TENSOR, 2, PB_TENSOR},        /* SparseTensorProto.indices */
    {PB_FUNCTION, 7, PB_NODE},               /* FunctionProto.node */
    {PB_FUNCTION, 11, PB_ATTRIBUTE},         /* FunctionProto.attribute_proto */
    {PB_TRAINING_INFO, 1, PB_GRAPH},         /* TrainingInfoProto.initialization */
    {PB_TRAINING_INFO, 2, PB_GRAPH},         /* TrainingInfoProto.algorithm */
};

#define TENSOR_EXTERNAL_DATA 13 /* TensorProto.external_data, repeated entries */
#define TENSOR_DATA_LOCATION 14 /* TensorProto.data_location */
#define DATA_LOCATION_EXTERNAL 1

/* Nested messages and groups; protobuf itself stops at 100. */
#define MAX_DEPTH 128

enum {
    WIRE_VARINT = 0,
    WIRE_I64 = 1,
    WIRE_LEN = 2,
    WIRE_SGROUP = 3,
    WIRE_EGROUP = 4,
    WIRE_I32 = 5,
};

typedef enum ScanResult {
    SCAN_CLEAN = 0,
    SCAN_EXTERNAL = 1,
    SCAN_GIVE_UP = 2, /* malformed or too deep: ORT's parser refuses it too */
} ScanResult;

static PbMessage child_of(PbMessage parent, uint32_t field) {
    for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++) {
        if (children[i].parent == parent && children[i].field == field) {
            return children[i].child;
        }
    }
    return PB_NONE;
}

/* Protobuf accepts at most 10 bytes; bits beyond 64 are dropped. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (*p >= end) {
            return 0;
        }
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* A tag is a uint32 with a field number of at least 1. */
static int read_tag(const uint8_t **p, const uint8_t *end, uint32_t *field, int *wire) {
    uint64_t tag;
    if (!read_varint(p, end, &tag) || tag > UINT32_MAX || (tag >> 3) == 0) {
        return 0;
    }
    *field = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    return 1;
}

static ScanResult scan_fields(PbMessage kind, const uint8_t **p, const uint8_t *end,
                              uint32_t group, int depth);

/* Skips one field's payload. A group's content is skipped field by field
 * up to its end tag; a length-delimited payload is entered only when it is
 * a message on the way to a TensorProto. */
static ScanResult scan_value(PbMessage kind, uint32_t field, int wire, const uint8_t **p,
                             const uint8_t *end, int depth) {
    uint64_t v;
    switch (wire) {
    case WIRE_VARINT:
        if (!read_varint(p, end, &v)) {
            return SCAN_GIVE_UP;
        }
        /* Stricter than protobuf's "last one wins": any EXTERNAL counts. */
        if (kind == PB_TENSOR && field == TENSOR_DATA_LOCATION && v == DATA_LOCATION_EXTERNAL) {
            return SCAN_EXTERNAL;
        }
        return SCAN_CLEAN;
    case WIRE_I64:
        if (end - *p < 8) {
            return SCAN_GIVE_UP;
        }
        *p += 8;
        return SCAN_CLEAN;
    case WIRE_I32:
        if (end - *p < 4) {
            return SCAN_GIVE_UP;
        }
        *p += 4;
        return SCAN_CLEAN;
    case WIRE_LEN: {
        if (!read_varint(p, end, &v) || v > (uint64_t)(end - *p)) {
            return SCAN_GIVE_UP;
        }
        const uint8_t *body = *p;
        *p += v;
        if (kind == PB_TENSOR && field == TENSOR_EXTERNAL_DATA) {
            return SCAN_EXTERNAL;
        }
        PbMessage child = child_of(kind, field);
        if (child == PB_NONE) {
            return SCAN_CLEAN;
        }
        return scan_fields(child, &body, body + v, 0, depth + 1);
    }
    case WIRE_SGROUP:
        /* Groups are unknown fields everywhere in onnx.proto: their content
         * is never interpreted, only skipped. */
        return scan_fields(PB_NONE, p, end, field, depth + 1);
    default:
        /* An end tag outside its group, or wire types 6 and 7. */
        return SCAN_GIVE_UP;
    }
}

/* Scans a message body up to end, or a group up to its end tag when group
 * is its field number. */
static ScanResult scan_fields(PbMessage kind, const uint8_t **p, const uint8_t *end,
                              uint32_t group, int depth) {
    if (depth > MAX_DEPTH) {
        return SCAN_GIVE_UP;
    }
    while (*p < end) {
        uint32_t field;
        int wire;
        if (!read_tag(p, end, &field, &wire)) {
            return SCAN_GIVE_UP;
        }
        if (wire == WIRE_EGROUP) {
            return group && field == group ? SCAN_CLEAN : SCAN_GIVE_UP;
        }
        ScanResult r = scan_value(kind, field, wire, p, end, depth);
        if (r != SCAN_CLEAN) {
            return r;
        }
    }
    /* A group must end with its end tag before the enclosing message ends. */
    return group ? SCAN_GIVE_UP : SCAN_CLEAN;
}

int ort_has_external_data(const void *blob, size_t len) {
    const uint8_t *p = blob;
    return scan_fields(PB_MODEL, &p, p + len, 0, 0) == SCAN_EXTERNAL;
}

/*
 * tensor.c - tensor construction, dtypes and reference counting; see
 * tensor.h. Commands live in tensor_commands.c, type methods in
 * tensor_type.c.
 */
#include "core/tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------- dtypes -------------------------------- */

static const struct {
    const char *name;
    RAI_DType dt;
} dtypes[] = {
    {"FLOAT", {RAI_DTYPE_FLOAT, 32}}, {"DOUBLE", {RAI_DTYPE_FLOAT, 64}},
    {"INT8", {RAI_DTYPE_INT, 8}},     {"INT16", {RAI_DTYPE_INT, 16}},
    {"INT32", {RAI_DTYPE_INT, 32}},   {"INT64", {RAI_DTYPE_INT, 64}},
    {"UINT8", {RAI_DTYPE_UINT, 8}},   {"UINT16", {RAI_DTYPE_UINT, 16}},
    {"BOOL", {RAI_DTYPE_BOOL, 8}},    {"STRING", {RAI_DTYPE_STRING, 8}},
};

/* Case-insensitive, but the digits of INTn/UINTn must match exactly,
 * which strcasecmp gives for free. */
int DType_Parse(const char *s, size_t len, RAI_DType *out) {
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strlen(dtypes[i].name) == len && !strncasecmp(s, dtypes[i].name, len)) {
            *out = dtypes[i].dt;
            return 1;
        }
    }
    return 0;
}

const char *DType_Name(RAI_DType dt) {
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (dtypes[i].dt.code == dt.code && dtypes[i].dt.bits == dt.bits) return dtypes[i].name;
    }
    return NULL;
}

int DType_IsString(RAI_DType dt) {
    return dt.code == RAI_DTYPE_STRING;
}

int DType_IsStorable(RAI_DType dt) {
    if (DType_Name(dt) != NULL) return 1;
    int code_ok = dt.code == RAI_DTYPE_INT || dt.code == RAI_DTYPE_UINT ||
                  dt.code == RAI_DTYPE_FLOAT || dt.code == RAI_DTYPE_BFLOAT ||
                  dt.code == RAI_DTYPE_BOOL;
    int bits_ok = dt.code == RAI_DTYPE_BOOL
                      ? dt.bits == 8
                      : dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64;
    return code_ok && bits_ok;
}

void DType_InternalName(RAI_DType dt, char *buf) {
    snprintf(buf, DTYPE_INTERNAL_NAME_MAX, "_DTYPE%u_%u", (unsigned)dt.code, (unsigned)dt.bits);
}

int DType_ParseInternal(const char *s, size_t len, RAI_DType *out) {
    char buf[DTYPE_INTERNAL_NAME_MAX];
    unsigned code, bits;
    char tail;
    if (len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (sscanf(buf, "_DTYPE%u_%u%c", &code, &bits, &tail) != 2 || code > 255 || bits > 255) {
        return 0;
    }
    RAI_DType dt = {.code = (uint8_t)code, .bits = (uint8_t)bits};
    if (!DType_IsStorable(dt) || DType_IsString(dt)) return 0;
    *out = dt;
    return 1;
}

size_t DType_ElemSize(RAI_DType dt) {
    return DType_IsString(dt) ? 0 : dt.bits / 8;
}

size_t Tensor_ShapeLength(const int64_t *dims, int ndims) {
    size_t n = 1;
    for (int i = 0; i < ndims; i++) n *= (size_t)dims[i];
    return n;
}

int Tensor_CheckedLength(const int64_t *dims, int ndims, size_t *n) {
    size_t len = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0 || __builtin_mul_overflow(len, (size_t)dims[i], &len)) return 0;
    }
    *n = len;
    return 1;
}

/* ------------------------------- construction ----------------------------- */

static RAI_Tensor *newShell(RAI_DType dt, const int64_t *dims, int ndims) {
    RAI_Tensor *t = RedisModule_Calloc(1, sizeof(*t));
    t->refcount = 1;
    t->dtype = dt;
    t->ndims = ndims;
    t->dims = RedisModule_Alloc(sizeof(int64_t) * (ndims > 0 ? ndims : 1));
    if (ndims > 0) memcpy(t->dims, dims, sizeof(int64_t) * ndims);
    t->len = Tensor_ShapeLength(dims, ndims);
    return t;
}

RAI_Tensor *Tensor_New(RAI_DType dt, const int64_t *dims, int ndims, int zero) {
    RAI_Tensor *t = newShell(dt, dims, ndims);
    t->nbytes = t->len * DType_ElemSize(dt);
    size_t alloc = t->nbytes ? t->nbytes : 1;
    t->data = zero ? RedisModule_Calloc(1, alloc) : RedisModule_Alloc(alloc);
    return t;
}

RAI_Tensor *Tensor_NewEmptyStrings(const int64_t *dims, int ndims) {
    RAI_Tensor *t = newShell((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    t->nbytes = t->len;
    t->data = RedisModule_Calloc(1, t->nbytes ? t->nbytes : 1);
    t->offsets = RedisModule_Alloc(sizeof(uint64_t) * (t->len ? t->len : 1));
    for (size_t i = 0; i < t->len; i++) t->offsets[i] = i;
    return t;
}

RAI_Tensor *Tensor_NewOwned(RAI_DType dt, const int64_t *dims, int ndims, char *data,
                            size_t nbytes, uint64_t *offsets) {
    RAI_Tensor *t = newShell(dt, dims, ndims);
    t->data = data;
    t->nbytes = nbytes;
    t->offsets = offsets;
    return t;
}

RAI_Tensor *Tensor_NewHeld(RAI_DType dt, const int64_t *dims, int ndims, RedisModuleString *s,
                           uint64_t *offsets) {
    RAI_Tensor *t = newShell(dt, dims, ndims);
    RedisModule_RetainString(NULL, s);
    t->held = s;
    t->data = (char *)RedisModule_StringPtrLen(s, &t->nbytes);
    t->offsets = offsets;
    return t;
}

RAI_Tensor *Tensor_NewAdopted(RAI_DType dt, const int64_t *dims, int ndims, void *data,
                              size_t nbytes, void (*deleter)(void *), void *deleter_ctx) {
    /* A STRING tensor needs offsets, which adopted memory does not carry;
     * backends build those with tensor_create_strings. NULL leaves the
     * memory with the backend, as the ABI says for a failed adopt. */
    if (DType_IsString(dt)) return NULL;
    RAI_Tensor *t = newShell(dt, dims, ndims);
    t->data = data;
    t->nbytes = nbytes;
    t->deleter = deleter;
    t->deleter_ctx = deleter_ctx;
    return t;
}

RAI_Tensor *Tensor_NewStrings(const int64_t *dims, int ndims, const char *const *elems,
                              const size_t *lens) {
    RAI_Tensor *t = newShell((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    size_t total = 0;
    for (size_t i = 0; i < t->len; i++) total += lens[i] + 1;
    t->nbytes = total;
    t->data = RedisModule_Alloc(total ? total : 1);
    t->offsets = RedisModule_Alloc(sizeof(uint64_t) * (t->len ? t->len : 1));
    size_t off = 0;
    for (size_t i = 0; i < t->len; i++) {
        t->offsets[i] = off;
        if (lens[i]) memcpy(t->data + off, elems[i], lens[i]);
        off += lens[i];
        t->data[off++] = '\0';
    }
    return t;
}

int Tensor_StringOffsets(const char *blob, size_t nbytes, size_t n, uint64_t **offsets) {
    if (nbytes == 0 || blob[nbytes - 1] != '\0') return 0;
    size_t count = 0;
    for (size_t i = 0; i < nbytes; i++) count += blob[i] == '\0';
    if (count != n) return 0;
    uint64_t *off = RedisModule_Alloc(sizeof(uint64_t) * (n ? n : 1));
    size_t k = 0, start = 0;
    for (size_t i = 0; i < nbytes; i++) {
        if (blob[i] == '\0') {
            off[k++] = start;
            start = i + 1;
        }
    }
    *offsets = off;
    return 1;
}

RAI_Tensor *Tensor_ForKeyspace(RAI_Tensor *t) {
    if (t->deleter == NULL) return Tensor_Retain(t);
    /* The one copy of a backend's output: its framework allocated it where
     * used_memory, maxmemory and eviction cannot see it, and (a Torch view)
     * it may keep a larger block alive than its own bytes. A plain
     * allocation, not a RedisModuleString that replication could share: a
     * string's header pushes a power-of-two size into the allocator's next
     * size class (1 MiB of data would cost 1.25 MiB for as long as it is
     * stored). */
    char *data = RedisModule_Alloc(t->nbytes ? t->nbytes : 1);
    if (t->nbytes) memcpy(data, t->data, t->nbytes);
    return Tensor_NewOwned(t->dtype, t->dims, t->ndims, data, t->nbytes, NULL);
}

size_t Tensor_ForeignBytes(const RAI_Tensor *t) {
    return t->deleter ? t->nbytes : 0;
}

/* ----------------------------- reference counts --------------------------- */

RAI_Tensor *Tensor_Retain(RAI_Tensor *t) {
    __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void Tensor_Release(RAI_Tensor *t) {
    if (t == NULL) return;
    if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (t->held) {
        RedisModule_FreeString(NULL, t->held);
    } else if (t->deleter) {
        t->deleter(t->deleter_ctx);
    } else {
        RedisModule_Free(t->data);
    }
    if (t->offsets) RedisModule_Free(t->offsets);
    RedisModule_Free(t->dims);
    RedisModule_Free(t);
}

const char *Tensor_StringAt(const RAI_Tensor *t, size_t i, size_t *len) {
    const char *s = t->data + t->offsets[i];
    if (len) *len = strlen(s);
    return s;
}

/* Row size in elements along dim 0 (product of the other dims). */
static size_t rowElems(const RAI_Tensor *t) {
    return t->ndims > 0 ? Tensor_ShapeLength(t->dims + 1, t->ndims - 1) : 0;
}

RAI_Tensor *Tensor_ConcatRows(RAI_Tensor **ts, size_t n) {
    if (ts == NULL || n == 0 || ts[0] == NULL || ts[0]->ndims < 1) return NULL;
    const RAI_Tensor *first = ts[0];
    int64_t total = 0;
    size_t nbytes = 0, len = 0;
    for (size_t k = 0; k < n; k++) {
        const RAI_Tensor *t = ts[k];
        if (t == NULL || t->ndims != first->ndims || t->dtype.code != first->dtype.code ||
            t->dtype.bits != first->dtype.bits) {
            return NULL;
        }
        for (int d = 1; d < t->ndims; d++) {
            if (t->dims[d] != first->dims[d]) return NULL;
        }
        total += t->dims[0];
        nbytes += t->nbytes;
        len += t->len;
    }
    int64_t *dims = RedisModule_Alloc(sizeof(int64_t) * first->ndims);
    memcpy(dims, first->dims, sizeof(int64_t) * first->ndims);
    dims[0] = total;
    char *data = RedisModule_Alloc(nbytes ? nbytes : 1);
    uint64_t *offsets = NULL;
    if (DType_IsString(first->dtype)) {
        offsets = RedisModule_Alloc(sizeof(uint64_t) * (len ? len : 1));
    }
    size_t off = 0, elem = 0;
    for (size_t k = 0; k < n; k++) {
        const RAI_Tensor *t = ts[k];
        if (t->nbytes) memcpy(data + off, t->data, t->nbytes);
        for (size_t i = 0; offsets && i < t->len; i++) offsets[elem + i] = off + t->offsets[i];
        off += t->nbytes;
        elem += t->len;
    }
    RAI_Tensor *out = Tensor_NewOwned(first->dtype, dims, first->ndims, data, nbytes, offsets);
    RedisModule_Free(dims);
    return out;
}

RAI_Tensor *Tensor_SliceRows(RAI_Tensor *t, long long offset, long long len) {
    if (t == NULL || t->ndims < 1 || offset < 0 || len < 0 || offset > t->dims[0] ||
        len > t->dims[0] - offset) {
        return NULL;
    }
    size_t row = rowElems(t);
    size_t first = (size_t)offset * row, count = (size_t)len * row;
    size_t from, to;
    if (DType_IsString(t->dtype)) {
        from = first < t->len ? t->offsets[first] : t->nbytes;
        to = first + count < t->len ? t->offsets[first + count] : t->nbytes;
    } else {
        size_t elem = DType_ElemSize(t->dtype);
        from = first * elem;
        to = (first + count) * elem;
    }
    int64_t *dims = RedisModule_Alloc(sizeof(int64_t) * t->ndims);
    memcpy(dims, t->dims, sizeof(int64_t) * t->ndims);
    dims[0] = len;
    char *data = RedisModule_Alloc(to > from ? to - from : 1);
    if (to > from) memcpy(data, t->data + from, to - from);
    uint64_t *offsets = NULL;
    if (DType_IsString(t->dtype)) {
        offsets = RedisModule_Alloc(sizeof(uint64_t) * (count ? count : 1));
        for (size_t i = 0; i < count; i++) offsets[i] = t->offsets[first + i] - from;
    }
    RAI_Tensor *out = Tensor_NewOwned(t->dtype, dims, t->ndims, data, to - from, offsets);
    RedisModule_Free(dims);
    return out;
}

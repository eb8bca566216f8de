/*
 * host_tensor.c - tensors inside the host: what a backend's tensor members
 * of RAI_HostApi act on (host_api.c lends them), and the conversions to and
 * from the wire the channels use. Memory is libc's: it shows in the host's
 * RSS, not in Redis's used_memory.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isolation/host/host.h"

struct RAI_Tensor {
    int refcount; /* atomic */
    RAI_DType dtype;
    int ndims;
    int64_t dims[ISO_DIMS_MAX];
    size_t length; /* elements */
    size_t nbytes;
    void *data;
    void (*deleter)(void *ctx); /* adopted data */
    void *deleter_ctx;
    int owns;          /* data is malloc'd by the host */
    uint64_t *offsets; /* STRING: element i at data + offsets[i] */
    void *block;       /* STRING from the wire: one malloc'd block, offsets then bytes */
};

static int dtypeNumeric(RAI_DType d) {
    switch (d.code) {
    case RAI_DTYPE_INT:
    case RAI_DTYPE_UINT:
    case RAI_DTYPE_FLOAT:
    case RAI_DTYPE_BFLOAT:
    case RAI_DTYPE_BOOL:
        return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    default:
        return 0;
    }
}

size_t HostTensor_Elements(const int64_t *dims, int ndims, int *ok) {
    *ok = 0;
    if (ndims < 0 || ndims > ISO_DIMS_MAX) return 0;
    size_t n = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) return 0;
        if (dims[i] && n > SIZE_MAX / (size_t)dims[i]) return 0;
        n *= (size_t)dims[i];
    }
    *ok = 1;
    return n;
}

size_t HostTensor_Bytes(RAI_DType dtype, const int64_t *dims, int ndims, int *ok) {
    *ok = 0;
    if (!dtypeNumeric(dtype) || ndims < 0 || ndims > ISO_DIMS_MAX) return 0;
    size_t n = dtype.bits / 8;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) return 0;
        if (dims[i] && n > SIZE_MAX / (size_t)dims[i]) return 0;
        n *= (size_t)dims[i];
    }
    *ok = 1;
    return n;
}

static RAI_Tensor *newTensor(RAI_DType dtype, const int64_t *dims, int ndims) {
    if (ndims < 0 || ndims > ISO_DIMS_MAX) return NULL;
    RAI_Tensor *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    t->refcount = 1;
    t->dtype = dtype;
    t->ndims = ndims;
    t->length = 1;
    for (int i = 0; i < ndims; i++) {
        t->dims[i] = dims[i];
        t->length *= (size_t)(dims[i] > 0 ? dims[i] : 0);
    }
    return t;
}

RAI_Tensor *HostTensor_Create(RAI_DType dtype, const int64_t *dims, int ndims) {
    int ok;
    size_t n = HostTensor_Bytes(dtype, dims, ndims, &ok);
    if (!ok) return NULL;
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = malloc(n ? n : 1);
    if (t->data == NULL) {
        free(t);
        return NULL;
    }
    t->nbytes = n;
    t->owns = 1;
    return t;
}

RAI_Tensor *HostTensor_Adopt(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                               size_t nbytes, void (*deleter)(void *ctx), void *deleter_ctx) {
    int ok;
    size_t n = HostTensor_Bytes(dtype, dims, ndims, &ok);
    if (!ok || n != nbytes) return NULL;
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = data;
    t->nbytes = nbytes;
    t->deleter = deleter;
    t->deleter_ctx = deleter_ctx;
    return t;
}

RAI_Tensor *HostTensor_CreateStrings(const int64_t *dims, int ndims, const char *const *elems,
                                       const size_t *lens) {
    RAI_Tensor *t = newTensor((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    if (t == NULL) return NULL;
    size_t total = 0;
    for (size_t i = 0; i < t->length; i++) total += lens[i] + 1;
    t->offsets = malloc(sizeof(uint64_t) * (t->length ? t->length : 1));
    t->data = malloc(total ? total : 1);
    if (t->offsets == NULL || t->data == NULL) {
        free(t->offsets);
        free(t->data);
        free(t);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < t->length; i++) {
        t->offsets[i] = off;
        memcpy((char *)t->data + off, elems[i], lens[i]);
        ((char *)t->data)[off + lens[i]] = '\0';
        off += lens[i] + 1;
    }
    t->nbytes = total;
    t->owns = 1;
    return t;
}

RAI_Tensor *HostTensor_Copy(RAI_DType dtype, const int64_t *dims, int ndims, const void *src,
                            size_t nbytes) {
    RAI_Tensor *t = HostTensor_Create(dtype, dims, ndims);
    if (t == NULL) return NULL;
    if (t->nbytes != nbytes) {
        free(t->data);
        free(t);
        return NULL;
    }
    if (nbytes) memcpy(t->data, src, nbytes);
    return t;
}

/* The wire's STRING layout, checked on the host's own copy: n offsets,
 * the first 0, increasing, each inside the bytes; then each element's NUL
 * before the next one starts (the last one's before the end). */
static int checkWireStrings(const uint64_t *offsets, size_t n, const char *bytes, size_t len,
                            char *why, size_t whylen) {
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && offsets[0] != 0) {
            snprintf(why, whylen, "STRING element 0 starts at %llu, not 0",
                     (unsigned long long)offsets[0]);
            return 0;
        }
        if (i > 0 && offsets[i] <= offsets[i - 1]) {
            snprintf(why, whylen, "STRING offsets are not increasing at element %zu", i);
            return 0;
        }
        if (offsets[i] >= len) {
            snprintf(why, whylen, "STRING element %zu starts past the %zu bytes", i, len);
            return 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = (size_t)offsets[i], end = i + 1 < n ? (size_t)offsets[i + 1] : len;
        if (memchr(bytes + at, '\0', end - at) == NULL) {
            snprintf(why, whylen, "STRING element %zu has no NUL", i);
            return 0;
        }
    }
    return 1;
}

int HostTensor_FromWireStrings(const int64_t *dims, int ndims, const void *src, size_t nbytes,
                               RAI_Tensor **out, char *why, size_t whylen) {
    *out = NULL;
    int ok;
    size_t n = HostTensor_Elements(dims, ndims, &ok);
    if (!ok || n > SIZE_MAX / 8 || nbytes < n * 8) {
        snprintf(why, whylen, "STRING tensor of %zu bytes cannot hold its offsets", nbytes);
        return 0;
    }
    /* Copied before anything is checked: the sender may still write the
     * shared memory, the copy is the host's alone. */
    void *block = malloc(nbytes ? nbytes : 1);
    if (block == NULL) return 1;
    if (nbytes) memcpy(block, src, nbytes);
    const char *bytes = (const char *)block + n * 8;
    if (!checkWireStrings(block, n, bytes, nbytes - n * 8, why, whylen)) {
        free(block);
        return 0;
    }
    RAI_Tensor *t = newTensor((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    if (t == NULL) {
        free(block);
        return 1;
    }
    t->block = block;
    t->offsets = NULL; /* points into block: see tensorStringAt and WireParts */
    t->data = (void *)bytes;
    t->nbytes = nbytes - n * 8;
    *out = t;
    return 1;
}

static const uint64_t *stringOffsets(const RAI_Tensor *t) {
    return t->block ? (const uint64_t *)t->block : t->offsets;
}

void HostTensor_WireParts(RAI_Tensor *t, const void **p1, size_t *n1, const void **p2,
                          size_t *n2) {
    if (t->dtype.code == RAI_DTYPE_STRING) {
        /* Host offsets are u64 from 0, increasing, relative to the bytes:
         * already the wire's (little-endian, see iso_wire.c). */
        *p1 = stringOffsets(t);
        *n1 = t->length * 8;
        *p2 = t->data;
        *n2 = t->nbytes;
    } else {
        *p1 = t->data;
        *n1 = t->nbytes;
        *p2 = NULL;
        *n2 = 0;
    }
}

RAI_Tensor *HostTensor_Borrow(RAI_DType dtype, const int64_t *dims, int ndims, void *data,
                              size_t nbytes, void (*release)(void *ctx), void *ctx) {
    RAI_Tensor *t = newTensor(dtype, dims, ndims);
    if (t == NULL) return NULL;
    t->data = data;
    t->nbytes = nbytes;
    t->deleter = release;
    t->deleter_ctx = ctx;
    return t;
}

RAI_Tensor *HostTensor_Retain(RAI_Tensor *t) {
    __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void HostTensor_Release(RAI_Tensor *t) {
    if (t == NULL || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (t->deleter) t->deleter(t->deleter_ctx);
    if (t->owns) free(t->data);
    free(t->offsets);
    free(t->block);
    free(t);
}

int HostTensor_Shared(const RAI_Tensor *t) {
    return __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) > 1;
}

RAI_DType HostTensor_DType(const RAI_Tensor *t) { return t->dtype; }
int HostTensor_NDims(const RAI_Tensor *t) { return t->ndims; }
const int64_t *HostTensor_Dims(const RAI_Tensor *t) { return t->dims; }
size_t HostTensor_Length(const RAI_Tensor *t) { return t->length; }
size_t HostTensor_ByteSize(const RAI_Tensor *t) { return t->nbytes; }
void *HostTensor_Data(RAI_Tensor *t) { return t->data; }

const char *HostTensor_StringAt(const RAI_Tensor *t, size_t i, size_t *len) {
    const uint64_t *offsets = stringOffsets(t);
    if (t->dtype.code != RAI_DTYPE_STRING || offsets == NULL || i >= t->length) {
        if (len) *len = 0;
        return NULL;
    }
    const char *s = (const char *)t->data + offsets[i];
    if (len) *len = strlen(s);
    return s;
}

/*
 * ort_tensor.c - dtype mapping and tensor conversion between the core and
 * ONNX Runtime.
 *
 * Inputs: CreateTensorWithDataAsOrtValue wraps the core's buffer; ORT never
 * writes to a graph input, and the value is released when the run ends,
 * while the core's borrow still holds. STRING inputs are copied into a
 * tensor of the counting allocator (ort_allocator.h), as ORT stores
 * std::string elements.
 *
 * Outputs: ORT allocates them; the core adopts the buffer and releases the
 * OrtValue when the last reference goes, possibly on another thread and
 * after the session is gone (the value keeps its allocator alive). A
 * sequence of maps is copied into one [maps, values] tensor.
 */
#include "onnxruntime/ort_tensor.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "common/rai_dtype.h"
#include "onnxruntime/ort_allocator.h"
#include "redisai/reply_texts.h"

/* ONNX Runtime's column of rai_dtype.h: ORT has every type of the list. */
static const int ort_types[RAI_DTYPE_ID_COUNT] = {
    [RAI_DTYPE_ID_FLOAT32] = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
    [RAI_DTYPE_ID_FLOAT64] = ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE,
    [RAI_DTYPE_ID_FLOAT16] = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
    [RAI_DTYPE_ID_BFLOAT16] = ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16,
    [RAI_DTYPE_ID_INT8] = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8,
    [RAI_DTYPE_ID_INT16] = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16,
    [RAI_DTYPE_ID_INT32] = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32,
    [RAI_DTYPE_ID_INT64] = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64,
    [RAI_DTYPE_ID_UINT8] = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8,
    [RAI_DTYPE_ID_UINT16] = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16,
    [RAI_DTYPE_ID_UINT32] = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32,
    [RAI_DTYPE_ID_UINT64] = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64,
    [RAI_DTYPE_ID_BOOL] = ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL,
    [RAI_DTYPE_ID_STRING] = ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING,
};

/* ---------------------------------------------------------------------- */
/* Inputs */

static OrtValue *string_value_from_core(RAI_Tensor *t, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    size_t n = host->tensor_length(t);
    /* alloc(0) may legitimately return NULL; one slot keeps NULL meaning OOM. */
    const char **elems = host->alloc((n ? n : 1) * sizeof(*elems));
    if (!elems) {
        host->error_set(err, RAI_ERR_OOM_STRING_INPUT);
        return NULL;
    }
    /* The core's elements are NUL-terminated, which is what FillStringTensor
     * reads; it copies them. */
    for (size_t i = 0; i < n; i++) {
        size_t len;
        elems[i] = host->tensor_string_at(t, i, &len);
    }
    OrtValue *value = NULL;
    if (ort_failed(ort.api->CreateTensorAsOrtValue(ort_allocator_get(), host->tensor_dims(t),
                                                   (size_t)host->tensor_ndims(t),
                                                   ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, &value),
                   err) ||
        ort_failed(ort.api->FillStringTensor(value, elems, n), err)) {
        if (value) {
            ort.api->ReleaseValue(value);
        }
        value = NULL;
    }
    host->free(elems);
    return value;
}

OrtValue *ort_tensor_from_core(RAI_Tensor *t, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    int type;
    if (!RAI_DTypeToFramework(ort_types, host->tensor_dtype(t), &type)) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_INPUT_TYPE);
        return NULL;
    }
    if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING) {
        return string_value_from_core(t, err);
    }
    OrtValue *value = NULL;
    if (ort_failed(ort.api->CreateTensorWithDataAsOrtValue(
                       ort.cpu_memory, host->tensor_data(t), host->tensor_byte_size(t),
                       host->tensor_dims(t), (size_t)host->tensor_ndims(t),
                       (ONNXTensorElementDataType)type, &value),
                   err)) {
        return NULL;
    }
    return value;
}

/* ---------------------------------------------------------------------- */
/* Outputs */

static void ort_value_release(void *ctx) {
    ort.api->ReleaseValue(ctx);
}

static RAI_Tensor *string_tensor_to_core(OrtValue *value, const int64_t *dims, int ndims,
                                         size_t n, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    RAI_Tensor *t = NULL;
    size_t total = 0;
    char *chars = NULL;
    size_t *offsets = host->alloc((n ? n : 1) * sizeof(*offsets));
    const char **ptrs = host->alloc((n ? n : 1) * sizeof(*ptrs));
    size_t *lens = host->alloc((n ? n : 1) * sizeof(*lens));
    if (!offsets || !ptrs || !lens) {
        host->error_set(err, RAI_ERR_OOM_STRING_OUTPUT);
        goto done;
    }
    if (ort_failed(ort.api->GetStringTensorDataLength(value, &total), err)) {
        goto done;
    }
    chars = host->alloc(total ? total : 1);
    if (!chars) {
        host->error_set(err, RAI_ERR_OOM_STRING_OUTPUT);
        goto done;
    }
    if (ort_failed(ort.api->GetStringTensorContent(value, chars, total, offsets, n), err)) {
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t stop = i + 1 < n ? offsets[i + 1] : total;
        ptrs[i] = chars + offsets[i];
        /* A core element is a C string: an inner NUL would break its
         * layout, so it ends there, as TENSORGET would show it anyway. */
        lens[i] = strnlen(ptrs[i], stop - offsets[i]);
    }
    t = host->tensor_create_strings(dims, ndims, ptrs, lens);
    if (!t) {
        host->error_set(err, RAI_ERR_STRING_OUTPUT_TENSOR);
    }
done:
    host->free(chars);
    host->free(offsets);
    host->free(ptrs);
    host->free(lens);
    ort.api->ReleaseValue(value);
    return t;
}

/* ORT copies a graph output that would alias a graph input, but adopting
 * a core buffer would free it twice, so it is checked, not assumed. */
static int aliases_input(const void *data, RAI_Tensor *const *inputs, size_t ninputs) {
    const RAI_HostApi *host = ort.host;
    for (size_t i = 0; i < ninputs; i++) {
        const char *start = host->tensor_data(inputs[i]);
        size_t nbytes = host->tensor_byte_size(inputs[i]);
        if (nbytes && (const char *)data >= start && (const char *)data < start + nbytes) {
            return 1;
        }
    }
    return 0;
}

static RAI_Tensor *numeric_tensor_to_core(OrtValue *value, RAI_DType dt, const int64_t *dims,
                                          int ndims, size_t n, RAI_Tensor *const *inputs,
                                          size_t ninputs, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    void *data = NULL;
    if (ort_failed(ort.api->GetTensorMutableData(value, &data), err)) {
        ort.api->ReleaseValue(value);
        return NULL;
    }
    size_t nbytes = n * (dt.bits / 8);
    RAI_Tensor *t;
    if (nbytes && aliases_input(data, inputs, ninputs)) {
        t = host->tensor_create(dt, dims, ndims);
        if (t) {
            memcpy(host->tensor_data(t), data, nbytes);
        }
        ort.api->ReleaseValue(value);
    } else {
        t = host->tensor_adopt(dt, dims, ndims, data, nbytes, ort_value_release, value);
        if (!t) {
            /* A failed adopt leaves the memory with us. */
            ort.api->ReleaseValue(value);
        }
    }
    if (!t) {
        host->error_set(err, RAI_ERR_OUTPUT_TENSOR);
    }
    return t;
}

/* Values of one map of a sequence, as a 1-d numeric tensor. */
static OrtValue *map_values(OrtValue *seq, size_t i, RAI_Error *err) {
    const OrtApi *api = ort.api;
    OrtValue *map = NULL;
    OrtValue *values = NULL;
    enum ONNXType kind;
    if (ort_failed(api->GetValue(seq, (int)i, ort_allocator_get(), &map), err)) {
        return NULL;
    }
    if (ort_failed(api->GetValueType(map, &kind), err)) {
        goto done;
    }
    if (kind != ONNX_TYPE_MAP) {
        ort.host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        goto done;
    }
    /* A map value is the pair (keys, values), index 1 the values, in the
     * order of the keys: ORT keeps maps sorted by key. */
    if (ort_failed(api->GetValue(map, 1, ort_allocator_get(), &values), err)) {
        values = NULL;
    }
done:
    api->ReleaseValue(map);
    return values;
}

/* A sequence of maps, what ZipMap makes of a classifier's probabilities
 * (scikit-learn models converted by skl2onnx): as RedisAI 1.2, one row per
 * map holding its values, so [maps, values per map], the values' dtype. */
/* What the maps of a sequence have given so far: the tensor (made by the
 * first map, whose size and dtype every other map must have) and its shape. */
typedef struct MapRows {
    RAI_Tensor *t;
    RAI_DType dt;
    size_t rows, cols, row_bytes;
} MapRows;

/* Copies map i of seq into row i of r->t (made at i == 0). 1, or 0 after err. */
static int map_row_to_core(OrtValue *seq, size_t i, MapRows *r, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    const OrtApi *api = ort.api;
    OrtValue *values = map_values(seq, i, err);
    if (!values) {
        return 0;
    }
    OrtTensorTypeAndShapeInfo *info = NULL;
    ONNXTensorElementDataType type;
    size_t n = 0;
    void *data = NULL;
    RAI_DType row_dt;
    int ok = !ort_failed(api->GetTensorTypeAndShape(values, &info), err) &&
             !ort_failed(api->GetTensorElementType(info, &type), err) &&
             !ort_failed(api->GetTensorShapeElementCount(info, &n), err);
    if (info) {
        api->ReleaseTensorTypeAndShapeInfo(info);
    }
    if (ok && (!RAI_DTypeFromFramework(ort_types, type, &row_dt) ||
               row_dt.code == RAI_DTYPE_STRING)) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        ok = 0;
    }
    if (ok && i == 0) {
        /* The first map sets the shape; the others must agree. */
        r->dt = row_dt;
        r->cols = n;
        r->row_bytes = n * (r->dt.bits / 8);
        int64_t dims[2] = {(int64_t)r->rows, (int64_t)r->cols};
        r->t = host->tensor_create(r->dt, dims, 2);
        if (!r->t) {
            host->error_set(err, RAI_ERR_OUTPUT_TENSOR);
            ok = 0;
        }
    } else if (ok && (n != r->cols || row_dt.code != r->dt.code || row_dt.bits != r->dt.bits)) {
        host->error_set(err, "ERR maps of an output sequence differ in size or type");
        ok = 0;
    }
    if (ok && r->row_bytes) {
        ok = !ort_failed(api->GetTensorMutableData(values, &data), err);
        if (ok) {
            memcpy((char *)host->tensor_data(r->t) + i * r->row_bytes, data, r->row_bytes);
        }
    }
    api->ReleaseValue(values);
    return ok;
}

static RAI_Tensor *map_sequence_to_core(OrtValue *seq, RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    const OrtApi *api = ort.api;
    MapRows r = {.dt = {.code = RAI_DTYPE_FLOAT, .bits = 32}};
    if (ort_failed(api->GetValueCount(seq, &r.rows), err)) {
        goto done;
    }
    if (r.rows > INT_MAX) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        goto done;
    }
    for (size_t i = 0; i < r.rows; i++) {
        if (!map_row_to_core(seq, i, &r, err)) {
            goto fail;
        }
    }
    if (r.rows == 0) {
        /* No map tells the width: an empty batch gives [0, 0]. */
        int64_t dims[2] = {0, 0};
        r.t = host->tensor_create(r.dt, dims, 2);
        if (!r.t) {
            host->error_set(err, RAI_ERR_OUTPUT_TENSOR);
        }
    }
    goto done;

fail:
    if (r.t) {
        host->tensor_release(r.t);
        r.t = NULL;
    }
done:
    api->ReleaseValue(seq);
    return r.t;
}

RAI_Tensor *ort_tensor_to_core(OrtValue *value, RAI_Tensor *const *inputs, size_t ninputs,
                               RAI_Error *err) {
    const RAI_HostApi *host = ort.host;
    const OrtApi *api = ort.api;
    OrtTensorTypeAndShapeInfo *info = NULL;
    RAI_Tensor *t = NULL;
    int64_t small[8];
    int64_t *dims = small;
    size_t ndims = 0;
    size_t n = 0;
    enum ONNXType kind;
    ONNXTensorElementDataType type;
    RAI_DType dt;

    if (ort_failed(api->GetValueType(value, &kind), err)) {
        goto fail;
    }
    if (kind == ONNX_TYPE_SEQUENCE) {
        return map_sequence_to_core(value, err); /* takes ownership of value */
    }
    /* Other sequences, maps, sparse tensors and optionals have no core form. */
    if (kind != ONNX_TYPE_TENSOR) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        goto fail;
    }
    if (ort_failed(api->GetTensorTypeAndShape(value, &info), err) ||
        ort_failed(api->GetTensorElementType(info, &type), err) ||
        ort_failed(api->GetDimensionsCount(info, &ndims), err) ||
        ort_failed(api->GetTensorShapeElementCount(info, &n), err)) {
        goto fail;
    }
    if (!RAI_DTypeFromFramework(ort_types, type, &dt)) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        goto fail;
    }
    if (ndims > sizeof(small) / sizeof(small[0])) {
        dims = host->alloc(ndims * sizeof(*dims));
        if (!dims) {
            host->error_set(err, RAI_ERR_OOM_OUTPUT);
            goto fail;
        }
    }
    if (ort_failed(api->GetDimensions(info, dims, ndims), err)) {
        goto fail;
    }
    api->ReleaseTensorTypeAndShapeInfo(info);
    info = NULL;

    /* Both take ownership of value. */
    if (dt.code == RAI_DTYPE_STRING) {
        t = string_tensor_to_core(value, dims, (int)ndims, n, err);
    } else {
        t = numeric_tensor_to_core(value, dt, dims, (int)ndims, n, inputs, ninputs, err);
    }
    if (dims != small) {
        host->free(dims);
    }
    return t;

fail:
    if (info) {
        api->ReleaseTensorTypeAndShapeInfo(info);
    }
    if (dims != small) {
        host->free(dims);
    }
    api->ReleaseValue(value);
    return NULL;
}

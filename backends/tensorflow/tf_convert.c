/*
 * tf_convert.c - dtype mapping and tensor conversion between the core and
 * TensorFlow.
 *
 * Inputs: TF_NewTensor wraps the core's buffer. TF marks such buffers as
 * not owned, so kernels never forward them as scratch space for an output
 * and the user's tensor is never written to. If the buffer is not aligned
 * the way TF wants, TF_NewTensor copies it and runs our deallocator at once.
 *
 * Outputs: the core adopts TF's buffer and deletes the TF_Tensor when the
 * last reference goes, possibly on another thread (TF_DeleteTensor is
 * thread-safe).
 */
#include "tensorflow/tf_convert.h"

#include <stdint.h>
#include <string.h>

#include "common/rai_dtype.h"
#include "redisai/reply_texts.h"

static const RAI_HostApi *host;

void tf_tensor_init(const RAI_HostApi *h) {
    host = h;
}

/* TensorFlow's column of rai_dtype.h: TF has every type of the list. */
static const int tf_types[RAI_DTYPE_ID_COUNT] = {
    [RAI_DTYPE_ID_FLOAT32] = TF_FLOAT,   [RAI_DTYPE_ID_FLOAT64] = TF_DOUBLE,
    [RAI_DTYPE_ID_FLOAT16] = TF_HALF,    [RAI_DTYPE_ID_BFLOAT16] = TF_BFLOAT16,
    [RAI_DTYPE_ID_INT8] = TF_INT8,       [RAI_DTYPE_ID_INT16] = TF_INT16,
    [RAI_DTYPE_ID_INT32] = TF_INT32,     [RAI_DTYPE_ID_INT64] = TF_INT64,
    [RAI_DTYPE_ID_UINT8] = TF_UINT8,     [RAI_DTYPE_ID_UINT16] = TF_UINT16,
    [RAI_DTYPE_ID_UINT32] = TF_UINT32,   [RAI_DTYPE_ID_UINT64] = TF_UINT64,
    [RAI_DTYPE_ID_BOOL] = TF_BOOL,       [RAI_DTYPE_ID_STRING] = TF_STRING,
};

/* Runs when TF drops its last use of a core buffer: at TF_DeleteTensor of
 * the input, when an output sharing the buffer goes, or at once if
 * TF_NewTensor copied. The core's own borrow outlives the run, so the
 * reference dropped here is never the last one while the run is going. */
static void core_buffer_release(void *data, size_t len, void *arg) {
    (void)data;
    (void)len;
    host->tensor_release(arg);
}

/* Elements may have been turned into heap strings by TF, so each one is
 * deallocated, not only the array. */
static void tstring_array_free(void *data, size_t len, void *arg) {
    (void)arg;
    TF_TString *elems = data;
    size_t n = len / sizeof(TF_TString);
    for (size_t i = 0; i < n; i++) {
        TF_StringDealloc(&elems[i]);
    }
    host->free(data);
}

static TF_Tensor *string_tensor_from_core(RAI_Tensor *t, RAI_Error *err) {
    size_t n = host->tensor_length(t);
    /* alloc(0) may legitimately return NULL; one slot keeps NULL meaning OOM. */
    TF_TString *elems = host->alloc((n ? n : 1) * sizeof(TF_TString));
    if (!elems) {
        host->error_set(err, RAI_ERR_OOM_STRING_INPUT);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = host->tensor_string_at(t, i, &len);
        TF_StringInit(&elems[i]);
        TF_StringCopy(&elems[i], s, len);
    }
    TF_Tensor *tft = TF_NewTensor(TF_STRING, host->tensor_dims(t), host->tensor_ndims(t), elems,
                                  n * sizeof(TF_TString), tstring_array_free, NULL);
    if (!tft) {
        /* TF already ran tstring_array_free. */
        host->error_set(err, "ERR could not convert a STRING input tensor for TF");
        return NULL;
    }
    return tft;
}

/* TensorShape::MaxDimensions() in tensorflow/core/framework/tensor_shape.h.
 * TF_NewTensor does not return an error for more: TensorShape's CHECK
 * aborts the whole process. */
#define TF_MAX_DIMS 254

TF_Tensor *tf_tensor_from_core(RAI_Tensor *t, RAI_Error *err) {
    int tf;
    if (host->tensor_ndims(t) > TF_MAX_DIMS) {
        host->error_set(err, "ERR TF: an input tensor has more dimensions than TensorFlow "
                             "accepts (254)");
        return NULL;
    }
    if (!RAI_DTypeToFramework(tf_types, host->tensor_dtype(t), &tf)) {
        host->error_set(err, RAI_ERR_UNSUPPORTED_INPUT_TYPE);
        return NULL;
    }
    if (tf == TF_STRING) {
        return string_tensor_from_core(t, err);
    }
    RAI_Tensor *ref = host->tensor_retain(t);
    TF_Tensor *tft = TF_NewTensor((TF_DataType)tf, host->tensor_dims(t), host->tensor_ndims(t),
                                  host->tensor_data(t), host->tensor_byte_size(t),
                                  core_buffer_release, ref);
    if (!tft) {
        /* TF already ran core_buffer_release, dropping ref. */
        host->error_set(err, "ERR could not convert an input tensor for TF");
        return NULL;
    }
    return tft;
}

static void tf_tensor_delete(void *ctx) {
    TF_DeleteTensor(ctx);
}

static RAI_Tensor *string_tensor_to_core(TF_Tensor *tft, const int64_t *dims, int ndims,
                                         RAI_Error *err) {
    size_t n = (size_t)TF_TensorElementCount(tft);
    const TF_TString *elems = TF_TensorData(tft);
    const char **ptrs = host->alloc((n ? n : 1) * sizeof(*ptrs));
    size_t *lens = host->alloc((n ? n : 1) * sizeof(*lens));
    RAI_Tensor *t = NULL;
    if (!ptrs || !lens) {
        host->error_set(err, RAI_ERR_OOM_STRING_OUTPUT);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = TF_StringGetDataPointer(&elems[i]);
        lens[i] = TF_StringGetSize(&elems[i]);
    }
    t = host->tensor_create_strings(dims, ndims, ptrs, lens);
    if (!t) {
        host->error_set(err, RAI_ERR_STRING_OUTPUT_TENSOR);
    }
done:
    host->free(ptrs);
    host->free(lens);
    TF_DeleteTensor(tft);
    return t;
}

RAI_Tensor *tf_tensor_to_core(TF_Tensor *tft, RAI_Error *err) {
    RAI_DType dt;
    if (!RAI_DTypeFromFramework(tf_types, TF_TensorType(tft), &dt)) {
        TF_DeleteTensor(tft);
        host->error_set(err, RAI_ERR_UNSUPPORTED_OUTPUT_TYPE);
        return NULL;
    }

    /* TF allows up to 254 dims; models rarely pass 8. */
    int64_t small[8];
    int64_t *dims = small;
    int ndims = TF_NumDims(tft);
    if (ndims > (int)(sizeof(small) / sizeof(small[0]))) {
        dims = host->alloc((size_t)ndims * sizeof(*dims));
        if (!dims) {
            TF_DeleteTensor(tft);
            host->error_set(err, RAI_ERR_OOM_OUTPUT);
            return NULL;
        }
    }
    for (int i = 0; i < ndims; i++) {
        dims[i] = TF_Dim(tft, i);
    }

    RAI_Tensor *t;
    if (dt.code == RAI_DTYPE_STRING) {
        t = string_tensor_to_core(tft, dims, ndims, err);
    } else {
        t = host->tensor_adopt(dt, dims, ndims, TF_TensorData(tft), TF_TensorByteSize(tft),
                               tf_tensor_delete, tft);
        if (!t) {
            /* A failed adopt leaves the memory with us. */
            TF_DeleteTensor(tft);
            host->error_set(err, RAI_ERR_OUTPUT_TENSOR);
        }
    }

    if (dims != small) {
        host->free(dims);
    }
    return t;
}

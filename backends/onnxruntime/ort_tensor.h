/*
 * ort_tensor.h - moving tensors between the core and ONNX Runtime.
 * Numeric data crosses in both directions without a copy; STRING elements
 * are copied, since ORT keeps them as std::string objects.
 */
#ifndef REDISAI_ORT_TENSOR_H
#define REDISAI_ORT_TENSOR_H

#include <stddef.h>

#include "onnxruntime/ort_env.h"

/* An OrtValue for the input t. A numeric one views t's data, so it must be
 * released before the caller's borrow of t ends. Returns NULL after
 * error_set. */
OrtValue *ort_tensor_from_core(RAI_Tensor *t, RAI_Error *err);

/* A core tensor for the output value. Takes ownership of value on every
 * path: numeric data is adopted (the value is released when the core lets
 * go of the tensor), STRING elements are copied and value released.
 * inputs are the run's inputs: an output that shares an input's buffer
 * keeps that input alive. Returns NULL after error_set. */
RAI_Tensor *ort_tensor_to_core(OrtValue *value, RAI_Tensor *const *inputs, size_t ninputs,
                               RAI_Error *err);

#endif

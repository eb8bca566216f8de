/*
 * tf_convert.h - moving tensors between the core and TensorFlow's C API.
 * Numeric data crosses in both directions without a copy; STRING elements
 * are copied, since the two sides lay them out differently.
 */
#ifndef REDISAI_TF_CONVERT_H
#define REDISAI_TF_CONVERT_H

#include "redisai/backend_abi.h"
#include "tensorflow/c/c_api.h"

/* Must be called once, before any other function here. */
void tf_tensor_init(const RAI_HostApi *host);

/* A TF_Tensor viewing t's data. It holds its own reference to t, so it may
 * outlive the caller's borrow (TF can hand an input back as an output).
 * Returns NULL after error_set. */
TF_Tensor *tf_tensor_from_core(RAI_Tensor *t, RAI_Error *err);

/* A core tensor for a TF output. Takes ownership of tft on every path:
 * non-STRING data is adopted (freed with tft when the core lets go), STRING
 * elements are copied and tft deleted. Returns NULL after error_set. */
RAI_Tensor *tf_tensor_to_core(TF_Tensor *tft, RAI_Error *err);

#endif

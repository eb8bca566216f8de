/*
 * backend_kind.h - the backend kinds (TF, TFLITE, TORCH, ONNX) by name, the
 * file a kind's backend is called, and the checks of a descriptor that the
 * core's loader and the isolated backend host both make before using one.
 * Pure: no Redis call (error.c only), so the host compiles it in unchanged.
 */
#ifndef REDISAI_BACKEND_KIND_H
#define REDISAI_BACKEND_KIND_H

#include "core/error.h"
#include "redisai/backend_abi.h"

#define RAI_BACKEND_KINDS 4

/* "TF", "TFLITE", "TORCH", "ONNX", case-insensitive. */
int Backend_ParseKind(const char *s, RAI_BackendKind *kind);
const char *Backend_KindName(RAI_BackendKind kind);
/* The .so file name of a kind's backend, e.g. "redisai_torch.so". */
const char *Backend_FileName(RAI_BackendKind kind);
/* The file lazy loading looks for under BACKENDSPATH, relative to it
 * (docs/configuration.md, BACKENDSPATH): "redisai_torch/redisai_torch.so". */
const char *Backend_DefaultFile(RAI_BackendKind kind);
/* Whether a descriptor carries the 1.1 script members. */
int Backend_HasScripts(const RAI_BackendDescriptor *d);
/* What the descriptor a backend's entry returned must say: our ABI major,
 * at least 1.0's size, the kind asked for, the required members. Returns 1,
 * or 0 with a reason naming path in err. */
int Backend_CheckDescriptor(const RAI_BackendDescriptor *d, RAI_BackendKind kind,
                            const char *path, RAI_Error *err);

#endif

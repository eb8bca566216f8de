/*
 * backend_kind.c - see backend_kind.h. One copy, two programs: the core's
 * loader and the isolated backend host (module/isolation/host/).
 */
#include "core/backend_kind.h"

#include <string.h>
#include <strings.h>

static const char *kind_names[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "TF",
    [RAI_BACKEND_TFLITE] = "TFLITE",
    [RAI_BACKEND_TORCH] = "TORCH",
    [RAI_BACKEND_ONNX] = "ONNX",
};

int Backend_ParseKind(const char *s, RAI_BackendKind *kind) {
    for (int i = 0; i < RAI_BACKEND_KINDS; i++) {
        if (!strcasecmp(s, kind_names[i])) {
            *kind = (RAI_BackendKind)i;
            return 1;
        }
    }
    return 0;
}

const char *Backend_KindName(RAI_BackendKind kind) {
    return (unsigned)kind < RAI_BACKEND_KINDS ? kind_names[kind] : "unknown";
}

/* RedisAI 1.2's names: lazy loading looks for these under BACKENDSPATH. */
static const char *default_files[RAI_BACKEND_KINDS] = {
    [RAI_BACKEND_TF] = "redisai_tensorflow/redisai_tensorflow.so",
    [RAI_BACKEND_TFLITE] = "redisai_tflite/redisai_tflite.so",
    [RAI_BACKEND_TORCH] = "redisai_torch/redisai_torch.so",
    [RAI_BACKEND_ONNX] = "redisai_onnxruntime/redisai_onnxruntime.so",
};

const char *Backend_DefaultFile(RAI_BackendKind kind) {
    return (unsigned)kind < RAI_BACKEND_KINDS ? default_files[kind] : "unknown";
}

const char *Backend_FileName(RAI_BackendKind kind) {
    if ((unsigned)kind >= RAI_BACKEND_KINDS) return "unknown";
    return strrchr(default_files[kind], '/') + 1;
}

int Backend_HasScripts(const RAI_BackendDescriptor *d) {
    return d->size >= RAI_DESCRIPTOR_SIZE_1_1 && d->script_create && d->script_free &&
           d->script_run;
}

int Backend_CheckDescriptor(const RAI_BackendDescriptor *d, RAI_BackendKind kind,
                            const char *path, RAI_Error *err) {
    if (d->abi_major != RAI_ABI_MAJOR) {
        Error_SetFmt(err, "%s: backend ABI major %u does not match the core's ABI major %u", path,
                     d->abi_major, RAI_ABI_MAJOR);
        return 0;
    }
    if (d->size < RAI_DESCRIPTOR_SIZE_1_0) {
        Error_SetFmt(err, "%s: backend descriptor size %u is smaller than the %zu bytes of ABI 1.0",
                     path, d->size, (size_t)RAI_DESCRIPTOR_SIZE_1_0);
        return 0;
    }
    if ((unsigned)d->kind >= RAI_BACKEND_KINDS || d->kind != kind) {
        Error_SetFmt(err, "%s: file is a %s backend (%s), not %s", path,
                     Backend_KindName(d->kind), d->framework ? d->framework : "?",
                     Backend_KindName(kind));
        return 0;
    }
    if (!d->model_create || !d->model_free || !d->model_run || !d->framework ||
        !d->framework_version || !d->variant) {
        Error_SetFmt(err, "%s: backend descriptor lacks a required member", path);
        return 0;
    }
    return 1;
}

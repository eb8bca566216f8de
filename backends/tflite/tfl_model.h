/*
 * tfl_model.h - the TFLITE backend's model: create, run, free.
 */
#ifndef REDISAI_TFL_MODEL_H
#define REDISAI_TFL_MODEL_H

#include <stddef.h>

#include "redisai/backend_abi.h"
#include "tflite/tfl_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Process-wide state, set once by the entry before any other call. */
typedef struct TflBackend {
    const RAI_HostApi *host;
    TflEnvironment env;
    char checker[4096]; /* redisai_tflite_check beside the backend */
} TflBackend;

extern TflBackend tflb;

void *tfl_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err);
void tfl_model_free(void *model);
int tfl_model_run(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                  size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

/* Compiled instances that exist now, over all models, and their models. */
size_t tfl_instances(void);
size_t tfl_models(void);

#ifdef __cplusplus
}
#endif

#endif

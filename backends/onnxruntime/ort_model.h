/*
 * ort_model.h - the model lifecycle of the ONNX Runtime backend, as the
 * descriptor's model_create / model_free / model_run (see backend_abi.h
 * for when the core calls each).
 */
#ifndef REDISAI_ORT_MODEL_H
#define REDISAI_ORT_MODEL_H

#include "redisai/backend_abi.h"

void *ort_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err);
void ort_model_free(void *model);
int ort_model_run(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                  size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

#endif

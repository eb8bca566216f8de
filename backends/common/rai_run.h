/*
 * rai_run.h - the check a backend's model_run makes before touching its
 * arrays: the run's key counts against the model's.
 *
 * The core checks the counts before it queues a run; a backend checks again
 * because its own arrays are sized by the model's counts. Torch checks only
 * the inputs (a TorchScript model may leave its output count open).
 */
#ifndef REDISAI_RAI_RUN_H
#define REDISAI_RAI_RUN_H

#include <stddef.h>

#include "redisai/backend_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0 when the run has the model's input and output counts; otherwise -1
 * after error_set with the core's texts for the first that differs. */
int RAI_CheckRunCounts(const RAI_HostApi *host, RAI_Error *err, size_t ninputs,
                       size_t model_ninputs, size_t noutputs, size_t model_noutputs);

#ifdef __cplusplus
}
#endif

#endif /* REDISAI_RAI_RUN_H */

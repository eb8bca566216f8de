/*
 * rai_run.c - a run's key counts against the model's.
 */
#include "common/rai_run.h"

#include "redisai/reply_texts.h"

int RAI_CheckRunCounts(const RAI_HostApi *host, RAI_Error *err, size_t ninputs,
                       size_t model_ninputs, size_t noutputs, size_t model_noutputs) {
    if (ninputs != model_ninputs) {
        host->error_set(err, RAI_ERR_INPUT_KEYS);
        return -1;
    }
    if (noutputs != model_noutputs) {
        host->error_set(err, RAI_ERR_OUTPUT_KEYS);
        return -1;
    }
    return 0;
}

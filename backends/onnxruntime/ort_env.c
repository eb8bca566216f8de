/*
 * ort_env.c - the backend's process-wide state and status helpers, see
 * ort_env.h.
 */
#include "onnxruntime/ort_env.h"

#include <string.h>

OrtBackend ort;

int ort_failed(OrtStatus *status, RAI_Error *err) {
    if (!status) {
        return 0;
    }
    ort.host->error_set(err, "%s", ort.api->GetErrorMessage(status));
    ort.api->ReleaseStatus(status);
    return 1;
}

int ort_failed_limit(OrtStatus *status, RAI_Error *err, const char *prefix) {
    if (!status) {
        return 0;
    }
    /* The refusal is an exception ORT catches at a kernel or at session
     * initialization and wraps in its own words: its text is what marks it. */
    if (strstr(ort.api->GetErrorMessage(status), ORT_MEMORY_LIMIT_TEXT)) {
        ort.host->error_set(err, "%s%s", prefix, ORT_MEMORY_LIMIT_TEXT);
        ort.api->ReleaseStatus(status);
        return 1;
    }
    return ort_failed(status, err);
}

void ort_discard(OrtStatus *status) {
    if (status) {
        ort.api->ReleaseStatus(status);
    }
}

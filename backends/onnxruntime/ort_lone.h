/*
 * ort_lone.h - an ONNX model's second session, for lone heavy runs.
 *
 * ORT fixes a session's intra-op threads when it is created, and its
 * OrtRunOptions cannot change them. The engine tells each run the threads
 * it may use (RAI_RunInfo.intra_op_threads, engine/thread_policy.h): the
 * shared count of backend_threads.h under load, which the model's session
 * has, and one per physical core for a lone heavy run. For that count the
 * model gets a second session, built at the first run that asks for it
 * from the blob the core keeps (RAI_ModelSpec.blob_kept), so that only
 * models that run alone and long pay for it (a session's memory, charged to
 * BACKEND_MEMORY_LIMIT like the first, and one build on that run). Its pool
 * does not spin after a run: a lone run's pool would otherwise spin against
 * Redis's main thread while it replies. A session that cannot be built (the
 * memory limit) is not tried again: the runs stay on the shared one. Both
 * outcomes are logged once per model (NOTICE, WARNING), naming the key and
 * the thread count: INFO's backend section keeps RedisAI 1.2's fields.
 */
#ifndef REDISAI_ORT_LONE_H
#define REDISAI_ORT_LONE_H

#include <pthread.h>
#include <stddef.h>

#include "onnxruntime/ort_env.h"

typedef struct OrtLone {
    const char *blob; /* the core's, valid until model_free; NULL: never a second session */
    size_t blob_len;
    pthread_mutex_t lock;
    OrtSession *session; /* atomic: built once, under lock */
    int threads;         /* its intra-op threads, set with it */
    int failed;          /* atomic: could not be built */
    int charged;         /* blob_len charged to the counting allocator */
} OrtLone;

/* From the model's spec: a second session only for a CPU model whose blob
 * the core keeps. */
void ort_lone_init(OrtLone *l, const RAI_ModelSpec *spec);
/* The session for a run of `threads` intra-op threads (info: the run's, for
 * the log line), built now if it is the first such run; NULL: run on the
 * shared session. Any worker. */
OrtSession *ort_lone_session(OrtLone *l, int threads, const RAI_RunInfo *info);
void ort_lone_free(OrtLone *l);

#endif

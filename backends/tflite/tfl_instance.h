/*
 * tfl_instance.h - a model's interface in RedisAI 1.2's positional order,
 * and a compiled instance of it with its own buffers.
 *
 * One compiled model must never run on two threads at once (LiteRT returns
 * wrong outputs, silently), so each instance is used by one thread at a
 * time; tfl_model.c keeps a pool of them. Plain malloc here: the validator
 * (tfl_check_main.c) uses this file without the host's allocator.
 */
#ifndef REDISAI_TFL_INSTANCE_H
#define REDISAI_TFL_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "tflite/tfl_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One input or output, at its position in the model's main subgraph (the
 * interpreter's order, which RedisAI 1.2 binds keys to). */
typedef struct TflPort {
    size_t sig;       /* its index in signature 0, the order runs take buffers in */
    const char *name; /* the tensor's name, owned by the model */
    int type;         /* TFL_TYPE_* */
} TflPort;

typedef struct TflIface {
    size_t nin, nout;
    TflPort *in, *out;
} TflIface;

/* Reads model's interface. 0, or -1 with the reason in why. */
int TflIface_Read(TflModel model, TflIface *io, char *why, size_t whylen);
void TflIface_Free(TflIface *io);

typedef struct TflInstance {
    TflCompiledModel cm;
    size_t nin, nout;
    /* Indexed by signature order. */
    TflLayout *in_layout, *out_layout;
    void **in_mem, **out_mem;
    size_t *in_bytes, *out_bytes;
    TflTensorBuffer *in_buf, *out_buf;
    struct TflInstance *next; /* the pool's list */
} TflInstance;

/* Compiles model for the CPU with threads XNNPACK threads (<= 1: one), and
 * makes its buffers for the shapes the model was converted with. Never
 * resized: LiteRT 2.3.0 tells an output's shape after a resize only once a
 * run has written it, into buffers of the old size (docs/backends.md). */
TflInstance *TflInstance_Create(TflEnvironment env, TflModel model, const TflIface *io,
                                int threads, char *why, size_t whylen);
void TflInstance_Free(TflInstance *in);

/* Runs with the input memory as filled. 0, or -1 with the reason. */
int TflInstance_Run(TflInstance *in, char *why, size_t whylen);

/* Elements of a layout. */
size_t Tfl_LayoutElements(const TflLayout *l);

#ifdef __cplusplus
}
#endif

#endif

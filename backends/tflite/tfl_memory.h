/*
 * tfl_memory.h - the memory of a compiled instance's buffers: zeroed,
 * 64-byte aligned as LiteRT requires, and in the validator fenced so that
 * a model writing past a buffer is caught there, not in the server.
 */
#ifndef REDISAI_TFL_MEMORY_H
#define REDISAI_TFL_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes one tensor may have here: a 4 KB model can declare a
 * 2.4 GB input, and its store would allocate and clear that. */
#define TFL_MAX_TENSOR_BYTES ((size_t)1 << 30)

/* From now on (the validator calls it once, first): each buffer ends on an
 * inaccessible page, and the bytes between its end and the next 64-byte
 * boundary hold a known pattern. */
void Tfl_FenceBuffers(void);

void *Tfl_BufferAlloc(size_t bytes);
void Tfl_BufferFree(void *mem, size_t bytes);

/* 0 when a write went past bytes (the pattern changed); 1 otherwise, and
 * always when buffers are not fenced. */
int Tfl_BufferIntact(const void *mem, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif

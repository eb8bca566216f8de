/*
 * ort_allocator.h - the module's CPU allocator for ONNX Runtime: it counts
 * what ONNX Runtime holds through it (INFO MODULES) and enforces
 * BACKEND_MEMORY_LIMIT on that count, as RedisAI 1.2's allocator did.
 *
 * It is registered once in the environment; sessions opt in with
 * `session.use_env_allocators`, so what a session allocates on the CPU
 * (prepacked weights, the tensors of every run) comes from it. The backend
 * also passes it wherever ORT allocates for the module: the session's input
 * and output names, STRING inputs, values read out of sequences and maps.
 * Initializers of an in-memory model do not come from it (ORT keeps them
 * with its own allocator): a session is charged its blob size instead, see
 * ort_allocator_charge. ORT's arena is bypassed: each tensor is one
 * allocation, which makes the limit exact.
 *
 * Every allocation counts the bytes asked for plus 64, the room taken to
 * align the block to 64 bytes (docs/info.md); a charge counts the same way.
 */
#ifndef REDISAI_ORT_ALLOCATOR_H
#define REDISAI_ORT_ALLOCATOR_H

#include <stddef.h>

#include <onnxruntime_c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Registers the allocator in env. BACKEND_MEMORY_LIMIT (0: unlimited)
 * bounds the bytes it holds at once. Returns the failed status, or NULL. */
OrtStatus *ort_allocator_register(OrtEnv *env, const OrtMemoryInfo *cpu);

/* The allocator, for the ORT calls that take one. Valid once registered. */
OrtAllocator *ort_allocator_get(void);

/* Counts one allocation of size bytes held outside the allocator. Returns
 * 0, counting nothing, when that would pass the limit. Each charge that
 * succeeded is undone by exactly one discharge of the same size. */
int ort_allocator_charge(size_t size);
void ort_allocator_discharge(size_t size);

/* Bytes counted now, and the number of allocations plus frees so far. */
size_t ort_allocator_bytes(void);
size_t ort_allocator_accesses(void);

#ifdef __cplusplus
}
#endif

#endif

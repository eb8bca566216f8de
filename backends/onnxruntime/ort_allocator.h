/*
 * ort_allocator.h - the CPU allocator every ONNX session uses: it counts
 * what ONNX Runtime holds (INFO MODULES) and enforces BACKEND_MEMORY_LIMIT.
 *
 * It is registered once in the environment; sessions opt in with
 * `session.use_env_allocators`, so the tensors of every run come from it.
 * Initializers do not (ORT keeps them with its own allocator): a session
 * is charged its blob size instead, see ort_allocator_charge. ORT's arena
 * is bypassed: each tensor is one allocation, which makes the limit exact.
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

/* Counts size bytes held outside the allocator. Returns 0, counting
 * nothing, when that would pass the limit. */
int ort_allocator_charge(size_t size);
void ort_allocator_discharge(size_t size);

/* Bytes ORT holds now, and the number of allocations plus frees so far. */
size_t ort_allocator_bytes(void);
size_t ort_allocator_accesses(void);

#ifdef __cplusplus
}
#endif

#endif

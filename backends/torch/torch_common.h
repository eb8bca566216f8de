/*
 * torch_common.h - what the translation units of the PyTorch backend share
 * (torch_common.cpp): the host table, thread settings, error texts without
 * C++ backtraces, and tensor conversion between the core and libtorch.
 *
 * torch_backend.cpp: entry point, descriptor, TorchScript models.
 * torch_script.cpp:  TorchScript scripts and the redis / redisAI built-ins.
 * torch_archive.cpp: the checks of a model archive before libtorch reads it.
 *
 * Everything here is internal to redisai_torch.so (hidden visibility plus
 * the version script); only RAI_BackendEntry is exported. No function below
 * is called across the C ABI: the descriptor's members catch every C++
 * exception and turn it into host->error_set.
 */
#ifndef REDISAI_TORCH_COMMON_H
#define REDISAI_TORCH_COMMON_H

/* ATen's tensor and IValue and c10's device, not <torch/script.h>: the JIT's
 * headers take most of a translation unit's compile time, and only the files
 * that load or compile TorchScript need them. */
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <exception>
#include <string>
#include <vector>

#include "redisai/backend_abi.h"

namespace rai_torch {

extern const RAI_HostApi *host;

/* Set by apply_thread_config when INTRA/INTER_OP_PARALLELISM could not be
 * applied; every later create fails with it (as RedisAI 1.2 did). */
const std::string &thread_config_error();

/* Applies INTRA/INTER_OP_PARALLELISM if set and not yet applied (main
 * thread: the entry and every create call it). At a create (creating), with
 * no INTRA_OP_PARALLELISM set, applies once the default intra-op count of
 * backend_threads.h. */
void apply_thread_config(bool creating = false);

/* libtorch's message as RedisAI 1.2 replied it: e.what(), for a c10::Error
 * what_without_backtrace(), with nothing changed but a C++ backtrace taken
 * out (see without_cpp_backtrace). Newlines stay: set_error hands the text
 * to the core, which turns each CR and LF into one space, as 1.2 did. A
 * compile error is thus `expected def but found 'return' here:   File
 * "<string>", line 1 return 1 ~~~~~~ <--- HERE ` and a failure in a run
 * `The following operation failed in the TorchScript interpreter.
 * Traceback of TorchScript ... RuntimeError: <inner error> `. */
std::string error_text(const std::exception &e);
/* text less every "Exception raised from ..." line and the "frame #N: ..."
 * lines that follow it (c10's C++ backtrace); else unchanged. */
std::string without_cpp_backtrace(const std::string &text);
/* text with each CR and LF turned into a space (log lines, errbuf). */
std::string one_line(const std::string &text);

/* Records text on err (first error wins in the host). */
void set_error(RAI_Error *err, const std::string &text);

/* Turns the exception being handled into an error on err. Call only from
 * inside a catch block. */
void set_error_from_current_exception(RAI_Error *err);

/* CPU or CUDA device for a model/script spec; throws with the RedisAI
 * texts (`ERR unsupported device`, `GPU requested but Torch couldn't find
 * CUDA`). */
c10::Device device_for(RAI_DeviceKind kind, int64_t device_id);

/* An at::Tensor viewing t's data without a copy, on the CPU, copied on its
 * first write: an in-place op (`x.add_(1)`, `x[0].mul_(2)`, also in a later
 * run by a tensor a model kept) first copies the buffer, so an input key or
 * DAG slot is never written through (issue 10). Reads copy nothing. With
 * take_reference false it retains t itself; with true it takes over the
 * caller's reference (also on every error path). The storage's deleter
 * calls tensor_release, so the view may outlive the caller's borrow (an
 * output can alias an input). Throws for types libtorch cannot represent
 * (`Unsupported code 7` for STRING, as libtorch's DLPack reader says). */
at::Tensor tensor_from_core(RAI_Tensor *t, bool take_reference);

/* A new core tensor owning a contiguous CPU copy of t's data if t is not
 * already contiguous on the CPU, else t's own buffer: the core adopts a
 * heap-allocated at::Tensor and deletes it when the last reference goes.
 * float16 and bfloat16 pass through as {FLOAT,16} and {BFLOAT,16}.
 * Throws for types the DLPack pair cannot describe. */
RAI_Tensor *tensor_to_core(const at::Tensor &t);

/* Flattens a model or script result into tensors, in order.
 * A Tensor gives itself; a List gives its elements, which must all be
 * tensors; a Tuple gives its members flattened the same way. With
 * skip_non_tensor_members, Tuple members that are neither tensors nor
 * lists are skipped (models: their output count only counts Tensor
 * members); otherwise they make the result invalid. Returns false for a
 * result that is not made of tensors. */
bool flatten_tensors(const c10::IValue &v, bool skip_non_tensor_members,
                     std::vector<at::Tensor> &out);

/* Once per thread, before a run: applies libtorch's intra-op thread count
 * to this thread's OpenMP settings (at::init_num_threads). libtorch does it
 * lazily only inside at::parallel_for, while oneDNN kernels (convolutions)
 * open OpenMP regions themselves: without this, a worker thread would use
 * OpenMP's default team size whatever INTRA_OP_PARALLELISM says.
 *
 * A thread that is not one of its queue's THREADS_PER_QUEUE workers (the
 * CPU queue's helper, Redis's main thread for an inline run, an LLAPI
 * client's thread: info->worker_index) gets at most the pool threads left
 * over once every worker has its own: libgomp keeps one pool per thread
 * that starts a parallel region and, once all pools' threads outnumber the
 * cores, cuts every pool's spin-wait from 300,000 rounds to 100, so every
 * parallel region of every run then wakes its pool through a futex (the
 * CNN on 2 cores, 2 threads, in-process: p50 323-430 us a run once a second
 * thread had run it, 48-84 us before; docs/performance.md#intra-op-pools).
 * MKL's count is set too: its GEMMs open regions of their own size. */
void prepare_worker_thread(const RAI_RunInfo *info);

/* Wraps a descriptor member: runs body, and turns any C++ exception into
 * an error on err. Returns fail_value when body throws. */
template <typename Ret, typename Body>
Ret guarded(RAI_Error *err, Ret fail_value, Body &&body) noexcept {
    try {
        return body();
    } catch (...) {
        try {
            set_error_from_current_exception(err);
        } catch (...) {
            /* out of memory while formatting: nothing more can be said */
        }
        return fail_value;
    }
}

}  // namespace rai_torch

#endif

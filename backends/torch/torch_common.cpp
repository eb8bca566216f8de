/*
 * torch_common.cpp - what the PyTorch backend's models and scripts share:
 * the host table, thread settings, error texts, devices, and tensor
 * conversion between the core and libtorch (see torch_common.h).
 *
 * Inputs reach libtorch without a copy (a storage over the core's buffer
 * that holds its own reference to the core tensor, and copies the buffer
 * on its first write, so inputs are never written through); outputs reach
 * the core without a copy (the core adopts the buffer of a heap-allocated
 * at::Tensor).
 */
#include "torch/torch_common.h"

#include "common/backend_threads.h"
#include "common/rai_dtype.h"
#include "redisai/reply_texts.h"

#include <c10/core/InferenceMode.h>
#include <c10/core/CPUAllocator.h>
#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <torch/cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>

/* A thread's own OpenMP team size (libgomp's, which libtorch_cpu.so
 * needs) and MKL's (inside libtorch_cpu.so; its GEMMs open OpenMP regions
 * of that size whatever OpenMP's setting). Weak: NULL in a libtorch built
 * with another OpenMP or without MKL; the backend links neither itself, so
 * that no second copy of either can be found. */
extern "C" void omp_set_num_threads(int) __attribute__((weak));
/* mkl_service.h's mkl_set_num_threads_local is a macro for this one; the
 * lower-case symbols are MKL's Fortran entries (they take an int *). */
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));

namespace rai_torch {

const RAI_HostApi *host;

namespace {
std::string thread_config_error_text;
}

const std::string &thread_config_error() {
    return thread_config_error_text;
}

/* ---------------------------------------------------------------------- */
/* Error texts */

namespace {

constexpr std::string_view kRaisedFrom = "Exception raised from";

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

/* A line of a C++ backtrace after its "Exception raised from" line:
 * "frame #3: ..." (c10's own fetcher), or "C++ CapturedTraceback:" and
 * "#3 ..." (the one torch's Python bindings install), or blank. */
bool is_backtrace_line(std::string_view body) {
    if (body.empty() || body[0] == '\n' || starts_with(body, "frame #") ||
        starts_with(body, "C++ CapturedTraceback:")) {
        return true;
    }
    return body.size() > 1 && body[0] == '#' && body[1] >= '0' && body[1] <= '9';
}

/* Leading blanks of a backtrace line ("  frame #3: ..."). */
std::string_view skip_blanks(std::string_view s) {
    size_t b = s.find_first_not_of(" \t");
    return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

}  // namespace

std::string without_cpp_backtrace(const std::string &text) {
    if (text.find(kRaisedFrom) == std::string::npos) {
        return text; /* the common case: nothing to take out */
    }
    /* c10's backtrace is "Exception raised from <fn> at <file>:<line>
     * (most recent call first):" and then one line per frame; the
     * interpreter appends such a what() after its own message
     * when TORCH_SHOW_CPP_STACKTRACES is set. Each goes, up to the first
     * line that is not a frame; the rest is kept byte for byte. */
    std::string out;
    bool in_backtrace = false;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        size_t end = nl == std::string::npos ? text.size() : nl + 1; /* with its newline */
        std::string_view line = std::string_view(text).substr(pos, end - pos);
        pos = end;
        if (in_backtrace) {
            if (is_backtrace_line(skip_blanks(line))) {
                continue;
            }
            in_backtrace = false;
        }
        size_t raised = line.find(kRaisedFrom);
        if (raised != std::string_view::npos) {
            out.append(line.substr(0, raised));
            in_backtrace = true;
            continue;
        }
        out.append(line);
    }
    return out;
}

std::string one_line(const std::string &text) {
    std::string out = text;
    std::replace_if(out.begin(), out.end(), [](char c) { return c == '\r' || c == '\n'; }, ' ');
    return out;
}

std::string error_text(const std::exception &e) {
    auto *ce = dynamic_cast<const c10::Error *>(&e);
    return without_cpp_backtrace(ce ? ce->what_without_backtrace() : e.what());
}

void set_error(RAI_Error *err, const std::string &text) {
    host->error_set(err, "%s", text.empty() ? "ERR error in the Torch backend" : text.c_str());
}

void set_error_from_current_exception(RAI_Error *err) {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        set_error(err, "ERR out of memory in the Torch backend");
    } catch (const std::exception &e) {
        set_error(err, error_text(e));
    } catch (...) {
        set_error(err, "ERR unknown error in the Torch backend");
    }
}

namespace {

/* The pool threads a caller that is not a queue worker may still take:
 * the cores less libgomp's first thread and the workers' pools. Taken
 * once per thread and never given back (a thread's pool lives as long as
 * it), so later callers only ever get fewer. */
std::atomic<long long> spare_pool_threads{LLONG_MIN};

bool is_queue_worker(const RAI_RunInfo *info) {
    long long workers = host->config_get(RAI_CONFIG_THREADS_PER_QUEUE);
    return info && info->worker_index >= 0 && info->worker_index < (workers < 1 ? 1 : workers);
}

/* At most 1 + what is left of the spare pool threads for this thread. */
int pool_size_for_other_caller(int want) {
    long long workers = host->config_get(RAI_CONFIG_THREADS_PER_QUEUE);
    long long init = rai_usable_cores() - 1 - (workers < 1 ? 1 : workers) * (want - 1);
    long long expected = LLONG_MIN;
    spare_pool_threads.compare_exchange_strong(expected, init < 0 ? 0 : init);
    long long left = spare_pool_threads.load();
    long long take;
    do {
        take = std::min<long long>(want - 1, left);
    } while (take > 0 && !spare_pool_threads.compare_exchange_weak(left, left - take));
    return 1 + static_cast<int>(take > 0 ? take : 0);
}

}  // namespace

void prepare_worker_thread(const RAI_RunInfo *info) {
    thread_local bool prepared = false;
    if (prepared) {
        return;
    }
    prepared = true;
    at::init_num_threads();
    int threads = at::get_num_threads();
    if (threads > 1 && !is_queue_worker(info) && omp_set_num_threads) {
        /* This thread's own settings only: at::set_num_threads would also
         * change the count every later thread starts with. libtorch's lazy
         * per-thread init has run (at::get_num_threads), so it does not
         * set them back at the first parallel region. */
        threads = pool_size_for_other_caller(threads);
        omp_set_num_threads(threads);
        if (MKL_Set_Num_Threads_Local) {
            MKL_Set_Num_Threads_Local(threads);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Devices */

c10::Device device_for(RAI_DeviceKind kind, int64_t device_id) {
    switch (kind) {
    case RAI_DEVICE_CPU:
        return c10::Device(c10::kCPU);
    case RAI_DEVICE_GPU:
        if (!torch::cuda::is_available()) {
            throw std::runtime_error("GPU requested but Torch couldn't find CUDA");
        }
        if (device_id > INT8_MAX) {
            throw std::runtime_error(RAI_ERR_UNSUPPORTED_DEVICE);
        }
        return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_id < 0 ? 0 : device_id));
    }
    throw std::runtime_error(RAI_ERR_UNSUPPORTED_DEVICE);
}

/* ---------------------------------------------------------------------- */
/* Tensors */

namespace {

/* libtorch's column of rai_dtype.h. No STRING: libtorch has no such
 * tensors, and refuses one as an input below. */
constexpr std::array<int, RAI_DTYPE_ID_COUNT> torch_types = [] {
    std::array<int, RAI_DTYPE_ID_COUNT> c{};
    c.fill(RAI_DTYPE_NO_TYPE);
    c[RAI_DTYPE_ID_FLOAT32] = static_cast<int>(at::kFloat);
    c[RAI_DTYPE_ID_FLOAT64] = static_cast<int>(at::kDouble);
    c[RAI_DTYPE_ID_FLOAT16] = static_cast<int>(at::kHalf);
    c[RAI_DTYPE_ID_BFLOAT16] = static_cast<int>(at::kBFloat16);
    c[RAI_DTYPE_ID_INT8] = static_cast<int>(at::kChar);
    c[RAI_DTYPE_ID_INT16] = static_cast<int>(at::kShort);
    c[RAI_DTYPE_ID_INT32] = static_cast<int>(at::kInt);
    c[RAI_DTYPE_ID_INT64] = static_cast<int>(at::kLong);
    c[RAI_DTYPE_ID_UINT8] = static_cast<int>(at::kByte);
    c[RAI_DTYPE_ID_UINT16] = static_cast<int>(at::kUInt16);
    c[RAI_DTYPE_ID_UINT32] = static_cast<int>(at::kUInt32);
    c[RAI_DTYPE_ID_UINT64] = static_cast<int>(at::kUInt64);
    c[RAI_DTYPE_ID_BOOL] = static_cast<int>(at::kBool);
    return c;
}();

/* libtorch's own DLPack wording (ATen/DLConvertor.cpp), which is what
 * RedisAI 1.2 replied: `Unsupported kUInt bits 32`, `Unsupported code 7`. */
[[noreturn]] void unsupported_input(RAI_DType dt) {
    const char *kind = nullptr;
    switch (dt.code) {
    case RAI_DTYPE_INT: kind = "kInt"; break;
    case RAI_DTYPE_UINT: kind = "kUInt"; break;
    case RAI_DTYPE_FLOAT: kind = "kFloat"; break;
    case RAI_DTYPE_BFLOAT: kind = "kBfloat"; break;
    case RAI_DTYPE_BOOL: kind = "kDLBool"; break;
    default: break;
    }
    if (kind) {
        throw std::runtime_error(std::string("Unsupported ") + kind + " bits " +
                                 std::to_string(dt.bits));
    }
    throw std::runtime_error("Unsupported code " + std::to_string(dt.code));
}

void release_core_tensor(void *t) {
    host->tensor_release(static_cast<RAI_Tensor *>(t));
}

void delete_tensor_holder(void *p) {
    delete static_cast<at::Tensor *>(p);
}

/* The storage hook of every input (libtorch >= 2.13 runs it once, on the
 * first write access, before handing out a mutable pointer): moves the
 * storage to a private copy, and the old data pointer's deleter releases
 * the core tensor. Views share the storage, so all of them see the copy;
 * another input from the same key has its own storage and stays as it is. */
void copy_on_first_write(c10::StorageImpl *s) {
    size_t n = s->nbytes();
    c10::DataPtr copy = c10::GetCPUAllocator()->allocate(n);
    if (n > 0) {
        std::memcpy(copy.get(), s->data_ptr().get(), n); /* const access: no hook */
    }
    s->set_data_ptr_noswap(std::move(copy));
}

}  // namespace

at::Tensor tensor_from_core(RAI_Tensor *t, bool take_reference) {
    RAI_DType dt = host->tensor_dtype(t);
    int st;
    if (!RAI_DTypeToFramework(torch_types.data(), dt, &st)) {
        if (take_reference) {
            host->tensor_release(t);
        }
        unsupported_input(dt);
    }
    int ndims = host->tensor_ndims(t);
    const int64_t *dims = host->tensor_dims(t);
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) {
            if (take_reference) {
                host->tensor_release(t);
            }
            throw std::runtime_error("ERR negative dimension in an input tensor");
        }
    }
    RAI_Tensor *ref = take_reference ? t : host->tensor_retain(t);
    /* The context is owned by the TensorMaker from here on: released by
     * the storage when the last view goes (or its first write), or at once
     * if this throws. */
    at::Tensor x =
        at::for_blob(host->tensor_data(t), at::IntArrayRef(dims, static_cast<size_t>(ndims)))
            .context(ref, release_core_tensor)
            .options(at::TensorOptions().dtype(static_cast<at::ScalarType>(st)).device(c10::kCPU))
            .make_tensor();
    x.storage().unsafeGetStorageImpl()->set_materializer(copy_on_first_write);
    return x;
}

RAI_Tensor *tensor_to_core(const at::Tensor &t) {
    if (!t.defined()) {
        throw std::runtime_error("ERR undefined output tensor");
    }
    at::Tensor c = t;
    if (c.layout() != c10::kStrided) {
        c = c.to_dense();
    }
    if (!c.device().is_cpu()) {
        c = c.to(c10::kCPU);
    }
    /* is_conj and is_neg test a flag; resolve_conj and resolve_neg are
     * dispatcher calls even when there is nothing to resolve (0.07 us a
     * run on the 2x2 model, where the backend added 0.6 us in all to
     * libtorch's direct call). */
    if (c.is_conj()) {
        c = c.resolve_conj();
    }
    if (c.is_neg()) {
        c = c.resolve_neg();
    }
    c = c.contiguous(); /* itself when already contiguous */

    RAI_DType dt;
    if (!RAI_DTypeFromFramework(torch_types.data(), static_cast<int>(c.scalar_type()), &dt)) {
        throw std::runtime_error(std::string(RAI_ERR_UNSUPPORTED_OUTPUT_TYPE " ") +
                                 c10::toString(c.scalar_type()));
    }
    auto holder = std::make_unique<at::Tensor>(std::move(c));
    /* const: an output that is an unchanged input is not copied (and its
     * write hook stays armed); the core only reads the buffers it adopts. */
    void *data = const_cast<void *>(holder->const_data_ptr());
    RAI_Tensor *out = host->tensor_adopt(
        dt, holder->sizes().data(), static_cast<int>(holder->dim()), data,
        holder->nbytes(), delete_tensor_holder, holder.get());
    if (!out) {
        throw std::runtime_error(RAI_ERR_OUTPUT_TENSOR);
    }
    holder.release(); /* the core's now */
    return out;
}

bool flatten_tensors(const c10::IValue &v, bool skip_non_tensor_members,
                     std::vector<at::Tensor> &out) {
    if (v.isTensor()) {
        out.push_back(v.toTensor());
        return true;
    }
    if (v.isTensorList()) {
        for (const at::Tensor &t : v.toTensorVector()) {
            out.push_back(t);
        }
        return true;
    }
    if (v.isList()) {
        for (const c10::IValue &e : v.toListRef()) {
            if (!e.isTensor()) {
                return false;
            }
            out.push_back(e.toTensor());
        }
        return true;
    }
    if (v.isTuple()) {
        for (const c10::IValue &e : v.toTupleRef().elements()) {
            if (e.isTensor() || e.isList()) {
                if (!flatten_tensors(e, skip_non_tensor_members, out)) {
                    return false;
                }
            } else if (!skip_non_tensor_members) {
                return false;
            }
        }
        return true;
    }
    return false;
}

namespace {

int clamp_threads(long long n) {
    return n > INT_MAX ? INT_MAX : static_cast<int>(n);
}

/* INTRA_OP_PARALLELISM / INTER_OP_PARALLELISM, each applied once per
 * process, before any parallel work: at the entry, and again at every
 * model/script create until applied, since module arguments are processed
 * in order and `TORCH <path>` may come before the settings (RedisAI 1.2
 * applied them at model creation). libtorch refuses to set the inter-op
 * pool once it has started; the texts are RedisAI 1.2's. Worker threads
 * take the intra-op count over in prepare_worker_thread. */
}  // namespace

void apply_thread_config(bool creating) {
    static bool intra_done = false;
    static bool intra_default_done = false;
    static bool inter_done = false;
    long long intra = intra_done ? 0 : host->config_get(RAI_CONFIG_INTRA_OP_PARALLELISM);
    if (intra > 0) {
        intra_done = true;
        try {
            at::set_num_threads(clamp_threads(intra));
        } catch (const std::exception &e) {
            thread_config_error_text =
                "Cannot set number of intra-op threads after parallel work has started";
            host->log(RAI_LOG_WARNING, "Torch: %s", one_line(error_text(e)).c_str());
        }
    } else if (!intra_done && !intra_default_done && creating) {
        /* No INTRA_OP_PARALLELISM: the default of backend_threads.h, at the
         * first create, when THREADS_PER_QUEUE is known (libtorch's own, an
         * OpenMP thread per physical core, yields against Redis's main
         * thread). An explicit setting given later still wins. */
        intra_default_done = true;
        try {
            at::set_num_threads(clamp_threads(rai_intra_op_threads(host)));
        } catch (const std::exception &e) {
            host->log(RAI_LOG_WARNING, "Torch: default intra-op threads: %s",
                      one_line(error_text(e)).c_str());
        }
    }
    long long inter = inter_done ? 0 : host->config_get(RAI_CONFIG_INTER_OP_PARALLELISM);
    if (inter > 0) {
        inter_done = true;
        try {
            at::set_num_interop_threads(clamp_threads(inter));
        } catch (const std::exception &e) {
            if (thread_config_error_text.empty()) {
                thread_config_error_text =
                    "Cannot set number of inter-op threads after parallel work has started";
            }
            host->log(RAI_LOG_WARNING, "Torch: %s", one_line(error_text(e)).c_str());
        }
    }
}

}  // namespace rai_torch

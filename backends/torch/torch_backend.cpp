/*
 * torch_backend.cpp - the PyTorch backend: entry point, descriptor and
 * TorchScript models (scripts: torch_script.cpp; what both use:
 * torch_common.cpp).
 *
 * A model is a torch::jit::Module loaded from the blob onto its device and
 * put in eval mode. Nothing in it is mutated after model_create returns, so
 * every worker of a queue runs `forward` at once (the JIT's lazy executor
 * set-up is internally locked). Runs happen under c10::InferenceMode and
 * call forward's function directly (found once, at create).
 *
 * Inputs reach libtorch without a copy (a storage over the core's buffer
 * that holds its own reference to the core tensor, and copies the buffer
 * on its first write, so inputs are never written through); outputs reach
 * the core without a copy (the core adopts the buffer of a heap-allocated
 * at::Tensor). Every descriptor member catches all C++ exceptions.
 */
#include "common/rai_entry.h"
#include "redisai/reply_texts.h"
#include "torch/torch_archive.h"
#include "torch/torch_common.h"
#include "torch/torch_script.h"

#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>

#ifndef REDISAI_BACKEND_VARIANT
#define REDISAI_BACKEND_VARIANT "cpu"
#endif
#ifndef REDISAI_FRAMEWORK_VERSION
#define REDISAI_FRAMEWORK_VERSION ""
#endif

namespace rai_torch {

/* ---------------------------------------------------------------------- */
/* Models */

namespace {

/* The blob, read in place: torch::jit::load copies what it keeps. */
class BlobReader final : public caffe2::serialize::ReadAdapterInterface {
public:
    BlobReader(const char *data, size_t len) : data_(data), len_(len) {}
    size_t size() const override { return len_; }
    size_t read(uint64_t pos, void *buf, size_t n, const char *what) const override {
        (void)what;
        if (pos >= len_) {
            return 0;
        }
        size_t k = std::min<uint64_t>(n, len_ - pos);
        std::memcpy(buf, data_ + pos, k);
        return k;
    }

private:
    const char *data_;
    size_t len_;
};

struct TorchModel {
    torch::jit::Module module;
    c10::Device device;
    size_t ninputs;
    /* The module's forward, found once here: Module::forward looks the
     * method up by name at every call and goes through Method, which
     * inserts self before the arguments, opens a RecordFunction scope (for
     * profilers, none of which a server registers) and checks the arguments
     * against the schema: 0.3-0.4 us a run (docs/performance.md, "Torch run
     * path"), more than the rest of the backend's own work. Owned by the
     * module's compilation unit, which lives as long as module. */
    torch::jit::Function *forward;
    /* Every argument after self is declared Tensor: the schema check can
     * then never fail, since a run passes exactly ninputs tensors; any other
     * signature (int, Optional[Tensor], a default) keeps the check. */
    bool tensor_args;
};

char **host_names(const std::vector<std::string> &names) {
    char **arr = static_cast<char **>(host->calloc(names.empty() ? 1 : names.size(), sizeof(char *)));
    if (!arr) {
        throw std::bad_alloc();
    }
    for (size_t i = 0; i < names.size(); i++) {
        arr[i] = host->strdup(names[i].c_str());
    }
    return arr;
}

bool is_tensor_type(const c10::TypePtr &t) {
    return t->kind() == c10::TypeKind::TensorType;
}

/* -1: the count is not in the type (List[Tensor], Any, ...). */
long long output_count(const c10::FunctionSchema &schema) {
    const auto &returns = schema.returns();
    if (returns.size() != 1) {
        return returns.empty() ? 0 : -1;
    }
    const c10::TypePtr &type = returns[0].type();
    if (is_tensor_type(type)) {
        return 1;
    }
    if (auto tuple = type->cast<c10::TupleType>()) {
        long long n = 0;
        for (const c10::TypePtr &e : tuple->elements()) {
            if (is_tensor_type(e)) {
                n++;
            } else if (e->kind() == c10::TypeKind::ListType) {
                return -1;
            }
        }
        return n;
    }
    return -1;
}

void *torch_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err) {
    return guarded<void *>(err, nullptr, [&]() -> void * {
        if (spec->size < sizeof(*spec)) {
            throw std::runtime_error("ERR model spec too old for the Torch backend");
        }
        apply_thread_config(true);
        if (!thread_config_error().empty()) {
            throw std::runtime_error(thread_config_error());
        }
        c10::Device device = device_for(spec->device, spec->device_id);

        auto reader = std::make_shared<BlobReader>(spec->blob, spec->blob_len);
        verify_archive(spec->blob, spec->blob_len, reader);
        auto m = std::make_unique<TorchModel>(
            TorchModel{torch::jit::load(reader, device), device, 0, nullptr, true});
        m->module.eval();

        auto method = m->module.find_method("forward");
        if (!method) {
            throw std::runtime_error("ERR the TorchScript model has no forward method");
        }
        const c10::FunctionSchema &schema = method->function().getSchema();
        std::vector<std::string> inputs;
        const auto &args = schema.arguments();
        for (size_t i = 1; i < args.size(); i++) { /* 0 is self */
            inputs.push_back(args[i].name());
            /* The schema check's own fast path: exactly the unrefined Tensor. */
            m->tensor_args = m->tensor_args && args[i].type() == c10::TensorType::get();
        }
        m->forward = &method->function();
        long long nout = output_count(schema);

        m->ninputs = inputs.size();
        names->ninputs = inputs.size();
        names->inputs = host_names(inputs);
        /* nout < 0: the ABI's "unknown count", 0 outputs with an array. */
        names->noutputs = nout > 0 ? static_cast<size_t>(nout) : 0;
        names->outputs = host_names(std::vector<std::string>(names->noutputs, ""));
        return m.release();
    });
}

void torch_model_free(void *handle) {
    try {
        delete static_cast<TorchModel *>(handle);
    } catch (...) {
        host->log(RAI_LOG_WARNING, "Torch: freeing a model failed");
    }
}

int torch_model_run(void *handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                    size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    return guarded<int>(err, -1, [&]() -> int {
        auto *m = static_cast<TorchModel *>(handle);
        if (ninputs != m->ninputs) {
            set_error(err, RAI_ERR_INPUT_KEYS);
            return -1;
        }
        prepare_worker_thread(info);
        /* InferenceMode, not NoGradGuard: no version counters or view
         * tracking (NoGradGuard: +0.1 us a run on the 2x2 model, +1 us on
         * the CNN; no guard at all records the autograd graph of the
         * weights: +15 us on the CNN). */
        c10::InferenceMode guard;
        /* The interpreter's stack: self, then the inputs; forward's result
         * is left at its front. */
        std::vector<c10::IValue> stack;
        stack.reserve(ninputs + 1);
        stack.emplace_back(m->module._ivalue());
        for (size_t i = 0; i < ninputs; i++) {
            at::Tensor t = tensor_from_core(inputs[i], false);
            if (m->device != t.device()) {
                t = t.to(m->device);
            }
            stack.emplace_back(std::move(t));
        }
        c10::IValue result;
        if (m->tensor_args) {
            m->forward->run(stack);
            if (stack.empty()) { /* a TorchScript function returns one value, None at least */
                throw std::runtime_error("ERR the TorchScript model's forward returned nothing");
            }
            result = std::move(stack.front());
        } else {
            result = (*m->forward)(std::move(stack)); /* checks the arguments' types */
        }

        std::vector<at::Tensor> outs;
        if (!flatten_tensors(result, true, outs)) {
            set_error(err, "ERR Model returned non-tensor values");
            return -1;
        }
        if (outs.size() != noutputs) {
            set_error(err, RAI_ERR_OUTPUT_COUNT);
            return -1;
        }
        for (size_t i = 0; i < noutputs; i++) {
            outputs[i] = tensor_to_core(outs[i]); /* made ones: the core releases them */
        }
        return 0;
    });
}

/* ---------------------------------------------------------------------- */

constexpr char kVersionFromBuild[] = REDISAI_FRAMEWORK_VERSION;
constexpr char kVersionFromHeaders[] = C10_STRINGIZE(TORCH_VERSION_MAJOR) "." C10_STRINGIZE(
    TORCH_VERSION_MINOR) "." C10_STRINGIZE(TORCH_VERSION_PATCH);

/* The ABI and kind, read by the core from the file before dlopen. */
RAI_BACKEND_ABI_NOTE(RAI_BACKEND_TORCH);

RAI_BackendDescriptor descriptor = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_BackendDescriptor),
    .kind = RAI_BACKEND_TORCH,
    .framework = "PyTorch",
    .framework_version = kVersionFromBuild[0] ? kVersionFromBuild : kVersionFromHeaders,
    .variant = REDISAI_BACKEND_VARIANT,
    .model_create = torch_model_create,
    .model_free = torch_model_free,
    .model_run = torch_model_run,
    .script_create = script_create,
    .script_free = script_free,
    .script_run = script_run,
    .info = nullptr, /* nothing beyond framework_version to report */
};

void errbuf_set(char *errbuf, size_t errlen, const std::string &text) {
    if (errbuf && errlen) {
        std::snprintf(errbuf, errlen, "%s", text.c_str());
    }
}

}  // namespace

}  // namespace rai_torch

RAI_BACKEND_ENTRY(h, errbuf, errlen) {
    using namespace rai_torch;
    if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_1, "the Torch backend", "1.1", errbuf, errlen) != 0) {
        return nullptr;
    }
    try {
        host = h;
        apply_thread_config();
        /* What libgomp read when it was loaded with libtorch (the core sets
         * OMP_WAIT_POLICY before loading a backend, unless the user did). */
        const char *policy = std::getenv("OMP_WAIT_POLICY");
        const char *spins = std::getenv("GOMP_SPINCOUNT");
        host->log(RAI_LOG_NOTICE, "Torch: OpenMP wait policy %s, GOMP_SPINCOUNT %s",
                  policy ? policy : "unset", spins ? spins : "unset");
        return &descriptor;
    } catch (const std::exception &e) {
        errbuf_set(errbuf, errlen, "Torch backend: " + one_line(error_text(e)));
    } catch (...) {
        errbuf_set(errbuf, errlen, "Torch backend: unknown error at load");
    }
    return nullptr;
}

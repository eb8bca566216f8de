/*
 * torch_script.cpp - TorchScript scripts (AI.SCRIPTSTORE / SCRIPTEXECUTE,
 * docs/commands.md, "Scripts") and the built-ins they can call.
 *
 * A script is a torch::jit::CompilationUnit compiled from the source with a
 * resolver in which `torch` is the aten builtin module and `redis` /
 * `redisAI` are builtin modules whose operators are registered below, at
 * load time of this .so, in libtorch's JIT operator registry:
 *
 *   redis::execute(str cmd, str[] args) -> Any        host->redis_call
 *   redis::asList(Any x) -> Any[]
 *   redisAI::model_execute(str key, Tensor[] inputs, int n_outputs) -> Tensor[]
 *                                                      host->model_execute
 *
 * TorchScript matches a trailing list parameter against varargs, so
 * `redis.execute("SET", k, v)` binds k, v to `args`. The operators are
 * CONSERVATIVE for alias analysis: that marks them as having side effects,
 * so the JIT never removes an unused call nor runs one at compile time.
 *
 * The built-ins talk to Redis only from a script run on a worker thread:
 * script_run publishes its error object in a thread-local for them. A
 * built-in fails by raising its text inside the script, as RedisAI 1.2's
 * did (`Redis command returned an error: <Redis's reply>`, the model's own
 * error such as `ERR model key is empty`): the client gets the TorchScript
 * interpreter's message around it, with the script's traceback.
 */
#include "torch/script_depth.h"
#include "torch/torch_common.h"
#include "torch/torch_script.h"
#include "redisai/reply_texts.h"

#include <c10/core/InferenceMode.h>
#include <torch/script.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <memory>
#include <stdexcept>

namespace rai_torch {
namespace {

struct TorchScript {
    std::shared_ptr<torch::jit::CompilationUnit> cu;
    c10::Device device;
};

/* ---------------------------------------------------------------------- */
/* The run a built-in belongs to */

struct RunScope {
    RAI_Error *err;
};

thread_local RunScope *current_run = nullptr;

class RunScopeGuard {
public:
    explicit RunScopeGuard(RunScope *scope) : saved_(current_run) { current_run = scope; }
    ~RunScopeGuard() { current_run = saved_; }
    RunScopeGuard(const RunScopeGuard &) = delete;
    RunScopeGuard &operator=(const RunScopeGuard &) = delete;

private:
    RunScope *saved_;
};

/* Raised in the script; the interpreter wraps it (e.what() is kept). */
[[noreturn]] void builtin_fail(const std::string &text) {
    throw std::runtime_error(text);
}

RunScope &require_run(const char *builtin) {
    if (!current_run) {
        builtin_fail(std::string(builtin) +
                     " can only be called from a script run by a RedisAI worker");
    }
    return *current_run;
}

/* ---------------------------------------------------------------------- */
/* redis.execute */

c10::IValue from_reply(const RAI_CallReply *r) {
    switch (r->type) {
    case RAI_REPLY_NULL:
        return c10::IValue();
    case RAI_REPLY_STRING:
        return c10::IValue(std::string(r->str ? r->str : "", r->str ? r->len : 0));
    case RAI_REPLY_INTEGER:
        return c10::IValue(static_cast<int64_t>(r->integer));
    case RAI_REPLY_DOUBLE:
        return c10::IValue(r->dbl);
    case RAI_REPLY_ARRAY: {
        c10::impl::GenericList list(c10::AnyType::get());
        list.reserve(r->nelems);
        for (size_t i = 0; i < r->nelems; i++) {
            list.push_back(from_reply(&r->elems[i]));
        }
        return c10::IValue(std::move(list));
    }
    case RAI_REPLY_ERROR:
        builtin_fail("Redis command returned an error: " +
                     std::string(r->str ? r->str : "", r->str ? r->len : 0));
    }
    builtin_fail("Redis command returned a reply of an unknown type");
}

void op_redis_execute(torch::jit::Stack &stack) {
    c10::List<c10::IValue> args = torch::jit::pop(stack).toList();
    std::string cmd = torch::jit::pop(stack).toStringRef();
    require_run("redis.execute");
    if (!host->redis_call || !host->call_reply_free) {
        builtin_fail("redis.execute is not supported by this RedisAI core");
    }

    std::vector<std::string> owned;
    owned.reserve(args.size());
    for (const c10::IValue &a : args) {
        owned.push_back(a.toStringRef());
    }
    std::vector<const char *> ptrs;
    std::vector<size_t> lens;
    for (const std::string &s : owned) {
        ptrs.push_back(s.c_str());
        lens.push_back(s.size());
    }
    std::unique_ptr<RAI_CallReply, void (*)(RAI_CallReply *)> reply(
        host->redis_call(cmd.c_str(), ptrs.data(), lens.data(), ptrs.size()),
        host->call_reply_free);
    if (!reply) {
        builtin_fail("Redis command returned no reply");
    }
    torch::jit::push(stack, from_reply(reply.get()));
}

/* ---------------------------------------------------------------------- */
/* redis.asList */

void op_redis_as_list(torch::jit::Stack &stack) {
    c10::IValue v = torch::jit::pop(stack);
    c10::impl::GenericList list(c10::AnyType::get());
    if (v.isList()) {
        for (const c10::IValue &e : v.toListRef()) {
            list.push_back(e);
        }
    } else if (v.isTuple()) {
        for (const c10::IValue &e : v.toTupleRef().elements()) {
            list.push_back(e);
        }
    } else {
        throw std::runtime_error("redis.asList: expected a list (an array reply) but got " +
                                 v.tagKind());
    }
    torch::jit::push(stack, c10::IValue(std::move(list)));
}

/* ---------------------------------------------------------------------- */
/* redisAI.model_execute */

struct CoreTensors {
    std::vector<RAI_Tensor *> v;
    ~CoreTensors() {
        for (RAI_Tensor *t : v) {
            if (t) {
                host->tensor_release(t);
            }
        }
    }
};

void op_model_execute(torch::jit::Stack &stack) {
    int64_t n_outputs = torch::jit::pop(stack).toInt();
    c10::List<at::Tensor> tensors = torch::jit::pop(stack).toTensorList();
    std::string key = torch::jit::pop(stack).toStringRef();
    RunScope &run = require_run("redisAI.model_execute");
    if (!host->model_execute) {
        builtin_fail("redisAI.model_execute is not supported by this RedisAI core");
    }
    if (n_outputs < 0) {
        builtin_fail("redisAI.model_execute: the number of outputs must not be negative");
    }

    CoreTensors inputs;
    inputs.v.reserve(tensors.size());
    for (const at::Tensor &t : tensors) {
        inputs.v.push_back(tensor_to_core(t));
    }
    CoreTensors outputs;
    outputs.v.assign(static_cast<size_t>(n_outputs), nullptr);
    if (host->model_execute(key.data(), key.size(), inputs.v.data(), inputs.v.size(),
                            outputs.v.data(), outputs.v.size(), run.err) != 0) {
        /* The host recorded the model's error on the script's error; taken
         * back, it is raised in the script like any other. A 1.1 host
         * cannot give it back: there, that text stays the reply (the
         * first error recorded wins). */
        if (host->size < RAI_HOST_API_SIZE_1_4 || !host->error_take) {
            builtin_fail("redisAI.model_execute failed");
        }
        std::unique_ptr<char, void (*)(void *)> text(host->error_take(run.err), host->free);
        builtin_fail(text ? text.get() : "redisAI.model_execute failed");
    }
    c10::List<at::Tensor> result;
    result.reserve(outputs.v.size());
    for (RAI_Tensor *&t : outputs.v) {
        if (!t) {
            builtin_fail(RAI_ERR_OUTPUT_COUNT);
        }
        RAI_Tensor *owned = t;
        t = nullptr; /* tensor_from_core takes the reference on every path */
        result.push_back(tensor_from_core(owned, true));
    }
    torch::jit::push(stack, c10::IValue(std::move(result)));
}

/* Registered when the .so is loaded. */
const torch::jit::RegisterOperators builtins({
    torch::jit::Operator("redis::execute(str cmd, str[] args) -> Any", op_redis_execute,
                         c10::AliasAnalysisKind::CONSERVATIVE),
    torch::jit::Operator("redis::asList(Any x) -> Any[]", op_redis_as_list,
                         c10::AliasAnalysisKind::CONSERVATIVE),
    torch::jit::Operator(
        "redisAI::model_execute(str key, Tensor[] inputs, int n_outputs) -> Tensor[]",
        op_model_execute, c10::AliasAnalysisKind::CONSERVATIVE),
});

/* ---------------------------------------------------------------------- */
/* Compiling */

struct ScriptResolver final : public torch::jit::Resolver {
    std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string &name,
                                                           torch::jit::GraphFunction &m,
                                                           const torch::jit::SourceRange &loc) override {
        (void)m;
        (void)loc;
        if (name == "torch") {
            return std::make_shared<torch::jit::BuiltinModule>("aten");
        }
        if (name == "redis") {
            return std::make_shared<torch::jit::BuiltinModule>("redis");
        }
        if (name == "redisAI") {
            return std::make_shared<torch::jit::BuiltinModule>("redisAI");
        }
        /* Python's resolver knows every exception class; without it
         * `raise ValueError("...")` would not compile. The common ones: */
        static const char *const exceptions[] = {
            "Exception",    "RuntimeError", "ValueError",          "TypeError",
            "KeyError",     "IndexError",   "AssertionError",      "NotImplementedError",
            "ZeroDivisionError", "ArithmeticError", "LookupError", "OverflowError",
        };
        for (const char *e : exceptions) {
            if (name == e) {
                return std::make_shared<torch::jit::ExceptionValue>(name);
            }
        }
        return nullptr;
    }

    c10::TypePtr resolveType(const std::string &name, const torch::jit::SourceRange &loc) override {
        (void)name;
        (void)loc;
        return nullptr;
    }
};

/* Top-level functions only, by exact name (no QualifiedName parsing of
 * user text). */
torch::jit::Function *find_function(const TorchScript &s, const std::string &name) {
    for (torch::jit::Function *f : s.cu->get_functions()) {
        if (f->name() == name) {
            return f;
        }
    }
    return nullptr;
}

bool entry_point_types(const std::vector<c10::Argument> &args) {
    return *args[0].type() == *c10::ListType::ofTensors() &&
           *args[1].type() == *c10::ListType::ofStrings() &&
           *args[2].type() == *c10::ListType::ofStrings();
}

/* (tensors: List[Tensor], keys: List[str], args: List[str]) */
bool has_entry_point_signature(torch::jit::Function &f) {
    const auto &args = f.getSchema().arguments();
    return args.size() == 3 && entry_point_types(args);
}

void check_entry_point(const TorchScript &s, const std::string &ep) {
    torch::jit::Function *f = find_function(s, ep);
    if (!f) {
        throw std::runtime_error("Function " + ep + " does not exist in the given script.");
    }
    const auto &args = f->getSchema().arguments();
    if (args.size() != 3) {
        throw std::runtime_error("Wrong number of inputs in function " + ep + ". Expected 3 but was " +
                                 std::to_string(args.size()));
    }
    if (!entry_point_types(args)) {
        throw std::runtime_error("Wrong inputs type in function " + ep +
                                 ". Expected signature similar to: def " + ep +
                                 "(tensors: List[Tensor], keys: List[str], args: List[str])");
    }
}

c10::List<std::string> string_list(const char *const *items, const size_t *lens, size_t n) {
    c10::List<std::string> list;
    list.reserve(n);
    for (size_t i = 0; i < n; i++) {
        list.push_back(lens ? std::string(items[i], lens[i]) : std::string(items[i]));
    }
    return list;
}

at::Tensor input_tensor(const TorchScript &s, RAI_Tensor *t) {
    at::Tensor x = tensor_from_core(t, false);
    return x.device() == s.device ? x : x.to(s.device);
}

/* Legacy binding (docs/commands.md, "How a script function is called"):
 * Tensor parameters take one input each by
 * position, a List[Tensor] parameter takes the rest and ends the binding;
 * surplus inputs are ignored. */
torch::jit::Stack legacy_stack(const TorchScript &s, torch::jit::Function &f,
                               const RAI_ScriptCall *call) {
    const std::string &fn = call->function;
    torch::jit::Stack stack;
    size_t next = 0;
    for (const c10::Argument &arg : f.getSchema().arguments()) {
        const c10::TypePtr &type = arg.type();
        if (type->kind() == c10::TypeKind::TensorType) {
            if (next >= call->ninputs) {
                throw std::runtime_error("Wrong number of inputs provided to function: " + fn);
            }
            stack.emplace_back(input_tensor(s, call->inputs[next++]));
        } else if (*type == *c10::ListType::ofTensors()) {
            c10::List<at::Tensor> rest;
            while (next < call->ninputs) {
                rest.push_back(input_tensor(s, call->inputs[next++]));
            }
            stack.emplace_back(std::move(rest));
            break;
        } else {
            throw std::runtime_error("Unsupported input type in function definition: " + fn);
        }
    }
    return stack;
}

}  // namespace

/* ---------------------------------------------------------------------- */
/* Descriptor members */

void *script_create(const RAI_ScriptSpec *spec, RAI_Error *err) {
    return guarded<void *>(err, nullptr, [&]() -> void * {
        if (spec->size < sizeof(*spec)) {
            throw std::runtime_error("ERR script spec too old for the Torch backend");
        }
        /* First, before libtorch sees the source: its compiler recurses per
         * level of nesting on this thread (Redis's main thread in-process),
         * and a deep source would overflow the stack (script_depth.h). */
        size_t line = 0;
        if (spec->source &&
            !ScriptDepth_Within(spec->source, spec->source_len, RAI_SCRIPT_MAX_DEPTH, &line)) {
            throw std::runtime_error(
                "ERR script source nests deeper than " + std::to_string(RAI_SCRIPT_MAX_DEPTH) +
                " levels (brackets, operator chains, blocks, elifs) at line " +
                std::to_string(line));
        }
        apply_thread_config(true);
        if (!thread_config_error().empty()) {
            throw std::runtime_error(thread_config_error());
        }
        /* As AI.SCRIPTSTORE's errors are ordered (docs/commands.md): an
         * unknown device kind, then compile errors,
         * then a missing CUDA (RedisAI 1.2 compiled before checking it). */
        if (spec->device != RAI_DEVICE_CPU && spec->device != RAI_DEVICE_GPU) {
            throw std::runtime_error(RAI_ERR_UNSUPPORTED_DEVICE);
        }
        if (!spec->source) {
            throw std::runtime_error(RAI_ERR_MISSING_SOURCE);
        }
        std::string source = spec->source_len ? std::string(spec->source, spec->source_len)
                                              : std::string(spec->source);
        auto cu = std::make_shared<torch::jit::CompilationUnit>();
        cu->define(std::nullopt, source, std::make_shared<ScriptResolver>(), nullptr);
        auto s = std::make_unique<TorchScript>(
            TorchScript{std::move(cu), device_for(spec->device, spec->device_id)});
        for (size_t i = 0; i < spec->nentry_points; i++) {
            check_entry_point(*s, spec->entry_points[i]);
        }
        return s.release();
    });
}

void script_free(void *script) {
    try {
        delete static_cast<TorchScript *>(script);
    } catch (...) {
        host->log(RAI_LOG_WARNING, "Torch: freeing a script failed");
    }
}

int script_run(void *script, const RAI_RunInfo *info, const RAI_ScriptCall *call,
               RAI_Tensor **outputs, RAI_Error *err) {
    RunScope scope{err};
    try {
        auto *s = static_cast<TorchScript *>(script);
        const std::string fn = call->function ? call->function : "";
        torch::jit::Function *f = find_function(*s, fn);
        if (!f) {
            set_error(err, "Function does not exist: " + fn);
            return -1;
        }
        prepare_worker_thread(info);
        c10::InferenceMode guard;
        torch::jit::Stack stack;
        /* A function shaped as an entry point but not declared one (a
         * script made by an LLAPI client's RedisAI_ScriptCreate, which
         * declares none) is called as one too, with the keys and args the
         * call has: none outside SCRIPTEXECUTE. The legacy binding could
         * not call it. */
        if (call->entry_point || has_entry_point_signature(*f)) {
            c10::List<at::Tensor> tensors;
            tensors.reserve(call->ninputs);
            for (size_t i = 0; i < call->ninputs; i++) {
                tensors.push_back(input_tensor(*s, call->inputs[i]));
            }
            stack.emplace_back(std::move(tensors));
            stack.emplace_back(string_list(call->keys, call->key_lens, call->nkeys));
            stack.emplace_back(string_list(call->args, call->arg_lens, call->nargs));
        } else {
            stack = legacy_stack(*s, *f, call);
        }

        c10::IValue result;
        {
            RunScopeGuard in_run(&scope);
            result = (*f)(std::move(stack));
        }
        if (call->noutputs == 0) {
            return 0; /* no OUTPUTS: the result is discarded */
        }
        std::vector<at::Tensor> outs;
        if (!flatten_tensors(result, false, outs)) {
            set_error(err, "Function returned non-tensor values" + fn);
            return -1;
        }
        if (outs.size() != call->noutputs) {
            set_error(err, RAI_ERR_SCRIPT_OUTPUT_COUNT + fn);
            return -1;
        }
        for (size_t i = 0; i < outs.size(); i++) {
            outputs[i] = tensor_to_core(outs[i]); /* made ones: the core releases them */
        }
        return 0;
    } catch (...) {
        try {
            set_error_from_current_exception(err);
        } catch (...) {
        }
        return -1;
    }
}

}  // namespace rai_torch

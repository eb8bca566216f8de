/* redisai/llapi.h: RedisAI's low-level API for other Redis modules (LLAPI version 1).
 *
 * The interface of RedisAI 1.2 (docs/llapi.md): the same 76 functions (names, parameter
 * lists, return types, meanings), so a module built against 1.2's interface (RedisGears) works
 * unchanged. RedisAI exports every function at load with RedisModule_ExportSharedAPI. A client
 * module includes this header, defines REDISAI_LLAPI_CLIENT_IMPL in exactly one of its files,
 * and calls RedisAI_Initialize(ctx, &missing) once redisai.so is loaded to fetch them.
 *
 * Everything but RAI_ModelOpts is opaque: a client never looks inside. REDISAI_LLAPI_FUNCTIONS
 * is the one list of signatures; RedisAI itself (REDISAI_LLAPI_PROVIDER) checks its
 * definitions against it at compile time.
 *
 * Semantics, as in 1.2 (details beside each definition in RedisAI's module/llapi/ files):
 * - Threads. ModelRun and ScriptRun run in the calling thread (a command on the main thread,
 *   or a thread of the client's own; ONNX refuses synchronous runs, as in 1.2). ModelRunAsync,
 *   ScriptRunAsync and DAGRun queue the work on RedisAI's run queues, with the commands' runs
 *   (same workers, auto-batching, AI.INFO); the RAI_OnFinishCB runs ON THE RedisAI WORKER
 *   THREAD that finishes the run, without Redis's global lock (take it, or unblock a client,
 *   to touch Redis). Functions that read keys or may load a backend (GetModelFromKeyspace,
 *   GetScriptFromKeyspace, ModelCreate, ScriptCreate, DAGAddOpsFromString) need that lock: call
 *   them from a command or with RedisModule_ThreadSafeContextLock held. Tensors, models and
 *   scripts are reference-counted atomically: ShallowCopy and Free work from any thread.
 * - Ownership. GetModelFromKeyspace / GetScriptFromKeyspace return the key's object, borrowed
 *   (ShallowCopy it to keep it past the key's life). Run contexts and DAG ops take references
 *   to what is added to them. ModelRunCtxOutputTensor, ScriptRunCtxOutputTensor and
 *   DAGOutputTensor lend tensors owned by the context / DAG. In a ModelRunAsync /
 *   ScriptRunAsync callback, GetAsModelRunCtx / GetAsScriptRunCtx give back the client's own
 *   context with its outputs set; RedisAI frees the finish context after the callback. A
 *   DAG's finish context is the DAG itself: free it with DAGFree after the callback (DAGFree
 *   during the run defers the free to its end). An op added by DAGAddRunOp belongs to the DAG.
 * - Results. Calls taking an RAI_Error * return REDISMODULE_OK / REDISMODULE_ERR (NULL for
 *   constructors) and set the error with its RedisAI_ErrorCode; the DAG builders return
 *   REDISMODULE_OK / REDISMODULE_ERR too. As in 1.2, TensorSetData, TensorSetValueFrom*,
 *   TensorGetValueAs* and the run contexts' Add* functions return 1 on success and 0 on
 *   failure. GetError / GetErrorOneLine are NULL while no error is set. A DAG op that fails
 *   gives the DAG its code (EMODELRUN, ESCRIPTRUN); DAGRunError is 1 after a failure.
 * - AI.INFO counts runs (sync and async) of models and scripts stored at a key; objects made
 *   by ModelCreate / ScriptCreate have no key, so nothing to report them under.
 * - The LLAPI acts for no client: no ACL user is checked (the caller is trusted code in the
 *   server, as with RedisModule_Call), and scripts' redis.execute runs in DB 0.
 */
#ifndef REDISAI_LLAPI_H
#define REDISAI_LLAPI_H

#include <stddef.h>

#include "redismodule.h"

#define REDISAI_LLAPI_VERSION 1

typedef struct RAI_Tensor RAI_Tensor;
typedef struct RAI_Model RAI_Model;
typedef struct RAI_Script RAI_Script;
typedef struct RAI_ModelRunCtx RAI_ModelRunCtx;
typedef struct RAI_ScriptRunCtx RAI_ScriptRunCtx;
typedef struct RAI_DAGRunCtx RAI_DAGRunCtx;
typedef struct RAI_DAGRunOp RAI_DAGRunOp;
typedef struct RAI_Error RAI_Error;
typedef struct RAI_OnFinishCtx RAI_OnFinishCtx;

typedef void (*RAI_OnFinishCB)(RAI_OnFinishCtx *ctx, void *private_data);

/* Passed by value to RedisAI_ModelCreate: the layout is part of the interface. */
typedef struct RAI_ModelOpts {
    size_t batchsize;
    size_t minbatchsize;
    size_t minbatchtimeout;
    long long backends_intra_op_parallelism;
    long long backends_inter_op_parallelism;
} RAI_ModelOpts;

/* RedisAI_ModelCreate's `backend` argument. */
enum {
    RAI_LLAPI_BACKEND_TF = 0,
    RAI_LLAPI_BACKEND_TFLITE = 1,
    RAI_LLAPI_BACKEND_TORCH = 2,
    RAI_LLAPI_BACKEND_ONNX = 3,
};

/* Devices as 1.2 numbers them. */
enum {
    RAI_LLAPI_DEVICE_CPU = 0,
    RAI_LLAPI_DEVICE_GPU = 1,
};

typedef enum RedisAI_ErrorCode {
    RedisAI_ErrorCode_OK = 0,
    RedisAI_ErrorCode_EMODELIMPORT,
    RedisAI_ErrorCode_EMODELCONFIGURE,
    RedisAI_ErrorCode_EMODELCREATE,
    RedisAI_ErrorCode_EMODELRUN,
    RedisAI_ErrorCode_EMODELSERIALIZE,
    RedisAI_ErrorCode_EMODELFREE,
    RedisAI_ErrorCode_ESCRIPTIMPORT,
    RedisAI_ErrorCode_ESCRIPTCONFIGURE,
    RedisAI_ErrorCode_ESCRIPTCREATE,
    RedisAI_ErrorCode_ESCRIPTRUN,
    RedisAI_ErrorCode_EUNSUPPORTEDBACKEND,
    RedisAI_ErrorCode_EBACKENDNOTLOADED,
    RedisAI_ErrorCode_ESCRIPTFREE,
    RedisAI_ErrorCode_ETENSORSET,
    RedisAI_ErrorCode_ETENSORGET,
    RedisAI_ErrorCode_EDAGBUILDER,
    RedisAI_ErrorCode_EDAGRUN,
    RedisAI_ErrorCode_EFINISHCTX,
} RedisAI_ErrorCode;

/* X(return type, name, (parameters)) for every exported function. */
#define REDISAI_LLAPI_FUNCTIONS(X) \
    X(int, RedisAI_InitError, (RAI_Error **err)) \
    X(void, RedisAI_ClearError, (RAI_Error *err)) \
    X(void, RedisAI_FreeError, (RAI_Error *err)) \
    X(const char *, RedisAI_GetError, (RAI_Error *err)) \
    X(const char *, RedisAI_GetErrorOneLine, (RAI_Error *err)) \
    X(RedisAI_ErrorCode, RedisAI_GetErrorCode, (RAI_Error *err)) \
    X(void, RedisAI_CloneError, (RAI_Error *dest, const RAI_Error *src)) \
    X(RAI_Tensor *, RedisAI_TensorCreate, (const char *dataTypeStr, long long *dims, int ndims)) \
    X(RAI_Tensor *, RedisAI_TensorCreateByConcatenatingTensors, (RAI_Tensor **ts, long long n)) \
    X(RAI_Tensor *, RedisAI_TensorCreateBySlicingTensor, (RAI_Tensor *t, long long offset, long long len)) \
    X(size_t, RedisAI_TensorLength, (RAI_Tensor *t)) \
    X(size_t, RedisAI_TensorDataSize, (RAI_Tensor *t)) \
    X(size_t, RedisAI_TensorDataType, (RAI_Tensor *t)) \
    X(void, RedisAI_TensorFree, (RAI_Tensor *t)) \
    X(int, RedisAI_TensorSetData, (RAI_Tensor *tensor, const char *data, size_t len)) \
    X(int, RedisAI_TensorSetValueFromLongLong, (RAI_Tensor *tensor, long long i, long long val)) \
    X(int, RedisAI_TensorSetValueFromDouble, (RAI_Tensor *tensor, long long i, double val)) \
    X(int, RedisAI_TensorGetValueAsDouble, (RAI_Tensor *t, long long i, double *val)) \
    X(int, RedisAI_TensorGetValueAsLongLong, (RAI_Tensor *t, long long i, long long *val)) \
    X(RAI_Tensor *, RedisAI_TensorGetShallowCopy, (RAI_Tensor *t)) \
    X(int, RedisAI_TensorNumDims, (RAI_Tensor *t)) \
    X(long long, RedisAI_TensorDim, (RAI_Tensor *t, int dim)) \
    X(size_t, RedisAI_TensorByteSize, (RAI_Tensor *t)) \
    X(char *, RedisAI_TensorData, (RAI_Tensor *t)) \
    X(RedisModuleType *, RedisAI_TensorRedisType, (void)) \
    X(RAI_Model *, RedisAI_ModelCreate, (int backend, char *devicestr, char *tag, RAI_ModelOpts opts, size_t ninputs, const char **inputs, size_t noutputs, const char **outputs, const char *modeldef, size_t modellen, RAI_Error *err)) \
    X(void, RedisAI_ModelFree, (RAI_Model *model, RAI_Error *err)) \
    X(RAI_ModelRunCtx *, RedisAI_ModelRunCtxCreate, (RAI_Model *model)) \
    X(int, RedisAI_GetModelFromKeyspace, (RedisModuleCtx *ctx, RedisModuleString *keyName, RAI_Model **model, int mode, RAI_Error *err)) \
    X(int, RedisAI_ModelRunCtxAddInput, (RAI_ModelRunCtx *mctx, const char *inputName, RAI_Tensor *inputTensor)) \
    X(int, RedisAI_ModelRunCtxAddOutput, (RAI_ModelRunCtx *mctx, const char *outputName)) \
    X(size_t, RedisAI_ModelRunCtxNumOutputs, (RAI_ModelRunCtx *mctx)) \
    X(RAI_Tensor *, RedisAI_ModelRunCtxOutputTensor, (RAI_ModelRunCtx *mctx, size_t index)) \
    X(void, RedisAI_ModelRunCtxFree, (RAI_ModelRunCtx *mctx)) \
    X(int, RedisAI_ModelRun, (RAI_ModelRunCtx **mctx, long long n, RAI_Error *err)) \
    X(RAI_Model *, RedisAI_ModelGetShallowCopy, (RAI_Model *model)) \
    X(int, RedisAI_ModelSerialize, (RAI_Model *model, char **buffer, size_t *len, RAI_Error *err)) \
    X(RedisModuleType *, RedisAI_ModelRedisType, (void)) \
    X(int, RedisAI_ModelRunAsync, (RAI_ModelRunCtx *mctxs, RAI_OnFinishCB DAGAsyncFinish, void *private_data)) \
    X(RAI_ModelRunCtx *, RedisAI_GetAsModelRunCtx, (RAI_OnFinishCtx *ctx, RAI_Error *err)) \
    X(RAI_Script *, RedisAI_ScriptCreate, (char *devicestr, char *tag, const char *scriptdef, RAI_Error *err)) \
    X(int, RedisAI_GetScriptFromKeyspace, (RedisModuleCtx *ctx, RedisModuleString *keyName, RAI_Script **script, int mode, RAI_Error *err)) \
    X(void, RedisAI_ScriptFree, (RAI_Script *script, RAI_Error *err)) \
    X(RAI_ScriptRunCtx *, RedisAI_ScriptRunCtxCreate, (RAI_Script *script, const char *fnname)) \
    X(int, RedisAI_ScriptRunCtxAddInput, (RAI_ScriptRunCtx *sctx, RAI_Tensor *inputTensor, RAI_Error *err)) \
    X(int, RedisAI_ScriptRunCtxAddInputList, (RAI_ScriptRunCtx *sctx, RAI_Tensor **inputTensors, size_t len, RAI_Error *err)) \
    X(int, RedisAI_ScriptRunCtxAddTensorInput, (RAI_ScriptRunCtx *sctx, RAI_Tensor *inputTensor)) \
    X(int, RedisAI_ScriptRunCtxAddTensorInputList, (RAI_ScriptRunCtx *sctx, RAI_Tensor **inputTensors, size_t count)) \
    X(int, RedisAI_ScriptRunCtxAddOutput, (RAI_ScriptRunCtx *sctx)) \
    X(size_t, RedisAI_ScriptRunCtxNumOutputs, (RAI_ScriptRunCtx *sctx)) \
    X(RAI_Tensor *, RedisAI_ScriptRunCtxOutputTensor, (RAI_ScriptRunCtx *sctx, size_t index)) \
    X(void, RedisAI_ScriptRunCtxFree, (RAI_ScriptRunCtx *sctx)) \
    X(int, RedisAI_ScriptRun, (RAI_ScriptRunCtx *sctx, RAI_Error *err)) \
    X(RAI_Script *, RedisAI_ScriptGetShallowCopy, (RAI_Script *script)) \
    X(RedisModuleType *, RedisAI_ScriptRedisType, (void)) \
    X(int, RedisAI_ScriptRunAsync, (RAI_ScriptRunCtx *sctx, RAI_OnFinishCB DAGAsyncFinish, void *private_data)) \
    X(RAI_ScriptRunCtx *, RedisAI_GetAsScriptRunCtx, (RAI_OnFinishCtx *ctx, RAI_Error *err)) \
    X(RAI_DAGRunCtx *, RedisAI_DAGRunCtxCreate, (void)) \
    X(RAI_DAGRunOp *, RedisAI_DAGCreateModelRunOp, (RAI_Model *model)) \
    X(RAI_DAGRunOp *, RedisAI_DAGCreateScriptRunOp, (RAI_Script *script, const char *func_name)) \
    X(int, RedisAI_DAGRunOpAddInput, (RAI_DAGRunOp *DAGOp, const char *input)) \
    X(int, RedisAI_DAGRunOpAddOutput, (RAI_DAGRunOp *DAGOp, const char *output)) \
    X(int, RedisAI_DAGAddRunOp, (RAI_DAGRunCtx *run_info, RAI_DAGRunOp *DAGop, RAI_Error *err)) \
    X(int, RedisAI_DAGLoadTensor, (RAI_DAGRunCtx *run_info, const char *t_name, RAI_Tensor *tensor)) \
    X(int, RedisAI_DAGAddTensorSet, (RAI_DAGRunCtx *run_info, const char *t_name, RAI_Tensor *tensor)) \
    X(int, RedisAI_DAGAddTensorGet, (RAI_DAGRunCtx *run_info, const char *t_name)) \
    X(int, RedisAI_DAGAddOpsFromString, (RAI_DAGRunCtx *run_info, const char *dag, RAI_Error *err)) \
    X(size_t, RedisAI_DAGNumOps, (RAI_DAGRunCtx *run_info)) \
    X(int, RedisAI_DAGRun, (RAI_DAGRunCtx *run_info, RAI_OnFinishCB DAGAsyncFinish, void *private_data, RAI_Error *err)) \
    X(size_t, RedisAI_DAGNumOutputs, (RAI_OnFinishCtx *finish_ctx)) \
    X(const RAI_Tensor *, RedisAI_DAGOutputTensor, (RAI_OnFinishCtx *finish_ctx, size_t index)) \
    X(int, RedisAI_DAGRunError, (RAI_OnFinishCtx *finish_ctx)) \
    X(const RAI_Error *, RedisAI_DAGGetError, (RAI_OnFinishCtx *finish_ctx)) \
    X(void, RedisAI_DAGRunOpFree, (RAI_DAGRunOp *dagOp)) \
    X(void, RedisAI_DAGFree, (RAI_DAGRunCtx *run_info)) \
    X(int, RedisAI_GetLLAPIVersion, (void)) \

#define REDISAI_LLAPI_FUNCTION_COUNT 76

/* The type of each function: <name>_fn. */
#define REDISAI_LLAPI_TYPEDEF(ret, name, params) typedef ret(*name##_fn) params;
REDISAI_LLAPI_FUNCTIONS(REDISAI_LLAPI_TYPEDEF)
#undef REDISAI_LLAPI_TYPEDEF

#ifndef REDISAI_LLAPI_PROVIDER
/* Client side: one pointer per function, filled by RedisAI_Initialize. */
#ifdef REDISAI_LLAPI_CLIENT_IMPL
#define REDISAI_LLAPI_POINTER(ret, name, params) name##_fn name = NULL;
#else
#define REDISAI_LLAPI_POINTER(ret, name, params) extern name##_fn name;
#endif
REDISAI_LLAPI_FUNCTIONS(REDISAI_LLAPI_POINTER)
#undef REDISAI_LLAPI_POINTER

/* Fetches every function: REDISMODULE_ERR, with the first missing name in *missing (when
 * given), if RedisAI is not loaded, lacks one, or its LLAPI version is not 1. */
int RedisAI_Initialize(RedisModuleCtx *ctx, const char **missing);

#ifdef REDISAI_LLAPI_CLIENT_IMPL
int RedisAI_Initialize(RedisModuleCtx *ctx, const char **missing) {
#define REDISAI_LLAPI_FETCH(ret, name, params)              \
    name = (name##_fn)RedisModule_GetSharedAPI(ctx, #name); \
    if (name == NULL) {                                     \
        if (missing) *missing = #name;                      \
        return REDISMODULE_ERR;                             \
    }
    REDISAI_LLAPI_FUNCTIONS(REDISAI_LLAPI_FETCH)
#undef REDISAI_LLAPI_FETCH
    if (RedisAI_GetLLAPIVersion() != REDISAI_LLAPI_VERSION) {
        if (missing) *missing = "RedisAI_GetLLAPIVersion";
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
#endif /* REDISAI_LLAPI_CLIENT_IMPL */
#endif /* !REDISAI_LLAPI_PROVIDER */

#endif /* REDISAI_LLAPI_H */

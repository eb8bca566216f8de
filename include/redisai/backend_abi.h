/*
 * backend_abi.h - the one contract between the RedisAI core and a backend .so.
 *
 * A backend exports exactly one symbol, RAI_BACKEND_ENTRY_SYMBOL, of type
 * RAI_BackendEntryFn. The core dlopen()s the backend with RTLD_NOW|RTLD_LOCAL,
 * calls the entry with a table of host functions and gets back a descriptor.
 * A backend never includes redismodule.h's function pointers: everything it
 * needs from the host comes through RAI_HostApi.
 *
 * Evolution is append-only, as in SQLite's sqlite3_api_routines: new members
 * go at the END of a struct, each group commented with the ABI minor that
 * added it, and the minor number is bumped. A change of layout or meaning of
 * an existing member bumps the major, and the core refuses every backend of
 * another major. Each struct carries its own size so either side can tell
 * which members the other knows about.
 */
#ifndef REDISAI_BACKEND_ABI_H
#define REDISAI_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RAI_ABI_MAJOR 1
#define RAI_ABI_MINOR 6

#define RAI_BACKEND_ENTRY_SYMBOL "RAI_BackendEntry"

/* Backend kinds, numbered as RedisAI 1.2's persisted backend codes. */
typedef enum RAI_BackendKind {
    RAI_BACKEND_TF = 0,
    RAI_BACKEND_TFLITE = 1,
    RAI_BACKEND_TORCH = 2,
    RAI_BACKEND_ONNX = 3,
} RAI_BackendKind;

typedef enum RAI_DeviceKind {
    RAI_DEVICE_CPU = 0,
    RAI_DEVICE_GPU = 1,
} RAI_DeviceKind;

/* Element type, as DLPack's (code, bits) pair, so that types the tensor
 * layer cannot name (float16 from a framework) still round-trip as BLOB. */
typedef enum RAI_DTypeCode {
    RAI_DTYPE_INT = 0,
    RAI_DTYPE_UINT = 1,
    RAI_DTYPE_FLOAT = 2,
    RAI_DTYPE_BFLOAT = 4,
    RAI_DTYPE_BOOL = 6,
    RAI_DTYPE_STRING = 7,
} RAI_DTypeCode;

typedef struct RAI_DType {
    uint8_t code; /* RAI_DTypeCode */
    uint8_t bits; /* 8, 16, 32 or 64; STRING uses 8 */
} RAI_DType;

typedef enum RAI_LogLevel {
    RAI_LOG_DEBUG = 0,
    RAI_LOG_VERBOSE = 1,
    RAI_LOG_NOTICE = 2,
    RAI_LOG_WARNING = 3,
} RAI_LogLevel;

/* Load-time settings a backend may read (docs/configuration.md, "Module arguments"). */
typedef enum RAI_ConfigKey {
    RAI_CONFIG_THREADS_PER_QUEUE = 0,
    RAI_CONFIG_INTRA_OP_PARALLELISM = 1, /* 0: framework default */
    RAI_CONFIG_INTER_OP_PARALLELISM = 2, /* 0: framework default */
    RAI_CONFIG_MODEL_EXECUTION_TIMEOUT = 3, /* ms */
    RAI_CONFIG_BACKEND_MEMORY_LIMIT = 4, /* MB, 0: unlimited */
} RAI_ConfigKey;

/* Opaque core objects. */
typedef struct RAI_Tensor RAI_Tensor;
typedef struct RAI_Error RAI_Error;

/* A Redis reply, converted by the host for backends that let user code call
 * Redis (TorchScript's redis.execute). Added in 1.1. */
typedef enum RAI_CallReplyType {
    RAI_REPLY_NULL = 0,
    RAI_REPLY_STRING = 1, /* bulk and simple strings */
    RAI_REPLY_INTEGER = 2,
    RAI_REPLY_ARRAY = 3,
    RAI_REPLY_ERROR = 4, /* str holds the message */
    RAI_REPLY_DOUBLE = 5,
} RAI_CallReplyType;

typedef struct RAI_CallReply {
    RAI_CallReplyType type;
    long long integer;
    double dbl;
    const char *str;
    size_t len;
    size_t nelems;
    struct RAI_CallReply *elems;
} RAI_CallReply;

/* Functions the core lends to a backend. Valid for the life of the process. */
typedef struct RAI_HostApi {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t size; /* sizeof(RAI_HostApi) as the core was compiled */

    /* --- 1.0: memory, through Redis's allocator so it shows in INFO --- */
    void *(*alloc)(size_t bytes);
    void *(*calloc)(size_t count, size_t bytes);
    void *(*realloc)(void *ptr, size_t bytes);
    void (*free)(void *ptr);
    char *(*strdup)(const char *s);

    /* --- 1.0: diagnostics --- */
    void (*log)(RAI_LogLevel level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /* Records an error; the first one recorded on an RAI_Error wins.
     * CR/LF in the text become spaces. */
    void (*error_set)(RAI_Error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    long long (*config_get)(RAI_ConfigKey key);

    /* --- 1.0: tensors ---
     * A tensor is reference-counted; every create/retain is matched by one
     * tensor_release. Tensors handed to model_run as inputs are borrowed. */
    /* New tensor with uninitialised data of length * (bits/8) bytes.
     * Not for STRING: use tensor_create_strings. */
    RAI_Tensor *(*tensor_create)(RAI_DType dtype, const int64_t *dims, int ndims);
    /* New tensor that takes ownership of foreign memory without copying;
     * deleter(deleter_ctx) runs when the last reference goes. The core
     * copies the data into Redis's allocator only when it stores the tensor
     * under a key. Not for STRING (NULL: the memory stays the caller's). */
    RAI_Tensor *(*tensor_adopt)(RAI_DType dtype, const int64_t *dims, int ndims,
                                void *data, size_t nbytes, void (*deleter)(void *ctx),
                                void *deleter_ctx);
    /* New STRING tensor from n = product(dims) elements (copied). */
    RAI_Tensor *(*tensor_create_strings)(const int64_t *dims, int ndims,
                                         const char *const *elems, const size_t *lens);
    RAI_Tensor *(*tensor_retain)(RAI_Tensor *t);
    void (*tensor_release)(RAI_Tensor *t);
    RAI_DType (*tensor_dtype)(const RAI_Tensor *t);
    int (*tensor_ndims)(const RAI_Tensor *t);
    const int64_t *(*tensor_dims)(const RAI_Tensor *t);
    size_t (*tensor_length)(const RAI_Tensor *t);    /* number of elements */
    size_t (*tensor_byte_size)(const RAI_Tensor *t); /* bytes of data */
    void *(*tensor_data)(RAI_Tensor *t);
    /* STRING only: element i is the NUL-terminated C string at
     * data + offsets[i]; its length excludes the NUL. */
    const char *(*tensor_string_at)(const RAI_Tensor *t, size_t i, size_t *len);

    /* --- 1.1: calls back into Redis, for scripts. Only from run-queue
     * worker threads (a backend's model_run / script_run). --- */
    /* Runs a Redis command under Redis's global lock, in the DB and as the
     * ACL user of the client whose run called it (DB 0, no user, for LLAPI
     * runs), propagated to replicas and AOF like any write. Never NULL; free
     * with call_reply_free. */
    RAI_CallReply *(*redis_call)(const char *cmd, const char *const *args, const size_t *lens,
                                 size_t nargs);
    void (*call_reply_free)(RAI_CallReply *reply);
    /* Runs the model stored at key (in the caller's DB, read access checked
     * for its ACL user, as redis_call) synchronously in the calling
     * thread; outputs as in model_run. Returns 0, or -1 after error_set
     * (e.g. `ERR model key is empty`). */
    int (*model_execute)(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                         size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

    /* --- 1.4: error texts --- */
    /* Moves the text recorded on err out of it and leaves err clear, so
     * that the next error_set records again. NULL when none is recorded;
     * free the text with free. Lets a backend wrap a text a host call
     * recorded: TorchScript raises model_execute's error inside the script,
     * and the client gets the interpreter's message around it. */
    char *(*error_take)(RAI_Error *err);
    /* --- 1.4: the engine's shape, for INFO --- */
    /* Device run queues that exist now (each served by THREADS_PER_QUEUE
     * workers); they are never removed. Main thread only. */
    size_t (*run_queue_count)(void);
} RAI_HostApi;

/* What the core knows about a model when it asks a backend to build it. */
typedef struct RAI_ModelSpec {
    uint32_t size; /* sizeof(RAI_ModelSpec) as the core was compiled */
    const char *device_str; /* exactly as the user typed it */
    RAI_DeviceKind device;
    int64_t device_id; /* -1: the default device of that kind */
    const char *blob;
    size_t blob_len;
    /* Names the user gave (TF: required; others: none). */
    size_t ninputs;
    const char *const *inputs;
    size_t noutputs;
    const char *const *outputs;
    /* --- 1.5: the key the model is stored at ("" when none: LLAPI models
     * not yet stored), for errors that name it (an isolated backend's
     * "while creating <key>"). Not NUL-terminated. --- */
    const char *key;
    size_t key_len;
    /* --- 1.6: 1 when blob stays valid and unchanged until model_free
     * (the core keeps the model's blob: an in-process backend), so that a
     * backend may build a second session from it later (ONNX Runtime's
     * session for lone heavy runs); 0: copy what is needed before
     * model_create returns (an isolated backend's host). Read it only when
     * size covers it. --- */
    int blob_kept;
} RAI_ModelSpec;

/* Input and output names a backend found in the model itself (ONNX, Torch).
 * Arrays and strings are allocated with the host allocator; the core takes
 * ownership. A backend that leaves them NULL keeps the names the user gave.
 * A backend that cannot tell its output count from the model (TorchScript
 * returning List[Tensor]) sets noutputs 0 with a non-NULL outputs array:
 * execution then accepts any output count, and model_run must produce
 * exactly the count asked for or fail. */
typedef struct RAI_ModelNames {
    size_t ninputs;
    char **inputs;
    size_t noutputs;
    char **outputs;
} RAI_ModelNames;

/* What the core knows about a script when it asks a backend to build it.
 * Added in 1.1. */
typedef struct RAI_ScriptSpec {
    uint32_t size;
    const char *device_str;
    RAI_DeviceKind device;
    int64_t device_id;
    const char *source; /* NUL-terminated */
    size_t source_len;
    /* Functions that must exist with the entry-point signature; may be 0. */
    size_t nentry_points;
    const char *const *entry_points;
    /* --- 1.5: the key, as in RAI_ModelSpec --- */
    const char *key;
    size_t key_len;
} RAI_ScriptSpec;

/* One call of a script function. Added in 1.1. */
typedef struct RAI_ScriptCall {
    uint32_t size;
    const char *function;
    /* 1: function is an entry point, call f(tensors, keys, args);
     * 0: legacy binding of inputs to Tensor / List[Tensor] parameters. */
    int entry_point;
    RAI_Tensor *const *inputs;
    size_t ninputs;
    const char *const *keys;
    const size_t *key_lens;
    size_t nkeys;
    const char *const *args;
    const size_t *arg_lens;
    size_t nargs;
    /* Outputs wanted: the flattened result must have exactly this many
     * tensors when > 0; 0 means the result is discarded. */
    size_t noutputs;
} RAI_ScriptCall;

/* Per-run facts the core gives a backend. */
typedef struct RAI_RunInfo {
    uint32_t size;
    /* 0 .. n-1 within the device's queue, n its threads (THREADS_PER_QUEUE
     * workers, and one helper after them when THREADS_PER_QUEUE is unset,
     * docs/configuration.md); n for a run on Redis's main thread
     * (inline_run.h), which never overlaps another run of that thread; -1
     * for an LLAPI client's synchronous run. Each index is one thread, so a
     * backend may keep per-index state. */
    int worker_index;
    /* --- 1.5: the key of the model or script run ("" when unknown), for
     * errors that name it (an isolated backend's "while running <key>").
     * Read it only when size covers it. Not NUL-terminated. --- */
    const char *key;
    size_t key_len;
    /* --- 1.6: the intra-op threads the engine chose for this run
     * (engine/thread_policy.h): the shared count of
     * backends/common/backend_threads.h under load, one per physical core
     * for a lone heavy run. 0: the backend's own default (runs off the
     * workers: inline, LLAPI, batches, isolated hosts). Read it only when
     * size covers it; a backend whose threads are fixed per session may
     * keep a second session for the larger count, or ignore it. --- */
    int intra_op_threads;
} RAI_RunInfo;

/* What a backend gives the core. Static storage in the backend. */
typedef struct RAI_BackendDescriptor {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t size; /* sizeof(RAI_BackendDescriptor) as the backend was compiled */

    /* --- 1.0 --- */
    RAI_BackendKind kind;
    const char *framework;         /* "TensorFlow" */
    const char *framework_version; /* "2.21.0" */
    const char *variant;           /* "cpu" or "gpu" */

    /* Called on the main thread (MODELSTORE, RDB load). Returns the
     * backend's model handle, or NULL after error_set. */
    void *(*model_create)(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err);
    /* Called when the last reference to the model goes, on any thread. */
    void (*model_free)(void *model);
    /* Called on a run-queue worker thread; several workers may run one
     * model at once. outputs[i] are NULL on entry; on success each is a new
     * tensor owned by the core. Returns 0, or -1 after error_set (any
     * outputs already made are released by the core). */
    int (*model_run)(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                     size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);

    /* --- 1.1: scripts; NULL for backends without them --- */
    /* Main thread. Returns the backend's script handle, or NULL after
     * error_set (compile errors, missing or ill-typed entry points). */
    void *(*script_create)(const RAI_ScriptSpec *spec, RAI_Error *err);
    void (*script_free)(void *script);
    /* Worker thread. outputs has call->noutputs NULL slots, filled with new
     * tensors on success. Returns 0, or -1 after error_set. */
    int (*script_run)(void *script, const RAI_RunInfo *info, const RAI_ScriptCall *call,
                      RAI_Tensor **outputs, RAI_Error *err);

    /* --- 1.2: diagnostics; NULL when the backend has none --- */
    /* Called on the main thread for INFO MODULES: the backend reports each
     * of its own fields with add(ctx, field, value); the core prefixes
     * them (`ai_`), e.g. field "onnxruntime_memory". */
    void (*info)(void *ctx, void (*add)(void *ctx, const char *field, const char *value));
} RAI_BackendDescriptor;

/* The one exported symbol. Returns NULL (with a reason in errbuf) when the
 * backend cannot work with this host, e.g. another ABI major or a host table
 * smaller than it needs. */
typedef const RAI_BackendDescriptor *(*RAI_BackendEntryFn)(const RAI_HostApi *host,
                                                           char *errbuf, size_t errlen);

/* Table sizes of each minor version: the core accepts any descriptor of at
 * least 1.0's size and reads a 1.1 member only when the size covers it; a
 * backend that needs 1.1 host functions checks host->size the same way. */
#define RAI_HOST_API_SIZE_1_0 \
    (offsetof(RAI_HostApi, tensor_string_at) + sizeof(void *))
#define RAI_HOST_API_SIZE_1_1 \
    (offsetof(RAI_HostApi, model_execute) + sizeof(void *))
#define RAI_HOST_API_SIZE_1_4 \
    (offsetof(RAI_HostApi, run_queue_count) + sizeof(void *))
#define RAI_RUN_INFO_SIZE_1_6 \
    (offsetof(RAI_RunInfo, intra_op_threads) + sizeof(int))
#define RAI_DESCRIPTOR_SIZE_1_0 \
    (offsetof(RAI_BackendDescriptor, model_run) + sizeof(void *))
#define RAI_DESCRIPTOR_SIZE_1_1 \
    (offsetof(RAI_BackendDescriptor, script_run) + sizeof(void *))
#define RAI_DESCRIPTOR_SIZE_1_2 \
    (offsetof(RAI_BackendDescriptor, info) + sizeof(void *))

/* --- 1.3: the ABI note, readable without running the backend ---
 *
 * Every backend carries one ELF note (section .note.redisai, note name
 * "RedisAI", type RAI_BACKEND_NOTE_TYPE) whose descriptor is
 * {abi_major, abi_minor, kind}. The core reads it from the file BEFORE
 * dlopen: a file of another major or another kind is refused without any of
 * its code (constructors included) running. Each backend writes, once, at
 * file scope:
 *
 *     RAI_BACKEND_ABI_NOTE(RAI_BACKEND_TF);
 *
 * The note is a const object in an allocated SHT_NOTE section (GCC gives
 * sections named .note* that type), marked used and retained so that
 * neither the compiler nor ld --gc-sections drops it; a version script
 * only hides symbols and leaves sections alone. A backend without the note
 * is refused: it was built before 1.3, or it is not a backend. */
#define RAI_BACKEND_NOTE_NAME "RedisAI"
#define RAI_BACKEND_NOTE_TYPE 0x52414901u /* "RAI" 01 */

typedef struct RAI_BackendAbiNote {
    uint32_t namesz; /* sizeof(RAI_BACKEND_NOTE_NAME), NUL included */
    uint32_t descsz; /* 3 * 4 */
    uint32_t type;
    char name[8]; /* "RedisAI\0", already a multiple of 4 */
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t kind; /* RAI_BackendKind */
} RAI_BackendAbiNote;

#if defined(__has_attribute)
#if __has_attribute(retain)
#define RAI_NOTE_RETAIN_ __attribute__((retain))
#endif
#endif
#ifndef RAI_NOTE_RETAIN_
#define RAI_NOTE_RETAIN_
#endif

/* Any ABI version: fixtures use it to pose as other versions. */
#define RAI_BACKEND_ABI_NOTE_VERSION(kind_, major_, minor_)                                  \
    __attribute__((used, section(".note.redisai"), aligned(4))) RAI_NOTE_RETAIN_ static const \
        RAI_BackendAbiNote rai_backend_abi_note = {                                           \
            sizeof(RAI_BACKEND_NOTE_NAME), 12, RAI_BACKEND_NOTE_TYPE, RAI_BACKEND_NOTE_NAME,  \
            (major_), (minor_), (uint32_t)(kind_)}

#define RAI_BACKEND_ABI_NOTE(kind_) RAI_BACKEND_ABI_NOTE_VERSION(kind_, RAI_ABI_MAJOR, RAI_ABI_MINOR)

#ifdef __cplusplus
}
#endif

#endif /* REDISAI_BACKEND_ABI_H */

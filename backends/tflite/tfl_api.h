/*
 * tfl_api.h - the part of LiteRT's C API this backend calls, declared here
 * from the library's documented behaviour (no LiteRT header ships in any
 * package this project installs from), and resolved with dlsym from the
 * libLiteRt.so beside the backend.
 *
 * Every structure LiteRT fills has its size written down here; the calls
 * that fill one go through a guarded buffer (tfl_read.c), so a library whose
 * structure grew is refused with the symbol named, never allowed to write
 * past ours. Status and element-type numbers are LiteRT's own.
 */
#ifndef REDISAI_TFL_API_H
#define REDISAI_TFL_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TflEnvironment_ *TflEnvironment;
typedef struct TflModel_ *TflModel;
typedef struct TflSignature_ *TflSignature;
typedef struct TflSubgraph_ *TflSubgraph;
typedef struct TflTensor_ *TflTensor;
typedef struct TflOptions_ *TflOptions;
typedef struct TflOpaqueOptions_ *TflOpaqueOptions;
typedef struct TflCompiledModel_ *TflCompiledModel;
typedef struct TflTensorBuffer_ *TflTensorBuffer;

typedef int TflStatus; /* 0: OK */

/* LiteRT's (TfLite's) element type numbers. */
enum {
    TFL_TYPE_FLOAT32 = 1,
    TFL_TYPE_INT32 = 2,
    TFL_TYPE_UINT8 = 3,
    TFL_TYPE_INT64 = 4,
    TFL_TYPE_BOOL = 6,
    TFL_TYPE_INT16 = 7,
    TFL_TYPE_INT8 = 9,
    TFL_TYPE_FLOAT16 = 10,
    TFL_TYPE_FLOAT64 = 11,
};

#define TFL_MAX_RANK 8
/* A buffer's memory must start on this boundary or LiteRT refuses it. */
#define TFL_BUFFER_ALIGN 64

/* An environment option: the tag, then a tagged value at offset 8. */
typedef struct TflEnvOption {
    int tag;
    struct {
        int type; /* 2: integer */
        union {
            bool b;
            int64_t i;
            double d;
            const char *s;
            const void *p;
        } v;
    } value;
} TflEnvOption;
#define TFL_ENV_OPTION_SIZE 24
#define TFL_ENV_AUTO_REGISTER_ACCELERATORS 24 /* integer 1: CPU only */
#define TFL_ENV_MIN_LOG_SEVERITY 25           /* integer: 3 errors, 4 silent */
#define TFL_ANY_INT 2

/* Rank (7 bits) and a has-strides bit share the first word. */
typedef struct TflLayout {
    uint32_t rank_bits;
    int32_t dims[TFL_MAX_RANK];
    uint32_t strides[TFL_MAX_RANK];
} TflLayout;
#define TFL_LAYOUT_SIZE 68
#define TFL_LAYOUT_RANK(l) ((int)((l)->rank_bits & 0x7f))

typedef struct TflRankedType {
    int element_type;
    TflLayout layout;
} TflRankedType;
#define TFL_RANKED_TYPE_SIZE 72
#define TFL_TENSOR_RANKED 0 /* LiteRtGetTensorTypeId */

#define TFL_ACCELERATOR_CPU 1

/* The functions, each named after its LiteRT symbol without the prefix. */
typedef struct TflApi {
    TflStatus (*CreateEnvironment)(int n, const TflEnvOption *opts, TflEnvironment *env);
    void (*DestroyEnvironment)(TflEnvironment env);
    TflStatus (*CreateModelFromBuffer)(TflEnvironment env, const void *buf, size_t len,
                                       TflModel *model);
    void (*DestroyModel)(TflModel model);
    TflStatus (*GetNumModelSignatures)(TflModel model, size_t *n);
    TflStatus (*GetModelSignature)(TflModel model, size_t i, TflSignature *sig);
    TflStatus (*GetNumSignatureInputs)(TflSignature sig, size_t *n);
    TflStatus (*GetNumSignatureOutputs)(TflSignature sig, size_t *n);
    TflStatus (*GetSignatureInputTensorByIndex)(TflSignature sig, size_t i, TflTensor *t);
    TflStatus (*GetSignatureOutputTensorByIndex)(TflSignature sig, size_t i, TflTensor *t);
    TflStatus (*GetSignatureSubgraph)(TflSignature sig, TflSubgraph *sg);
    TflStatus (*GetNumSubgraphInputs)(TflSubgraph sg, size_t *n);
    TflStatus (*GetNumSubgraphOutputs)(TflSubgraph sg, size_t *n);
    TflStatus (*GetSubgraphInput)(TflSubgraph sg, size_t i, TflTensor *t);
    TflStatus (*GetSubgraphOutput)(TflSubgraph sg, size_t i, TflTensor *t);
    TflStatus (*GetTensorName)(TflTensor t, const char **name);
    TflStatus (*GetTensorTypeId)(TflTensor t, int *type_id);
    TflStatus (*GetRankedTensorType)(TflTensor t, TflRankedType *type);
    TflStatus (*CreateOptions)(TflOptions *o);
    void (*DestroyOptions)(TflOptions o);
    TflStatus (*SetOptionsHardwareAccelerators)(TflOptions o, int accelerators);
    TflStatus (*CreateOpaqueOptions)(const char *id, void *payload, void (*destroy)(void *),
                                     TflOpaqueOptions *x);
    TflStatus (*AddOpaqueOptions)(TflOptions o, TflOpaqueOptions x);
    TflStatus (*CreateCompiledModel)(TflEnvironment env, TflModel model, TflOptions o,
                                     TflCompiledModel *cm);
    void (*DestroyCompiledModel)(TflCompiledModel cm);
    TflStatus (*GetCompiledModelInputTensorLayout)(TflCompiledModel cm, size_t sig, size_t i,
                                                   TflLayout *layout);
    /* update true re-plans the model's memory first. */
    TflStatus (*GetCompiledModelOutputTensorLayouts)(TflCompiledModel cm, size_t sig, size_t n,
                                                     TflLayout *layouts, bool update);
    TflStatus (*CreateTensorBufferFromHostMemory)(const TflRankedType *type, void *mem,
                                                  size_t bytes, void (*dealloc)(void *),
                                                  TflTensorBuffer *buf);
    void (*DestroyTensorBuffer)(TflTensorBuffer buf);
    TflStatus (*RunCompiledModel)(TflCompiledModel cm, size_t sig, size_t nin,
                                  TflTensorBuffer *in, size_t nout, TflTensorBuffer *out);
} TflApi;

extern TflApi tfl;

/* Opens path (RTLD_NOW | RTLD_LOCAL) and resolves every member of tfl.
 * 0, or -1 with "<path>: <dlerror>" or "<path>: does not export LiteRt<Name>"
 * in why. Idempotent once it has succeeded. */
int Tfl_Open(const char *path, char *why, size_t whylen);

/* "<folder of the object that holds addr>/<name>" in path (name may hold a
 * folder: "lib/libLiteRt.so"). 0, or -1 with the reason in why. */
int Tfl_Beside(const void *addr, const char *name, char *path, size_t pathlen, char *why,
               size_t whylen);

/* The path Tfl_Open loaded ("" before). */
const char *Tfl_LibraryPath(void);

/* Our words for a LiteRT status (the library exports no such function). */
const char *Tfl_StatusText(TflStatus st);

/* The calls that have let a C++ exception out of LiteRT (shared/LITERT.md's
 * traps: a logic_error from a corrupted model's run), each inside a
 * try/catch (tfl_guard.cpp). TFL_STATUS_THREW, with "LiteRT threw: <what>"
 * in why, when one escapes; else LiteRT's own status. */
#define TFL_STATUS_THREW (-3)
TflStatus Tfl_Compile(TflEnvironment env, TflModel model, TflOptions o, TflCompiledModel *cm,
                      char *why, size_t whylen);
TflStatus Tfl_Run(TflCompiledModel cm, size_t nin, TflTensorBuffer *in, size_t nout,
                  TflTensorBuffer *out, char *why, size_t whylen);
TflStatus Tfl_CallInputLayout(TflCompiledModel cm, size_t i, TflLayout *layout, char *why,
                              size_t whylen);
TflStatus Tfl_CallOutputLayouts(TflCompiledModel cm, size_t n, TflLayout *layouts, char *why,
                                size_t whylen);

/* The bytes of one element of a LiteRT type; 0 for a type this backend
 * does not exchange. */
size_t Tfl_ElementSize(int type);

#ifdef __cplusplus
}
#endif

#endif

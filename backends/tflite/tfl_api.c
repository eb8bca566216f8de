/*
 * tfl_api.c - opens libLiteRt.so, resolves the functions of tfl_api.h and
 * turns LiteRT's statuses into text.
 */
#define _GNU_SOURCE
#include "tflite/tfl_api.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(TflEnvOption) == TFL_ENV_OPTION_SIZE, "LiteRtEnvOption is 24 bytes");
_Static_assert(sizeof(TflLayout) == TFL_LAYOUT_SIZE, "LiteRtLayout is 68 bytes");
_Static_assert(sizeof(TflRankedType) == TFL_RANKED_TYPE_SIZE, "LiteRtRankedTensorType is 72 bytes");

TflApi tfl;

static void *lib;
static char lib_path[PATH_MAX];

#define TFL_SYMBOL(member) {"LiteRt" #member, offsetof(TflApi, member)}

static const struct {
    const char *name;
    size_t offset;
} symbols[] = {
    TFL_SYMBOL(CreateEnvironment),
    TFL_SYMBOL(DestroyEnvironment),
    TFL_SYMBOL(CreateModelFromBuffer),
    TFL_SYMBOL(DestroyModel),
    TFL_SYMBOL(GetNumModelSignatures),
    TFL_SYMBOL(GetModelSignature),
    TFL_SYMBOL(GetNumSignatureInputs),
    TFL_SYMBOL(GetNumSignatureOutputs),
    TFL_SYMBOL(GetSignatureInputTensorByIndex),
    TFL_SYMBOL(GetSignatureOutputTensorByIndex),
    TFL_SYMBOL(GetSignatureSubgraph),
    TFL_SYMBOL(GetNumSubgraphInputs),
    TFL_SYMBOL(GetNumSubgraphOutputs),
    TFL_SYMBOL(GetSubgraphInput),
    TFL_SYMBOL(GetSubgraphOutput),
    TFL_SYMBOL(GetTensorName),
    TFL_SYMBOL(GetTensorTypeId),
    TFL_SYMBOL(GetRankedTensorType),
    TFL_SYMBOL(CreateOptions),
    TFL_SYMBOL(DestroyOptions),
    TFL_SYMBOL(SetOptionsHardwareAccelerators),
    TFL_SYMBOL(CreateOpaqueOptions),
    TFL_SYMBOL(AddOpaqueOptions),
    TFL_SYMBOL(CreateCompiledModel),
    TFL_SYMBOL(DestroyCompiledModel),
    TFL_SYMBOL(GetCompiledModelInputTensorLayout),
    TFL_SYMBOL(GetCompiledModelOutputTensorLayouts),
    TFL_SYMBOL(CreateTensorBufferFromHostMemory),
    TFL_SYMBOL(DestroyTensorBuffer),
    TFL_SYMBOL(RunCompiledModel),
};

int Tfl_Open(const char *path, char *why, size_t whylen) {
    if (lib) return 0;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(why, whylen, "%s", e ? e : path);
        return -1;
    }
    TflApi api;
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        void *fn = dlsym(h, symbols[i].name);
        if (fn == NULL) {
            snprintf(why, whylen, "%s: does not export %s", path, symbols[i].name);
            dlclose(h);
            return -1;
        }
        memcpy((char *)&api + symbols[i].offset, &fn, sizeof(fn));
    }
    tfl = api;
    lib = h;
    snprintf(lib_path, sizeof(lib_path), "%s", path);
    return 0;
}

const char *Tfl_LibraryPath(void) {
    return lib_path;
}

int Tfl_Beside(const void *addr, const char *name, char *path, size_t pathlen, char *why,
               size_t whylen) {
    Dl_info info;
    char real[PATH_MAX];
    if (dladdr(addr, &info) == 0 || info.dli_fname == NULL || realpath(info.dli_fname, real) == NULL) {
        snprintf(why, whylen, "cannot find the folder of the TFLITE backend (dladdr)");
        return -1;
    }
    char *slash = strrchr(real, '/');
    if (slash) *slash = '\0';
    if ((size_t)snprintf(path, pathlen, "%s/%s", real, name) >= pathlen) {
        snprintf(why, whylen, "%s: path too long", real);
        return -1;
    }
    return 0;
}

const char *Tfl_StatusText(TflStatus st) {
    switch (st) {
    case 0: return "ok";
    case 1: return "invalid argument";
    case 2: return "memory allocation failure";
    case 3: return "runtime failure";
    case 4: return "missing input tensor";
    case 5: return "unsupported";
    case 6: return "not found";
    case 7: return "timeout expired";
    case 8: return "wrong version";
    case 9: return "unknown error";
    case 10: return "already exists";
    case 100: return "cancelled";
    case 500: return "file I/O error";
    case 501: return "invalid flatbuffer";
    case 502: return "dynamic loading error";
    case 503: return "serialization error";
    case 504: return "compilation error";
    case 1000: return "index out of bounds";
    case 1001: return "invalid IR type";
    case 1002: return "invalid graph invariant";
    case 1003: return "graph modification error";
    default: return "unknown status";
    }
}

size_t Tfl_ElementSize(int type) {
    switch (type) {
    case TFL_TYPE_FLOAT32:
    case TFL_TYPE_INT32: return 4;
    case TFL_TYPE_UINT8:
    case TFL_TYPE_INT8:
    case TFL_TYPE_BOOL: return 1;
    case TFL_TYPE_INT64:
    case TFL_TYPE_FLOAT64: return 8;
    case TFL_TYPE_INT16: return 2;
    default: return 0;
    }
}

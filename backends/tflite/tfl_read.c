/*
 * tfl_read.c - the structures LiteRT fills, read through guard bytes and
 * through tfl_guard.cpp's try/catch.
 */
#include "tflite/tfl_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Guard bytes after a structure LiteRT fills: any change means the library
 * writes a larger structure than the one declared here. */
#define GUARD 64
#define GUARD_BYTE 0xA5

/* bytes of zeros, then the guard; NULL when out of memory. */
static unsigned char *guarded(size_t bytes) {
    unsigned char *buf = malloc(bytes + GUARD);
    if (buf == NULL) return NULL;
    memset(buf, 0, bytes);
    memset(buf + bytes, GUARD_BYTE, GUARD);
    return buf;
}

/* Copies the structure out when the guard is intact, frees buf, and
 * returns st; -2 with the symbol and structure named when it is not. */
static TflStatus finish(unsigned char *buf, size_t bytes, TflStatus st, void *out,
                        const char *symbol, const char *structure, int size, char *why,
                        size_t whylen) {
    for (size_t i = 0; i < GUARD; i++) {
        if (buf[bytes + i] != GUARD_BYTE) {
            snprintf(why, whylen, "%s: %s writes more than the %d bytes of the %s this backend "
                     "was built for", Tfl_LibraryPath(), symbol, size, structure);
            free(buf);
            return -2;
        }
    }
    memcpy(out, buf, bytes);
    free(buf);
    return st;
}

TflStatus Tfl_RankedType(TflTensor t, TflRankedType *out, char *why, size_t whylen) {
    unsigned char *buf = guarded(TFL_RANKED_TYPE_SIZE);
    if (buf == NULL) {
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    TflStatus st = tfl.GetRankedTensorType(t, (TflRankedType *)buf);
    return finish(buf, TFL_RANKED_TYPE_SIZE, st, out, "LiteRtGetRankedTensorType",
                  "LiteRtRankedTensorType", TFL_RANKED_TYPE_SIZE, why, whylen);
}

TflStatus Tfl_OutputLayouts(TflCompiledModel cm, size_t n, TflLayout *out, char *why,
                            size_t whylen) {
    unsigned char *buf = guarded(n * TFL_LAYOUT_SIZE);
    if (buf == NULL) {
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    TflStatus st = Tfl_CallOutputLayouts(cm, n, (TflLayout *)buf, why, whylen);
    return finish(buf, n * TFL_LAYOUT_SIZE, st, out, "LiteRtGetCompiledModelOutputTensorLayouts",
                  "LiteRtLayout", TFL_LAYOUT_SIZE, why, whylen);
}

TflStatus Tfl_InputLayout(TflCompiledModel cm, size_t i, TflLayout *out, char *why,
                          size_t whylen) {
    unsigned char *buf = guarded(TFL_LAYOUT_SIZE);
    if (buf == NULL) {
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    TflStatus st = Tfl_CallInputLayout(cm, i, (TflLayout *)buf, why, whylen);
    return finish(buf, TFL_LAYOUT_SIZE, st, out, "LiteRtGetCompiledModelInputTensorLayout",
                  "LiteRtLayout", TFL_LAYOUT_SIZE, why, whylen);
}

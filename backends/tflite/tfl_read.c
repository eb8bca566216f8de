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

static int guardIntact(const unsigned char *g) {
    for (size_t i = 0; i < GUARD; i++) {
        if (g[i] != GUARD_BYTE) return 0;
    }
    return 1;
}

TflStatus Tfl_RankedType(TflTensor t, TflRankedType *out, char *why, size_t whylen) {
    unsigned char buf[TFL_RANKED_TYPE_SIZE + GUARD] __attribute__((aligned(8)));
    memset(buf, 0, TFL_RANKED_TYPE_SIZE);
    memset(buf + TFL_RANKED_TYPE_SIZE, GUARD_BYTE, GUARD);
    TflStatus st = tfl.GetRankedTensorType(t, (TflRankedType *)buf);
    if (!guardIntact(buf + TFL_RANKED_TYPE_SIZE)) {
        snprintf(why, whylen,
                 "%s: LiteRtGetRankedTensorType writes more than the %d bytes of the "
                 "LiteRtRankedTensorType this backend was built for",
                 Tfl_LibraryPath(), TFL_RANKED_TYPE_SIZE);
        return -2;
    }
    memcpy(out, buf, TFL_RANKED_TYPE_SIZE);
    return st;
}

TflStatus Tfl_OutputLayouts(TflCompiledModel cm, size_t n, TflLayout *out, char *why,
                            size_t whylen) {
    size_t bytes = n * TFL_LAYOUT_SIZE;
    unsigned char *buf = malloc(bytes + GUARD);
    if (buf == NULL) {
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    memset(buf, 0, bytes);
    memset(buf + bytes, GUARD_BYTE, GUARD);
    TflStatus st = Tfl_CallOutputLayouts(cm, n, (TflLayout *)buf, why, whylen);
    if (!guardIntact(buf + bytes)) {
        snprintf(why, whylen,
                 "%s: LiteRtGetCompiledModelOutputTensorLayouts writes more than the %d "
                 "bytes of the LiteRtLayout this backend was built for",
                 Tfl_LibraryPath(), TFL_LAYOUT_SIZE);
        free(buf);
        return -2;
    }
    memcpy(out, buf, bytes);
    free(buf);
    return st;
}

TflStatus Tfl_InputLayout(TflCompiledModel cm, size_t i, TflLayout *out, char *why,
                          size_t whylen) {
    unsigned char buf[TFL_LAYOUT_SIZE + GUARD] __attribute__((aligned(8)));
    memset(buf, 0, TFL_LAYOUT_SIZE);
    memset(buf + TFL_LAYOUT_SIZE, GUARD_BYTE, GUARD);
    TflStatus st = Tfl_CallInputLayout(cm, i, (TflLayout *)buf, why, whylen);
    if (!guardIntact(buf + TFL_LAYOUT_SIZE)) {
        snprintf(why, whylen,
                 "%s: LiteRtGetCompiledModelInputTensorLayout writes more than the %d bytes "
                 "of the LiteRtLayout this backend was built for",
                 Tfl_LibraryPath(), TFL_LAYOUT_SIZE);
        return -2;
    }
    memcpy(out, buf, TFL_LAYOUT_SIZE);
    return st;
}


/*
 * tfl_read.h - the structures LiteRT fills, read so that a library whose
 * structure is larger than tfl_api.h declares is refused, never allowed to
 * write past ours.
 */
#ifndef REDISAI_TFL_READ_H
#define REDISAI_TFL_READ_H

#include <stddef.h>

#include "tflite/tfl_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LiteRtGetRankedTensorType, LiteRtGetCompiledModelInputTensorLayout and
 * LiteRtGetCompiledModelOutputTensorLayouts through a guarded buffer: a
 * write past the declared size is refused with the symbol and sizes in why
 * (returns -2); an exception returns TFL_STATUS_THREW; else LiteRT's status. */
TflStatus Tfl_RankedType(TflTensor t, TflRankedType *out, char *why, size_t whylen);
TflStatus Tfl_OutputLayouts(TflCompiledModel cm, size_t n, TflLayout *out, char *why,
                            size_t whylen);
TflStatus Tfl_InputLayout(TflCompiledModel cm, size_t i, TflLayout *out, char *why,
                          size_t whylen);

#ifdef __cplusplus
}
#endif

#endif

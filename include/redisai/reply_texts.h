/*
 * reply_texts.h - error texts a client can get from more than one place:
 * from the core and from a backend, or from several backends.
 *
 * Each is RedisAI 1.2's reply, byte for byte, which clients and tests match;
 * keeping it here means one place to check it against docs/commands.md. Where 1.2
 * gave two wordings of one refusal (TFLITE's device), both are here; the
 * LLAPI DAG's wording of the key counts is llapi_dag.c's alone. A backend
 * that adds to a text (Torch's output type name) writes the macro followed
 * by its own part.
 *
 * Only string literals: nothing to link, usable from C and C++.
 */
#ifndef REDISAI_REPLY_TEXTS_H
#define REDISAI_REPLY_TEXTS_H

/* --- devices --- */
#define RAI_ERR_UNSUPPORTED_DEVICE "ERR unsupported device"
#define RAI_ERR_UNSUPPORTED_DEVICE_TFLITE "ERR Unsupported device"

/* --- arguments --- */
#define RAI_ERR_MISSING_BLOB "ERR Insufficient arguments, missing model BLOB"
#define RAI_ERR_MISSING_INPUTS_OUTPUTS                                  \
    "ERR Insufficient arguments, INPUTS and OUTPUTS not specified"
#define RAI_ERR_MISSING_SOURCE "ERR Insufficient arguments, missing script SOURCE"
#define RAI_ERR_MISSING_ENTRY_POINTS "ERR Insufficient arguments, missing script entry points"

/* --- key counts against the model --- */
#define RAI_ERR_INPUT_KEYS "Number of keys given as INPUTS here does not match model definition"
#define RAI_ERR_OUTPUT_KEYS "Number of keys given as OUTPUTS here does not match model definition"

/* --- a run's outputs --- */
#define RAI_ERR_OUTPUT_COUNT "ERR Model did not generate the expected number of outputs"
/* A script function's, followed by the function's name. */
#define RAI_ERR_SCRIPT_OUTPUT_COUNT "Function returned unexpected number of outputs - "

/* --- tensor conversion in backends --- */
#define RAI_ERR_UNSUPPORTED_INPUT_TYPE "ERR unsupported input type"
#define RAI_ERR_UNSUPPORTED_OUTPUT_TYPE "ERR unsupported output type"
#define RAI_ERR_OUTPUT_TENSOR "ERR could not create an output tensor"
#define RAI_ERR_STRING_OUTPUT_TENSOR "ERR could not create a STRING output tensor"
#define RAI_ERR_OOM_STRING_INPUT "ERR out of memory converting a STRING tensor"
#define RAI_ERR_OOM_STRING_OUTPUT "ERR out of memory converting a STRING output"
#define RAI_ERR_OOM_OUTPUT "ERR out of memory converting an output"

#endif /* REDISAI_REPLY_TEXTS_H */

/* llapitest.h: what the files of the LLAPI test module share.
 *
 * The module `llapitest` (tests/lowlevel_api/test_llapi.py loads it after redisai.so) is a
 * client of RedisAI's low-level API written only against include/redisai/llapi.h and
 * redismodule.h,
 * as RedisGears is: it never sees RedisAI's internals. Each LLAPI.* command drives one part
 * of the API and replies with what the API returned, so the pytest file can compare it with
 * numpy and with RedisAI's own commands.
 *
 * Replies shared by every command:
 *  - a tensor is [dims, [dlpack code, bits, lanes], length, datasize, bytesize, blob, values];
 *  - a failed LLAPI call is the error "<CODE NAME> <GetErrorOneLine>", e.g.
 *    "EMODELCREATE ...", so the tests read the code (by its position in the enum) and the text.
 */
#ifndef LLAPITEST_H
#define LLAPITEST_H

#include "redisai/llapi.h"

/* The name of an RedisAI_ErrorCode, by its number ("E<n>" past the enum's end). */
const char *LLT_CodeName(int code);

/* Replies "<CODE NAME> <one-line message>" for err. */
int LLT_ReplyRAIError(RedisModuleCtx *ctx, RAI_Error *err);

/* Replies t in the shared tensor form (above). */
void LLT_ReplyTensor(RedisModuleCtx *ctx, RAI_Tensor *t);

/* The tensor stored at `name`, borrowed from the key (NULL with an error sent if the key is
 * empty or holds something else). */
RAI_Tensor *LLT_KeyTensor(RedisModuleCtx *ctx, RedisModuleString *name);

/* Parses "dtype ndims d1..dn [VALUES v... | BLOB b]" at argv[0..argc) into a new tensor made
 * with TensorCreate / TensorSetData / TensorSetValueFrom*; NULL with an error sent. */
RAI_Tensor *LLT_TensorFromArgs(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Checks the return value of a call whose result the module does not otherwise need: one
 * that differs from what the API promises (1 for the run contexts' Add* and the tensor
 * setters, REDISMODULE_OK for the DAG builders, as in 1.2) is logged and counted, and
 * LLAPI.CHECK reports the count. */
#define LLT_EXPECT(call, want) LLT_Expect((long long)(call), (want), #call)
void LLT_Expect(long long got, long long want, const char *what);

/* Command registration, one function per file. */
int LLT_RegisterTensorCommands(RedisModuleCtx *ctx);
int LLT_RegisterRunCommands(RedisModuleCtx *ctx);
int LLT_RegisterDagCommands(RedisModuleCtx *ctx);

/* Creates one command; REDISMODULE_ERR (logged) if Redis refuses it. */
int LLT_CreateCommand(RedisModuleCtx *ctx, const char *name, RedisModuleCmdFunc fn,
                      const char *flags, int first, int last, int step);

#endif

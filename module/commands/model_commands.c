/*
 * model_commands.c - AI.MODELSTORE, AI.MODELSET (deprecated), AI.MODELGET and
 * AI.MODELDEL (docs/commands.md, "Models"). The two store commands only differ in parsing:
 * both end in storeModel(), which builds through the backend, checks the
 * key and replicates verbatim.
 */
#include "commands/model_commands.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "commands/args.h"
#include "core/backend_kind.h"
#include "core/config.h"
#include "core/device.h"
#include "core/messages.h"
#include "redisai/reply_texts.h"
#include "types/model.h"
#include "types/model_type.h"
#include "types/stored.h"

/* MODELSTORE/MODELSET's numeric options: integers >= 0, integral doubles
 * such as 2.0 accepted (RedisAI's ArgsCursor). */
static int parseOption(RedisModuleString *s, long long *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) == REDISMODULE_OK) {
        if (v < 0) return 0;
        *out = v;
        return 1;
    }
    double d;
    if (RedisModule_StringToDouble(s, &d) != REDISMODULE_OK) return 0;
    if (d < 0 || d != floor(d) || d > 9.2e18) return 0;
    *out = (long long)d;
    return 1;
}

static int replyErr(RedisModuleCtx *ctx, const char *msg) {
    return RedisModule_ReplyWithError(ctx, msg);
}

/* Concatenates the chunks argv[0..n-1] into one allocated blob. */
static char *joinChunks(RedisModuleString **argv, int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t l;
        RedisModule_StringPtrLen(argv[i], &l);
        total += l;
    }
    char *blob = RedisModule_Alloc(total ? total : 1);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *p = RedisModule_StringPtrLen(argv[i], &l);
        memcpy(blob + off, p, l);
        off += l;
    }
    *len = total;
    return blob;
}

static const char **namesOf(RedisModuleString **argv, int n) {
    const char **names = RedisModule_Alloc(sizeof(char *) * (n > 0 ? n : 1));
    for (int i = 0; i < n; i++) names[i] = RedisModule_StringPtrLen(argv[i], NULL);
    return names;
}

/* Builds, type-checks the key (after the build, as 1.2), stores, replicates
 * verbatim and replies. Owns blob. */
static int storeModel(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_ModelParams *p,
                      char *blob, size_t blob_len) {
    RAI_Error err;
    Error_Init(&err);
    p->key = RedisModule_StringPtrLen(keyname, &p->key_len);
    /* What Redis must accept (the master's stream, the AOF) is built on the
     * kind's default when the named backend is missing here; a client's
     * own command is refused. */
    int flags = RedisModule_GetContextFlags(ctx);
    p->name_fallback =
        (flags & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) != 0;
    RAI_Model *m = Model_Create(ctx, p, blob, blob_len, &err);
    if (m == NULL) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) != RAI_ModelType) {
        RedisModule_CloseKey(key);
        Model_Release(m);
        return replyErr(ctx, RAI_WRONGTYPE_MSG);
    }
    Model_RegisterStats(m, keyname);
    RedisModule_ModuleTypeSetValue(key, RAI_ModelType, m);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* The names and chunks of a store command, found in its arguments: stores
 * the model they make (storeModel) and replies. */
typedef struct StoreArgs {
    RedisModuleString **inputs, **outputs, **chunks;
    int ninputs, noutputs, nchunks;
} StoreArgs;

static int storeFromArgs(RedisModuleCtx *ctx, RedisModuleString *keyname, RAI_ModelParams *p,
                         const StoreArgs *a) {
    const char **inputs = namesOf(a->inputs, a->ninputs);
    const char **outputs = namesOf(a->outputs, a->noutputs);
    p->ninputs = (size_t)a->ninputs;
    p->inputs = inputs;
    p->noutputs = (size_t)(a->noutputs > 0 ? a->noutputs : 0);
    p->outputs = outputs;
    size_t blob_len;
    char *blob = joinChunks(a->chunks, a->nchunks, &blob_len);
    int rc = storeModel(ctx, keyname, p, blob, blob_len);
    RedisModule_Free(inputs);
    RedisModule_Free(outputs);
    return rc;
}

/* -------------------------------- MODELSTORE ------------------------------ */

/* [BACKEND name] [TAG t] [BATCHSIZE n] [MINBATCHSIZE m] [MINBATCHTIMEOUT ms]
 * from *pos on, each checked in this order. NULL, or the error to reply. */
static const char *storeOptions(RedisModuleString **argv, int argc, int *pos,
                                RAI_ModelParams *p) {
    /* Beyond 1.2: BACKEND <name>, positional right after the device, so a
     * TAG value spelled BACKEND is no ambiguity. */
    if (*pos < argc && Args_TokenIs(argv[*pos], "BACKEND")) {
        size_t len;
        if (*pos + 1 >= argc) return "ERR BACKEND: missing backend name";
        p->backend_name = RedisModule_StringPtrLen(argv[*pos + 1], &len);
        if (len == 0 || strlen(p->backend_name) != len) return "ERR BACKEND: invalid backend name";
        *pos += 2;
    }
    if (*pos + 1 < argc && Args_TokenIs(argv[*pos], "TAG")) {
        p->tag = RedisModule_StringPtrLen(argv[*pos + 1], &p->tag_len);
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "BATCHSIZE")) {
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->batchsize)) {
            return RAI_ERR_BATCHSIZE;
        }
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "MINBATCHSIZE")) {
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->minbatchsize)) {
            return RAI_ERR_MINBATCHSIZE;
        }
        if (p->minbatchsize > 0 && p->batchsize == 0) {
            return RAI_ERR_MINBATCH_WITHOUT_BATCH;
        }
        if (p->minbatchsize > p->batchsize) return RAI_MINBATCH_TOO_LARGE_MSG;
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "MINBATCHTIMEOUT")) {
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->minbatchtimeout)) {
            return RAI_ERR_MINBATCHTIMEOUT;
        }
        if (p->minbatchtimeout > 0 && p->minbatchsize == 0) {
            return "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE";
        }
        *pos += 2;
    }
    return NULL;
}

/* `INPUTS n name... OUTPUTS m name...` at *pos: required for TF, refused
 * for the other backends. NULL, or the error to reply. */
static const char *storeNames(RedisModuleString **argv, int argc, int *pos,
                              RAI_BackendKind backend, StoreArgs *a) {
    if (backend != RAI_BACKEND_TF) {
        if (Args_TokenIs(argv[*pos], "INPUTS")) {
            return "ERR INPUTS argument should not be specified for this backend";
        }
        return NULL;
    }
    long long nin = 0, nout = 0;
    if (!Args_TokenIs(argv[*pos], "INPUTS")) return RAI_ERR_TF_INPUTS_NOT_SPECIFIED;
    if (*pos + 1 >= argc || RedisModule_StringToLongLong(argv[*pos + 1], &nin) != REDISMODULE_OK ||
        nin <= 0) {
        return RAI_ERR_INPUT_COUNT_ARG;
    }
    if (nin > argc - *pos - 2) {
        return "ERR number of model inputs does not match the number of given arguments";
    }
    a->inputs = argv + *pos + 2;
    a->ninputs = (int)nin;
    *pos += 2 + (int)nin;
    if (*pos >= argc || !Args_TokenIs(argv[*pos], "OUTPUTS")) {
        return RAI_ERR_TF_OUTPUTS_NOT_SPECIFIED;
    }
    if (*pos + 1 >= argc ||
        RedisModule_StringToLongLong(argv[*pos + 1], &nout) != REDISMODULE_OK || nout <= 0) {
        return RAI_ERR_OUTPUT_COUNT_ARG;
    }
    if (nout > argc - *pos - 2) {
        return "ERR number of model outputs does not match the number of given arguments";
    }
    a->outputs = argv + *pos + 2;
    a->noutputs = (int)nout;
    *pos += 2 + (int)nout;
    return NULL;
}

/* AI.MODELSTORE key backend device [BACKEND name] [TAG t] [BATCHSIZE n] [MINBATCHSIZE m]
 *   [MINBATCHTIMEOUT ms] [INPUTS n name... OUTPUTS m name...] BLOB chunk... */
int ModelStore_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 6) return RedisModule_WrongArity(ctx);
    RAI_ModelParams p = {.tag = "", .tag_len = 0};
    if (!Backend_ParseKind(RedisModule_StringPtrLen(argv[2], NULL), &p.backend)) {
        return replyErr(ctx, RAI_ERR_UNSUPPORTED_BACKEND);
    }
    p.device_str = RedisModule_StringPtrLen(argv[3], NULL);
    if (!Device_ParseStrict(p.device_str, &p.device, &p.device_id)) {
        return replyErr(ctx, RAI_ERR_INVALID_DEVICE);
    }
    int pos = 4;
    const char *why = storeOptions(argv, argc, &pos, &p);
    if (why) return replyErr(ctx, why);
    if (pos >= argc) return replyErr(ctx, RAI_ERR_MISSING_BLOB);
    StoreArgs a = {0};
    why = storeNames(argv, argc, &pos, p.backend, &a);
    if (why) return replyErr(ctx, why);
    if (pos >= argc || !Args_TokenIs(argv[pos], "BLOB")) {
        return replyErr(ctx, "ERR Invalid argument, expected BLOB");
    }
    if (pos + 1 >= argc) return replyErr(ctx, RAI_ERR_MISSING_BLOB);
    a.chunks = argv + pos + 1;
    a.nchunks = argc - pos - 1;
    return storeFromArgs(ctx, argv[1], &p, &a);
}

/* --------------------------------- MODELSET ------------------------------- */

static int isModelSetKeyword(RedisModuleString *s) {
    static const char *words[] = {"INPUTS", "OUTPUTS", "TAG", "BATCHSIZE", "MINBATCHSIZE",
                                  "MINBATCHTIMEOUT", "BLOB"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (Args_TokenIs(s, words[i])) return 1;
    }
    return 0;
}

static int findToken(RedisModuleString **argv, int from, int argc, const char *word) {
    for (int i = from; i < argc; i++) {
        if (Args_TokenIs(argv[i], word)) return i;
    }
    return -1;
}

/* [TAG t] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]] from *pos on,
 * with 1.2's checks in 1.2's order. NULL, or the error to reply. */
static const char *setOptions(RedisModuleString **argv, int argc, int *pos, RAI_ModelParams *p) {
    if (*pos + 1 < argc && Args_TokenIs(argv[*pos], "TAG")) {
        p->tag = RedisModule_StringPtrLen(argv[*pos + 1], &p->tag_len);
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "BATCHSIZE")) {
        if (p->backend == RAI_BACKEND_TFLITE) {
            return "ERR Auto-batching not supported by the TFLITE backend";
        }
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->batchsize)) {
            return RAI_ERR_BATCHSIZE;
        }
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "MINBATCHSIZE")) {
        if (p->batchsize == 0) return RAI_ERR_MINBATCH_WITHOUT_BATCH;
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->minbatchsize)) {
            return RAI_ERR_MINBATCHSIZE;
        }
        if (p->minbatchsize > p->batchsize) return RAI_MINBATCH_TOO_LARGE_MSG;
        *pos += 2;
    }
    if (*pos < argc && Args_TokenIs(argv[*pos], "MINBATCHTIMEOUT")) {
        if (p->batchsize == 0) return "ERR MINBATCHTIMEOUT specified without BATCHSIZE";
        if (p->minbatchsize == 0) return "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE";
        if (*pos + 1 >= argc || !parseOption(argv[*pos + 1], &p->minbatchtimeout)) {
            return RAI_ERR_MINBATCHTIMEOUT;
        }
        *pos += 2;
    }
    return NULL;
}

/* TF's `INPUTS name... OUTPUTS name...` and every backend's chunks, from pos
 * on: with BLOB the chunks follow it; without (the seed form) the last
 * argument is the blob. NULL, or the error to reply. */
static const char *setNamesAndChunks(RedisModuleString **argv, int argc, int pos,
                                     RAI_BackendKind backend, StoreArgs *a) {
    int blob_at = findToken(argv, pos, argc, "BLOB");
    int chunks_from = blob_at < 0 ? argc - 1 : blob_at + 1;
    if (backend == RAI_BACKEND_TF) {
        if (blob_at == pos) return RAI_ERR_MISSING_INPUTS_OUTPUTS;
        if (!Args_TokenIs(argv[pos], "INPUTS")) return RAI_ERR_INPUTS_NOT_SPECIFIED;
        int outputs_at = findToken(argv, pos + 1, blob_at < 0 ? argc : blob_at, "OUTPUTS");
        if (outputs_at < 0) return RAI_ERR_OUTPUTS_NOT_SPECIFIED;
        a->inputs = argv + pos + 1;
        a->ninputs = outputs_at - (pos + 1);
        a->outputs = argv + outputs_at + 1;
        a->noutputs = (blob_at < 0 ? argc - 1 : blob_at) - (outputs_at + 1);
        if (a->noutputs <= 0 && blob_at < 0) {
            return RAI_ERR_MISSING_BLOB;
        }
    }
    /* Other backends: 1.2 ignores whatever lies between the options and BLOB. */
    if (chunks_from >= argc) return RAI_ERR_MISSING_BLOB;
    a->chunks = argv + chunks_from;
    a->nchunks = argc - chunks_from;
    return NULL;
}

/* AI.MODELSET key backend device [TAG t] [BATCHSIZE n [MINBATCHSIZE m
 *   [MINBATCHTIMEOUT ms]]] [INPUTS name... OUTPUTS name...] [BLOB] chunk...
 * Beyond 1.2, BLOB may be left out (the seed form): the last argument is
 * then the blob. */
int ModelSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    RAI_ModelParams p = {.tag = "", .tag_len = 0};
    if (!Backend_ParseKind(RedisModule_StringPtrLen(argv[2], NULL), &p.backend)) {
        return replyErr(ctx, RAI_ERR_UNSUPPORTED_BACKEND);
    }
    size_t dlen;
    p.device_str = RedisModule_StringPtrLen(argv[3], &dlen);
    if (dlen > 10 || isModelSetKeyword(argv[3])) return replyErr(ctx, RAI_ERR_INVALID_DEVICE);
    int pos = 4;
    const char *why = setOptions(argv, argc, &pos, &p);
    if (why) return replyErr(ctx, why);
    if (pos >= argc) return replyErr(ctx, RAI_ERR_MISSING_BLOB);
    StoreArgs a = {0};
    why = setNamesAndChunks(argv, argc, pos, p.backend, &a);
    if (why) return replyErr(ctx, why);
    if (!Device_ParseLoose(p.device_str, &p.device, &p.device_id)) {
        return replyErr(ctx, p.backend == RAI_BACKEND_TFLITE ? RAI_ERR_UNSUPPORTED_DEVICE_TFLITE
                                                             : RAI_ERR_UNSUPPORTED_DEVICE);
    }
    return storeFromArgs(ctx, argv[1], &p, &a);
}

/* --------------------------------- MODELGET ------------------------------- */

static void replyBlob(RedisModuleCtx *ctx, const RAI_Model *m) {
    size_t chunk = (size_t)rai_config.model_chunk_size;
    size_t n = Model_ChunkCount(m->blob_len, chunk);
    if (n == 1) {
        RedisModule_ReplyWithStringBuffer(ctx, m->blob, m->blob_len);
        return;
    }
    RedisModule_ReplyWithArray(ctx, (long)n);
    for (size_t i = 0; i < n; i++) {
        size_t off = i * chunk;
        size_t len = i + 1 < n ? chunk : m->blob_len - off;
        RedisModule_ReplyWithStringBuffer(ctx, m->blob + off, len);
    }
}

static void replyNames(RedisModuleCtx *ctx, size_t n, char **names) {
    RedisModule_ReplyWithArray(ctx, (long)n);
    for (size_t i = 0; i < n; i++) RedisModule_ReplyWithCString(ctx, names[i]);
}

/* AI.MODELGET key [META] [BLOB] */
int ModelGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2 || argc > 4) return RedisModule_WrongArity(ctx);
    RAI_Error err;
    Error_Init(&err);
    RAI_Model *m = Model_FromKey(ctx, argv[1], &err);
    if (m == NULL) {
        RedisModule_ReplyWithError(ctx, Error_Message(&err));
        Error_Clear(&err);
        return REDISMODULE_OK;
    }
    int meta = 0, blob = 0;
    for (int i = 2; i < argc; i++) {
        if (Args_TokenIs(argv[i], "META")) meta = 1;
        if (Args_TokenIs(argv[i], "BLOB")) blob = 1;
    }
    if (blob && !meta) {
        replyBlob(ctx, m);
        Model_Release(m);
        return REDISMODULE_OK;
    }
    int with_blob = !(meta && !blob);
    /* backend_name only for a model stored with one: other replies stay
     * 1.2's 16 (or 18) elements. */
    RedisModule_ReplyWithArray(ctx, (with_blob ? 18 : 16) + (m->backend_name ? 2 : 0));
    RedisModule_ReplyWithCString(ctx, "backend");
    RedisModule_ReplyWithCString(ctx, Backend_KindName(m->backend));
    RedisModule_ReplyWithCString(ctx, "device");
    RedisModule_ReplyWithCString(ctx, m->device_str);
    RedisModule_ReplyWithCString(ctx, "tag");
    RedisModule_ReplyWithStringBuffer(ctx, m->tag, m->tag_len);
    RedisModule_ReplyWithCString(ctx, "batchsize");
    RedisModule_ReplyWithLongLong(ctx, m->batchsize);
    RedisModule_ReplyWithCString(ctx, "minbatchsize");
    RedisModule_ReplyWithLongLong(ctx, m->minbatchsize);
    RedisModule_ReplyWithCString(ctx, "inputs");
    replyNames(ctx, m->ninputs, m->inputs);
    RedisModule_ReplyWithCString(ctx, "outputs");
    replyNames(ctx, m->noutputs, m->outputs);
    RedisModule_ReplyWithCString(ctx, "minbatchtimeout");
    RedisModule_ReplyWithLongLong(ctx, m->minbatchtimeout);
    if (with_blob) {
        RedisModule_ReplyWithCString(ctx, "blob");
        replyBlob(ctx, m);
    }
    /* Last, so that every 1.2 field keeps its position. */
    if (m->backend_name) {
        RedisModule_ReplyWithCString(ctx, "backend_name");
        RedisModule_ReplyWithCString(ctx, m->backend_name);
    }
    Model_Release(m);
    return REDISMODULE_OK;
}

/* --------------------------------- MODELDEL ------------------------------- */

/* AI.MODELDEL key */
int ModelDel_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    const char *why = Stored_DeleteKey(ctx, argv[1], RAI_ModelType, RAI_ERR_MODEL_KEY_EMPTY);
    if (why) return replyErr(ctx, why);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

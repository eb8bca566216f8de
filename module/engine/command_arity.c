/*
 * command_arity.c - the arity of the commands runs call, from COMMAND INFO,
 * see command_arity.h.
 */
#include "engine/command_arity.h"

#include <ctype.h>
#include <string.h>

/* Far more than the commands and subcommands of a server with its modules
 * (about 400 on Redis 7.4); only names the server knows are kept, so this
 * bounds nothing but a server with thousands of module commands, which then
 * asks COMMAND INFO again after a while. */
#define ARITY_CACHE_MAX 4096

typedef struct Entry {
    int arity;     /* Redis's: n exactly n arguments, -n at least n */
    int container; /* has subcommands: argv[1]'s entry holds the arity */
} Entry;

/* Lower-case names, "container|subcommand" for subcommands. */
static RedisModuleDict *cache = NULL;

void CommandArity_Reset(void) {
    if (cache == NULL) return;
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(cache, "^", NULL, 0);
    void *e;
    while (RedisModule_DictNextC(it, NULL, &e) != NULL) RedisModule_Free(e);
    RedisModule_DictIteratorStop(it);
    RedisModule_FreeDict(NULL, cache);
    cache = NULL;
}

/* The server's COMMAND INFO of name: [name, arity, flags, first key, last
 * key, step, ...] with, from 7.0, the subcommands tenth. NULL for a name it
 * does not know. */
static Entry *ask(RedisModuleCtx *ctx, const char *name, size_t len) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "COMMAND", "cb", "INFO", name, len);
    if (r == NULL) return NULL;
    Entry *e = NULL;
    RedisModuleCallReply *info = RedisModule_CallReplyArrayElement(r, 0);
    if (info != NULL && RedisModule_CallReplyType(info) == REDISMODULE_REPLY_ARRAY) {
        RedisModuleCallReply *arity = RedisModule_CallReplyArrayElement(info, 1);
        RedisModuleCallReply *subs = RedisModule_CallReplyArrayElement(info, 9);
        if (arity != NULL && RedisModule_CallReplyType(arity) == REDISMODULE_REPLY_INTEGER) {
            e = RedisModule_Alloc(sizeof(*e));
            e->arity = (int)RedisModule_CallReplyInteger(arity);
            e->container = subs != NULL && RedisModule_CallReplyLength(subs) > 0;
        }
    }
    RedisModule_FreeCallReply(r);
    return e;
}

static const Entry *lookup(RedisModuleCtx *ctx, const char *name, size_t len) {
    if (cache == NULL) cache = RedisModule_CreateDict(NULL);
    int missing;
    Entry *e = RedisModule_DictGetC(cache, (void *)name, len, &missing);
    if (!missing) return e;
    /* Unknown names are not kept: a module loaded later may add them, and
     * a client could otherwise grow the cache without end. */
    if ((e = ask(ctx, name, len)) == NULL) return NULL;
    if (RedisModule_DictSize(cache) >= ARITY_CACHE_MAX) CommandArity_Reset();
    if (cache == NULL) cache = RedisModule_CreateDict(NULL);
    RedisModule_DictSetC(cache, (void *)name, len, e);
    return e;
}

/* "a" or "a|b" in lower case into buf (of size cap), or 0 when it does not
 * fit or a part holds '|' (no command's name does). */
static size_t commandName(char *buf, size_t cap, RedisModuleString *cmd, RedisModuleString *sub) {
    size_t n = 0, len;
    for (int part = 0; part < 2; part++) {
        RedisModuleString *s = part == 0 ? cmd : sub;
        if (s == NULL) break;
        const char *p = RedisModule_StringPtrLen(s, &len);
        if (n + len + 1 > cap || memchr(p, '|', len) != NULL) return 0;
        if (part == 1) buf[n++] = '|';
        for (size_t i = 0; i < len; i++) buf[n++] = (char)tolower((unsigned char)p[i]);
    }
    return n;
}

static int fits(int arity, int argc) {
    return arity >= 0 ? argc == arity : argc >= -arity;
}

CommandArity CommandArity_Check(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    char name[256];
    size_t len = commandName(name, sizeof(name), argv[0], NULL);
    const Entry *e = len ? lookup(ctx, name, len) : NULL;
    if (e == NULL) return COMMAND_ARITY_UNKNOWN;
    /* As Redis looks a command up: a container alone is checked against its
     * own arity, with an argument the subcommand it names. */
    if (e->container && argc >= 2) {
        len = commandName(name, sizeof(name), argv[0], argv[1]);
        if ((e = len ? lookup(ctx, name, len) : NULL) == NULL) return COMMAND_ARITY_UNKNOWN;
    }
    return fits(e->arity, argc) ? COMMAND_ARITY_OK : COMMAND_ARITY_WRONG;
}

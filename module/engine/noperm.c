/*
 * noperm.c - ACL refusals in the running server's words, see noperm.h.
 */
#include "engine/noperm.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/messages.h"

typedef enum Words {
    WORDS_UNKNOWN = 0,
    WORDS_70,  /* "This user has no permissions to ..." */
    WORDS_72,  /* "User <name> has no permissions to ..." */
} Words;

/* Written on the main thread at load; read by workers. */
static int words = WORDS_UNKNOWN;

static int learned(void) {
    return __atomic_load_n(&words, __ATOMIC_RELAXED);
}

/* "the 'X' <suffix>" at p: X's span, or 0. */
static int quoted(const char *p, size_t len, const char *suffix, const char **obj,
                  size_t *objlen) {
    static const char open[] = "the '";
    size_t lo = sizeof(open) - 1, ls = strlen(suffix);
    if (len < lo + 1 + ls || memcmp(p, open, lo)) return 0;
    if (memcmp(p + len - ls, suffix, ls) || p[len - ls - 1] != '\'') return 0;
    *obj = p + lo;
    *objlen = len - lo - ls - 1;
    return 1;
}

/* Reads one DRYRUN refusal: "<who> has no permissions to <what>", where
 * <who> is "This user" (7.0) or "User <name>" (7.2+) and <what> is
 * "run the 'X' command", "access the 'X' key" or "... channel". */
static NoPermKind parseRefusal(const char *p, size_t len, Words *w, const char **obj,
                               size_t *objlen) {
    static const char mid[] = " has no permissions to ";
    const char *m = NULL;
    for (size_t i = 0; i + sizeof(mid) - 1 <= len; i++) {
        if (!memcmp(p + i, mid, sizeof(mid) - 1)) {
            m = p + i;
            break;
        }
    }
    if (m == NULL) return NOPERM_NONE;
    size_t wholen = (size_t)(m - p);
    if (wholen == 9 && !memcmp(p, "This user", 9)) {
        *w = WORDS_70;
    } else if (wholen > 5 && !memcmp(p, "User ", 5)) {
        *w = WORDS_72;
    } else {
        return NOPERM_NONE;
    }
    const char *what = m + sizeof(mid) - 1;
    size_t wlen = len - (size_t)(what - p);
    if (wlen > 4 && !memcmp(what, "run ", 4) && quoted(what + 4, wlen - 4, " command", obj, objlen)) {
        return NOPERM_COMMAND;
    }
    if (wlen > 7 && !memcmp(what, "access ", 7)) {
        if (quoted(what + 7, wlen - 7, " key", obj, objlen)) return NOPERM_KEY;
        if (quoted(what + 7, wlen - 7, " channel", obj, objlen)) return NOPERM_CHANNEL;
    }
    return NOPERM_NONE;
}

NoPermKind NoPerm_DryRun(RedisModuleCtx *ctx, RedisModuleString *uname, RedisModuleString **argv,
                         int argc, NoPermVerdict *v) {
    v->kind = NOPERM_NONE;
    v->object = NULL;
    RedisModuleCallReply *r =
        RedisModule_Call(ctx, "ACL", "csv", "DRYRUN", uname, argv, (size_t)argc);
    if (r == NULL) return NOPERM_NONE;
    if (RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING) {
        size_t len = 0, objlen = 0;
        const char *p = RedisModule_CallReplyStringPtr(r, &len);
        const char *obj = NULL;
        Words w = WORDS_UNKNOWN;
        v->kind = parseRefusal(p, len, &w, &obj, &objlen);
        if (v->kind != NOPERM_NONE) {
            __atomic_store_n(&words, w, __ATOMIC_RELAXED);
            v->object = RedisModule_CreateString(ctx, obj, objlen);
        }
    }
    RedisModule_FreeCallReply(r);
    return v->kind;
}

void NoPerm_Clear(RedisModuleCtx *ctx, NoPermVerdict *v) {
    if (v->object) RedisModule_FreeString(ctx, v->object);
    v->object = NULL;
    v->kind = NOPERM_NONE;
}

void NoPerm_Init(RedisModuleCtx *ctx) {
    char name[64];
    snprintf(name, sizeof(name), "redisai-noperm-probe-%ld", (long)getpid());
    RedisModuleCallReply *r = RedisModule_Call(ctx, "ACL", "cc", "GETUSER", name);
    /* A user of that name (not ours): leave it alone, keep 7.0's words. */
    int taken = r == NULL || RedisModule_CallReplyType(r) != REDISMODULE_REPLY_NULL;
    if (r) RedisModule_FreeCallReply(r);
    if (taken) return;
    r = RedisModule_Call(ctx, "ACL", "ccc", "SETUSER", name, "reset");
    if (r == NULL) return;
    RedisModule_FreeCallReply(r);
    RedisModuleString *uname = RedisModule_CreateString(ctx, name, strlen(name));
    RedisModuleString *argv[2] = {
        RedisModule_CreateString(ctx, "GET", 3),
        RedisModule_CreateString(ctx, "k", 1),
    };
    NoPermVerdict v;
    NoPerm_DryRun(ctx, uname, argv, 2, &v);
    NoPerm_Clear(ctx, &v);
    r = RedisModule_Call(ctx, "ACL", "cc", "DELUSER", name);
    if (r) RedisModule_FreeCallReply(r);
    for (int i = 0; i < 2; i++) RedisModule_FreeString(ctx, argv[i]);
    RedisModule_FreeString(ctx, uname);
}

char *NoPerm_CommandText(RedisModuleString *uname, const char *cmd, size_t cmd_len) {
    size_t ulen = 0;
    const char *u = uname ? RedisModule_StringPtrLen(uname, &ulen) : "";
    size_t n = cmd_len + ulen + 128;
    char *out = RedisModule_Alloc(n);
    /* No user to name (a call with no client behind it): 7.0's words. */
    if (learned() == WORDS_72 && uname != NULL) {
        snprintf(out, n, CALLER_NOPERM_CMD_FMT_72, (int)ulen, u, (int)cmd_len, cmd);
    } else {
        snprintf(out, n, CALLER_NOPERM_CMD_FMT, (int)cmd_len, cmd);
    }
    return out;
}

const char *NoPerm_KeyText(void) {
    return learned() == WORDS_72 ? CALLER_NOPERM_KEY_72 : CALLER_NOPERM_KEY;
}

const char *NoPerm_ChannelText(void) {
    return learned() == WORDS_72 ? CALLER_NOPERM_CHANNEL_72 : CALLER_NOPERM_CHANNEL;
}

/*
 * caller.c - the ACL user and DB a run acts for, see caller.h.
 */
#include "engine/caller.h"

#include <errno.h>
#include <string.h>

#include "core/config.h"
#include "core/messages.h"
#include "core/server.h"
#include "engine/noperm.h"

static __thread const RAI_Caller *current = NULL;

const RAI_Caller *Caller_Current(void) {
    return current;
}

const RAI_Caller *Caller_SetCurrent(const RAI_Caller *c) {
    const RAI_Caller *prev = current;
    current = c;
    return prev;
}

/* The user a RedisModule_Call's client carries, found without touching a
 * NULL user (RedisModule_GetCurrentUserName dereferences it on Redis 7.2 to
 * 7.4 and Valkey 8; Redis 8.0 and Valkey 9 check). A dry run ("D") of HELLO
 * as the context's user ("C") answers ENOTSUP before anything else when the
 * client has none, which is how Redis runs a call made without "C"; HELLO
 * passes every user's ACL (as AUTH, anyone may send it), so with a user the
 * dry run passes (EACCES would still mean a user). Any other outcome, such
 * as EBADF on a server without "D" (before 7.2, whose module calls cannot
 * block either), leaves the caller UNKNOWN. */
static CallerLookup contextUser(RedisModuleCtx *ctx, RAI_Caller *c) {
    if (!Server_HasAclApi() || RedisModule_GetCurrentUserName == NULL) return CALLER_UNKNOWN;
    errno = 0;
    RedisModuleCallReply *r = RedisModule_Call(ctx, "HELLO", "CD");
    int probe = errno;
    if (r != NULL) RedisModule_FreeCallReply(r);
    if (probe == ENOTSUP) {
        c->known = 1;
        return CALLER_FOUND;
    }
    if (probe != 0 && probe != EACCES) return CALLER_UNKNOWN;
    RedisModuleString *name = RedisModule_GetCurrentUserName(ctx);
    if (name == NULL) return CALLER_UNKNOWN;
    c->known = 1;
    c->user = name;
    return CALLER_FOUND;
}

CallerLookup Caller_Capture(RedisModuleCtx *ctx, RAI_Caller *c) {
    memset(c, 0, sizeof(*c));
    c->db = RedisModule_GetSelectedDb(ctx);
    /* Inside our own redis.execute (a worker holding the GIL): the command
     * runs on a temporary client that has no id to look up; it acts for
     * the run's caller. */
    const RAI_Caller *run = Caller_Current();
    if (run != NULL) {
        c->known = 1;
        c->user = run->user ? RedisModule_CreateStringFromString(NULL, run->user) : NULL;
        return CALLER_FOUND;
    }
    /* A connection is found by id. ENOTSUP: it has no user (the master's
     * link), which Redis itself lets run anything. ENOENT: a client that is
     * not a connection: Lua's, or another module's RedisModule_Call's. */
    errno = 0;
    RedisModuleString *name = RedisModule_GetClientUserNameById(ctx, RedisModule_GetClientId(ctx));
    if (name != NULL) {
        c->known = 1;
        c->user = name;
        return CALLER_FOUND;
    }
    if (errno == ENOTSUP) {
        c->known = 1;
        return CALLER_FOUND;
    }
    /* Lua's client acts for the script's caller, whom Redis does not hand
     * to modules; a NULL user there does not mean "unrestricted". */
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LUA) return CALLER_UNKNOWN;
    return contextUser(ctx, c);
}

void Caller_Clear(RAI_Caller *c) {
    if (c->user) RedisModule_FreeString(NULL, c->user);
    memset(c, 0, sizeof(*c));
}

RedisModuleUser *Caller_User(const RAI_Caller *c, int *gone) {
    *gone = 0;
    if (c == NULL || c->user == NULL) return NULL;
    /* Callers ask only where the server can check a user: fail closed. */
    if (!Server_HasAclApi()) {
        *gone = 1;
        return NULL;
    }
    RedisModuleUser *u = RedisModule_GetModuleUserFromUserName(c->user);
    if (u == NULL) *gone = 1;
    return u;
}

/* Whether ACL GETUSER lists `flag` (e.g. "allkeys") for the user: 1, 0, or
 * -1 when the user no longer exists. Redis 6.2 answers an array of
 * name/value pairs whose "flags" value is an array of words. */
static int userHasFlag(RedisModuleCtx *ctx, RedisModuleString *user, const char *flag) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "ACL", "cs", "GETUSER", user);
    if (r == NULL) return 0;
    int found = -1;
    if (RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY) {
        found = 0;
        size_t n = RedisModule_CallReplyLength(r);
        for (size_t i = 0; i + 1 < n && !found; i += 2) {
            size_t len;
            const char *name =
                RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, i), &len);
            if (name == NULL || len != 5 || memcmp(name, "flags", 5)) continue;
            RedisModuleCallReply *flags = RedisModule_CallReplyArrayElement(r, i + 1);
            size_t nf = RedisModule_CallReplyLength(flags);
            for (size_t j = 0; j < nf && !found; j++) {
                const char *f =
                    RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(flags, j), &len);
                found = f != NULL && len == strlen(flag) && !memcmp(f, flag, len);
            }
        }
    }
    RedisModule_FreeCallReply(r);
    return found;
}

int Caller_MayAccessAllKeys(RedisModuleCtx *ctx, const RAI_Caller *c, RAI_Error *err) {
    if (c == NULL || c->user == NULL || rai_config.unsafe_no_acl_checks) return REDISMODULE_OK;
    int all = userHasFlag(ctx, c->user, "allkeys");
    if (all == 1) return REDISMODULE_OK;
    Error_Set(err, all < 0 ? CALLER_NOPERM_GONE : SERVER_NO_ACL_KEY);
    return REDISMODULE_ERR;
}

int Caller_CheckKey(RedisModuleCtx *ctx, const RAI_Caller *c, RedisModuleString *key, int flags,
                    RAI_Error *err) {
    if (!Server_HasAclApi()) return Caller_MayAccessAllKeys(ctx, c, err);
    int gone;
    RedisModuleUser *u = Caller_User(c, &gone);
    if (u == NULL) {
        if (!gone) return REDISMODULE_OK;
        Error_Set(err, CALLER_NOPERM_GONE);
        return REDISMODULE_ERR;
    }
    int rc = RedisModule_ACLCheckKeyPermissions(u, key, flags);
    if (rc != REDISMODULE_OK) {
        RedisModule_ACLAddLogEntry(ctx, u, key, REDISMODULE_ACL_LOG_KEY);
        Error_Set(err, NoPerm_KeyText());
    }
    RedisModule_FreeModuleUser(u);
    return rc;
}

/*
 * caller.c - the ACL user and DB a run acts for, see caller.h.
 */
#include "engine/caller.h"

#include <errno.h>
#include <string.h>

#include "core/messages.h"

static __thread const RAI_Caller *current = NULL;

const RAI_Caller *Caller_Current(void) {
    return current;
}

const RAI_Caller *Caller_SetCurrent(const RAI_Caller *c) {
    const RAI_Caller *prev = current;
    current = c;
    return prev;
}

/* Redis 7.0 added what checking a user needs; an older server (the module
 * loads on >= 6.0) leaves these NULL. */
static int aclApi(void) {
    return RedisModule_GetClientUserNameById && RedisModule_GetModuleUserFromUserName &&
           RedisModule_FreeModuleUser && RedisModule_ACLCheckCommandPermissions &&
           RedisModule_ACLCheckKeyPermissions && RedisModule_ACLAddLogEntry &&
           RedisModule_GetCommandKeys && RedisModule_SetContextUser;
}

CallerLookup Caller_Capture(RedisModuleCtx *ctx, RAI_Caller *c) {
    memset(c, 0, sizeof(*c));
    c->db = RedisModule_GetSelectedDb(ctx);
    if (!aclApi()) {
        /* No user can be checked: RedisAI 1.2's behaviour, in the caller's DB. */
        c->known = 1;
        return CALLER_FOUND;
    }
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
     * not a connection (Lua, another module's RedisModule_Call), whose user
     * may be NULL: not safe to ask. */
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
    return CALLER_UNKNOWN;
}

void Caller_Clear(RAI_Caller *c) {
    if (c->user) RedisModule_FreeString(NULL, c->user);
    memset(c, 0, sizeof(*c));
}

RedisModuleUser *Caller_User(const RAI_Caller *c, int *gone) {
    *gone = 0;
    if (c == NULL || c->user == NULL) return NULL;
    RedisModuleUser *u = RedisModule_GetModuleUserFromUserName(c->user);
    if (u == NULL) *gone = 1;
    return u;
}

int Caller_CheckKey(RedisModuleCtx *ctx, const RAI_Caller *c, RedisModuleString *key, int flags,
                    RAI_Error *err) {
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
        Error_Set(err, CALLER_NOPERM_KEY);
    }
    RedisModule_FreeModuleUser(u);
    return rc;
}

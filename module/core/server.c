/*
 * server.c - the running server's facts, see server.h.
 */
#include "core/server.h"

#include <stdio.h>

static char version_text[32] = "unknown";
static int has_acl_api = 0;

static int aclApiPresent(void) {
    return RedisModule_GetClientUserNameById && RedisModule_GetModuleUserFromUserName &&
           RedisModule_FreeModuleUser && RedisModule_ACLCheckCommandPermissions &&
           RedisModule_ACLCheckKeyPermissions && RedisModule_ACLAddLogEntry &&
           RedisModule_SetContextUser;
}

int Server_Init(RedisModuleCtx *ctx) {
    int v = RedisModule_GetServerVersion ? RedisModule_GetServerVersion() : 0;
    if (v == 0) {
        snprintf(version_text, sizeof(version_text), "older than 6.0.9");
    } else {
        snprintf(version_text, sizeof(version_text), "%d.%d.%d", (v >> 16) & 0xff,
                 (v >> 8) & 0xff, v & 0xff);
    }
    if (v < SERVER_MIN_VERSION) {
        RedisModule_Log(ctx, "warning",
                        "RedisAI cannot run on this server (version %s): it needs Redis "
                        SERVER_MIN_VERSION_TEXT " or newer, or Valkey",
                        version_text);
        return REDISMODULE_ERR;
    }
    has_acl_api = aclApiPresent();
    if (!has_acl_api) {
        RedisModule_Log(ctx, "notice",
                        "server %s has no module ACL API: AI.CONFIG LOADBACKEND, BACKENDSPATH, "
                        "LIST and INLINE_RUN_MAX_US are refused and scripts' redis.execute needs "
                        "UNSAFE_NO_ACL_CHECKS yes (docs/security.md)",
                        version_text);
    }
    return REDISMODULE_OK;
}

const char *Server_VersionText(void) {
    return version_text;
}

int Server_HasAclApi(void) {
    return has_acl_api;
}

/*
 * server.h - what the running server offers the module. RedisAI runs on
 * Redis 6.2 and newer and on Valkey (docs/install.md, "Servers"); Valkey
 * reports itself as Redis 7.2.4, so features are judged by the API the
 * server hands over, never by its version number, which serves only to
 * refuse a server too old to run on and to name it in logs.
 */
#ifndef REDISAI_SERVER_H
#define REDISAI_SERVER_H

#include <stddef.h>

#include "redismodule.h"

/* The oldest server the module loads on. */
#define SERVER_MIN_VERSION 0x00060200
#define SERVER_MIN_VERSION_TEXT "6.2.0"

/* Records the server's facts; call once from OnLoad, after RedisModule_Init.
 * REDISMODULE_ERR (after one warning naming the server's version and the
 * reason) when the module cannot run there. */
int Server_Init(RedisModuleCtx *ctx);

/* The version the server reports, as "7.0.15" ("older than 6.0.9" when it
 * cannot tell: RedisModule_GetServerVersion arrived in 6.0.9). */
const char *Server_VersionText(void);

/* Whether the server lets a module check a user's ACL (RedisModule_ACLCheck*
 * and friends, Redis 7.0) and take RedisModule_Call's "C", "E" and "M"
 * flags, which arrived with them. Without it (Redis 6.2) nothing the module
 * does on a user's behalf can be checked against that user: see
 * docs/security.md, "Servers without the ACL API". */
int Server_HasAclApi(void);

#endif

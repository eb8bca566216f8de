/*
 * iso_info.h - the ai_isolation section of INFO MODULES.
 */
#ifndef REDISAI_ISO_INFO_H
#define REDISAI_ISO_INFO_H

#include "redisai/backend_abi.h"
#include "redismodule.h"

/* One dictionary field per isolated backend; nothing without any.
 * is_default(d) tells whether d is its kind's default backend (the
 * loader's knowledge, above this folder). */
void Iso_InfoSection(RedisModuleInfoCtx *ctx, int (*is_default)(const RAI_BackendDescriptor *d));

#endif

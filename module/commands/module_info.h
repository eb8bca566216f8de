/*
 * module_info.h - INFO MODULES sections of the module.
 */
#ifndef REDISAI_MODULE_INFO_H
#define REDISAI_MODULE_INFO_H

#include "redismodule.h"

void ModuleInfo_Callback(RedisModuleInfoCtx *ctx, int for_crash_report);

#endif

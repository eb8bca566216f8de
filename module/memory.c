/*
 * memory.c - the maxmemory room check; see memory.h. Only callers off the
 * hot path ask: the answer reads INFO memory once maxmemory is set.
 */
#include "memory.h"

#include <string.h>

#include "redismodule.h"

int Memory_WouldExceed(size_t more) {
    /* mem_used / maxmemory, Redis's own measure (replica and AOF buffers
     * excluded); exactly 0 when no maxmemory is set. */
    float ratio = RedisModule_GetUsedMemoryRatio();
    if (ratio <= 0) return 0;
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(NULL, "memory");
    if (info == NULL) return 0;
    int err = 0;
    unsigned long long max = RedisModule_ServerInfoGetFieldUnsigned(info, "maxmemory", &err);
    const char *policy = RedisModule_ServerInfoGetFieldC(info, "maxmemory_policy");
    int noeviction = policy != NULL && strcmp(policy, "noeviction") == 0;
    RedisModule_FreeServerInfo(NULL, info);
    if (err != REDISMODULE_OK || max == 0) return 0;
    if ((unsigned long long)more > max) return 1;
    if (!noeviction) return 0;
    return (double)ratio * (double)max + (double)more > (double)max;
}

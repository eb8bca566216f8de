/*
 * memory.c - the maxmemory room check; see memory.h. The used-memory ratio
 * is Redis's own (cheap); maxmemory and the policy come from INFO memory,
 * which costs tens of microseconds, so they are kept until the next CONFIG
 * SET (Redis 7's config change event). Without that event (an older
 * server) they are read at every check.
 */
#include "core/memory.h"

#include <string.h>

#include "redismodule.h"

static struct {
    int known; /* 0 until read, and again after any CONFIG SET */
    unsigned long long max;
    int noeviction;
} limits;
static int keep_limits; /* config changes reach onConfigChange */

static void onConfigChange(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    REDISMODULE_NOT_USED(ctx);
    REDISMODULE_NOT_USED(e);
    REDISMODULE_NOT_USED(sub);
    REDISMODULE_NOT_USED(data);
    limits.known = 0;
}

void Memory_Init(RedisModuleCtx *ctx) {
    limits.known = 0;
    keep_limits = RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Config,
                                                     onConfigChange) == REDISMODULE_OK;
}

static int readLimits(void) {
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(NULL, "memory");
    if (info == NULL) return 0;
    int err = REDISMODULE_ERR;
    limits.max = RedisModule_ServerInfoGetFieldUnsigned(info, "maxmemory", &err);
    const char *policy = RedisModule_ServerInfoGetFieldC(info, "maxmemory_policy");
    limits.noeviction = policy != NULL && strcmp(policy, "noeviction") == 0;
    RedisModule_FreeServerInfo(NULL, info);
    limits.known = err == REDISMODULE_OK && keep_limits;
    return err == REDISMODULE_OK;
}

int Memory_WouldExceed(size_t more) {
    if (RedisModule_GetUsedMemoryRatio == NULL) return 0;
    /* mem_used / maxmemory, Redis's own measure (replica and AOF buffers
     * excluded); exactly 0 when no maxmemory is set. */
    float ratio = RedisModule_GetUsedMemoryRatio();
    if (ratio <= 0) return 0;
    if (!limits.known && !readLimits()) return 0;
    if (limits.max == 0) return 0;
    if ((unsigned long long)more > limits.max) return 1;
    if (!limits.noeviction) return 0;
    return (double)ratio * (double)limits.max + (double)more > (double)limits.max;
}

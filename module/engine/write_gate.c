/*
 * write_gate.c - see write_gate.h. The common case costs one flag read
 * (standalone) or one EXISTS through RedisModule_Call (cluster): Redis's
 * own routing of a command from the blocked client (its ASKING and
 * READONLY flags included) says whether the keys are still served here.
 * Only a refusal reads CLUSTER NODES, to name the node to go to.
 */
#include "engine/write_gate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/cluster_nodes.h"

#define TRYAGAIN_PAUSED                                                                       \
    "TRYAGAIN writes are paused (CLIENT PAUSE or a failover): the run's outputs were not "    \
    "stored; send the command again"
#define TRYAGAIN_MOVING "TRYAGAIN Multiple keys request during rehashing of slot"
#define READONLY_REPLICA "READONLY You can't write against a read only replica."
#define CLUSTERDOWN "CLUSTERDOWN The cluster is down"
#define CLUSTERDOWN_RO "CLUSTERDOWN The cluster is down and only accepts read commands"
#define CLUSTERDOWN_UNBOUND "CLUSTERDOWN Hash slot not served"

static long long paused_refusals = 0; /* main thread */
static long long redirects = 0;       /* main thread */

int WriteGate_Paused(void) {
    /* True while CLIENT PAUSE WRITE or ALL, or a failover, holds writes
     * (Redis 7: the pause of replica traffic is part of both; 6.2: any
     * pause). */
    return RedisModule_AvoidReplicaTraffic != NULL && RedisModule_AvoidReplicaTraffic();
}

/* Who serves slot, from CLUSTER NODES as this node sees it now. */
static void routeOf(RedisModuleCtx *ctx, long long slot, ClusterRoute *r) {
    memset(r, 0, sizeof(*r));
    RedisModuleCallReply *reply = RedisModule_Call(ctx, "CLUSTER", "c", "NODES");
    size_t len = 0;
    const char *text = reply ? RedisModule_CallReplyStringPtr(reply, &len) : NULL;
    if (text) ClusterNodes_Route(text, len, slot, r);
    if (reply) RedisModule_FreeCallReply(reply);
}

static long long keySlot(RedisModuleCtx *ctx, RedisModuleString *key) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CLUSTER", "cs", "KEYSLOT", key);
    long long slot = -1;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER) {
        slot = RedisModule_CallReplyInteger(r);
    }
    if (r) RedisModule_FreeCallReply(r);
    return slot;
}

static size_t presentHere(RedisModuleCtx *ctx, RedisModuleString **keys, size_t nkeys) {
    size_t n = 0;
    for (size_t i = 0; i < nkeys; i++) {
        RedisModuleKey *k = RedisModule_OpenKey(ctx, keys[i], REDISMODULE_READ);
        n += RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY;
        RedisModule_CloseKey(k);
    }
    return n;
}

/* What Redis would answer a write of keys sent to this node now, which it
 * no longer takes (why: the probe's errno). */
static const char *redirect(RedisModuleCtx *ctx, RedisModuleString **keys, size_t nkeys,
                            int why, char msg[WRITE_GATE_MSG_LEN]) {
    if (why == ENETDOWN) return CLUSTERDOWN;
    if (why == EROFS) return CLUSTERDOWN_RO;
    long long slot = keySlot(ctx, keys[0]);
    if (slot < 0) return CLUSTERDOWN;
    ClusterRoute r;
    routeOf(ctx, slot, &r);
    if (r.owner[0] == '\0') return CLUSTERDOWN_UNBOUND;
    if (!r.owner_is_me || r.me_replica) {
        snprintf(msg, WRITE_GATE_MSG_LEN, "MOVED %lld %s", slot, r.owner);
        return msg;
    }
    if (r.target[0] != '\0') {
        /* Migrating: keys that already left are written on the target. */
        if (presentHere(ctx, keys, nkeys) > 0) return TRYAGAIN_MOVING;
        snprintf(msg, WRITE_GATE_MSG_LEN, "ASK %lld %s", slot, r.target);
        return msg;
    }
    return CLUSTERDOWN;
}

const char *WriteGate_Refusal(RedisModuleCtx *ctx, RedisModuleString **keys, size_t nkeys,
                              char msg[WRITE_GATE_MSG_LEN]) {
    if (nkeys == 0) return NULL;
    if (WriteGate_Paused()) {
        paused_refusals++;
        return TRYAGAIN_PAUSED;
    }
    int flags = RedisModule_GetContextFlags(ctx);
    int replica = (flags & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
    if (!(flags & REDISMODULE_CTX_FLAGS_CLUSTER)) {
        /* Redis's own rule for a client's write: a replica refuses it only
         * with replica-read-only yes (READONLY); a writable one takes it. */
        if (!(flags & REDISMODULE_CTX_FLAGS_READONLY)) return NULL;
        redirects++;
        return READONLY_REPLICA;
    }
    /* A cluster replica sends every write to its master (MOVED), whatever
     * replica-read-only says, as Redis's routing does. */
    int why = 0;
    if (!replica) {
        /* Redis routes the EXISTS as it would the client's own command. */
        errno = 0;
        RedisModuleCallReply *r = RedisModule_Call(ctx, "EXISTS", "v", keys, nkeys);
        if (r != NULL) {
            RedisModule_FreeCallReply(r);
            return NULL;
        }
        why = errno;
    }
    redirects++;
    return redirect(ctx, keys, nkeys, why, msg);
}

long long WriteGate_PausedRefusals(void) {
    return paused_refusals;
}

long long WriteGate_Redirects(void) {
    return redirects;
}

/*
 * write_gate.h - whether a finished run's outputs may be written on this
 * node now (docs/cluster.md, "What a change of the cluster does to a run").
 *
 * Redis decides where a client's write goes when the command arrives; a run
 * that was queued then may end after the decision stopped holding:
 *   - writes are paused (CLIENT PAUSE WRITE or ALL, a manual failover, a
 *     FAILOVER, a shutdown): Redis asserts when a module propagates then,
 *     since a write could be lost in the switch;
 *   - this node became a read-only replica (a failover, REPLICAOF; a
 *     replica with replica-read-only no takes writes, as Redis lets it);
 *   - in a cluster, the outputs' slot moved to another node, or is
 *     migrating and the keys went (or go) to the target.
 * Then nothing is written, and the client gets what Redis would answer its
 * own command sent now: TRYAGAIN while paused (the client resends; Redis
 * holds the resent write until the pause ends and routes it), MOVED/ASK to
 * the slot's node, TRYAGAIN for a slot half moved, READONLY on a standalone
 * replica, CLUSTERDOWN when the cluster is down.
 */
#ifndef REDISAI_WRITE_GATE_H
#define REDISAI_WRITE_GATE_H

#include <stddef.h>

#include "redismodule.h"

/* Room for the longest refusal (a MOVED with an IPv6 address). */
#define WRITE_GATE_MSG_LEN 192

/* NULL when `keys` may be written now by the blocked client of ctx, else
 * the error to answer (in msg, or a constant). Main thread, from a blocked
 * client's reply callback, before anything is written. */
const char *WriteGate_Refusal(RedisModuleCtx *ctx, RedisModuleString **keys, size_t nkeys,
                              char msg[WRITE_GATE_MSG_LEN]);

/* Whether the server pauses writes now (CLIENT PAUSE WRITE or ALL, a
 * failover). Under Redis's lock. */
int WriteGate_Paused(void);

/* Since load (INFO): finished runs answered without writing because writes
 * were paused; because the node no longer served their keys. */
long long WriteGate_PausedRefusals(void);
long long WriteGate_Redirects(void);

#endif

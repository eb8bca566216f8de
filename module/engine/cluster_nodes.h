/*
 * cluster_nodes.h - who serves a hash slot, read from the text of CLUSTER
 * NODES as this node sees it (the write gate's redirects: write_gate.h).
 *
 * Pure: text in, a route out; no Redis call, no allocation, the text is
 * only read. A line may list any number of slot ranges (a node can own
 * every other slot: 8192 ranges on one line).
 */
#ifndef REDISAI_CLUSTER_NODES_H
#define REDISAI_CLUSTER_NODES_H

#include <stddef.h>

/* Room for ip:port (IPv6 included) or a hostname's address. */
#define CLUSTER_ADDR_LEN 96

typedef struct ClusterRoute {
    char owner[CLUSTER_ADDR_LEN];  /* ip:port of the slot's master, "" if none */
    int owner_is_me;               /* the owner's line is flagged myself */
    int me_replica;                /* the myself line is flagged slave */
    char target[CLUSTER_ADDR_LEN]; /* ip:port this node migrates the slot to, "" if not */
} ClusterRoute;

/* Fills r for slot from len bytes of CLUSTER NODES text (lines of <id>
 * <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link>
 * <slot>...). Lines too short to be a node are skipped. */
void ClusterNodes_Route(const char *text, size_t len, long long slot, ClusterRoute *r);

#endif

/*
 * test_cluster_nodes.c - module/engine/cluster_nodes.c: the owner of a
 * slot, this node's role and a migration's target, read from CLUSTER NODES
 * text as Redis 7 prints it; lines of any length (a node owning every
 * other slot lists 8192 ranges).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cluster_nodes.h"
#include "unit.h"

#define A "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
#define B "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
#define C "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"

static ClusterRoute route(const char *text, long long slot) {
    ClusterRoute r;
    memset(&r, 0x5a, sizeof(r));
    ClusterNodes_Route(text, strlen(text), slot, &r);
    return r;
}

static void testOwnersAndRoles(void) {
    const char *nodes =
        A " 127.0.0.1:7000@17000,host-a myself,master - 0 0 1 connected 0-5460 6000\n"
        B " 127.0.0.1:7001@17001 master - 0 1700000000000 2 connected 5461-5999 6001-10922\n"
        C " [::1]:7002@17002 master - 0 1700000000000 3 connected 10923-16383\n";
    ClusterRoute r = route(nodes, 0);
    CHECK_STR(r.owner, "127.0.0.1:7000");
    CHECK_INT(r.owner_is_me, 1);
    CHECK_INT(r.me_replica, 0);
    CHECK_STR(r.target, "");
    r = route(nodes, 6000); /* a single slot after a range */
    CHECK_STR(r.owner, "127.0.0.1:7000");
    r = route(nodes, 5999);
    CHECK_STR(r.owner, "127.0.0.1:7001");
    CHECK_INT(r.owner_is_me, 0);
    r = route(nodes, 6001);
    CHECK_STR(r.owner, "127.0.0.1:7001");
    r = route(nodes, 16383);
    CHECK_STR(r.owner, "[::1]:7002");
    /* No one serves it, and text without a trailing newline or with CRLF. */
    r = route(A " 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 1-2", 0);
    CHECK_STR(r.owner, "");
    r = route(A " 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 1-2\r\n", 2);
    CHECK_STR(r.owner, "127.0.0.1:7000");
}

static void testReplicaAndMigration(void) {
    const char *replica =
        A " 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16383\n"
        B " 127.0.0.1:7001@17001 myself,slave " A " 0 0 1 connected\n";
    ClusterRoute r = route(replica, 42);
    CHECK_STR(r.owner, "127.0.0.1:7000");
    CHECK_INT(r.owner_is_me, 0);
    CHECK_INT(r.me_replica, 1);
    /* This node migrates 100 to C, whose line comes later; B imports 7. */
    const char *migrating =
        A " 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191 [100->-" C "]\n"
        B " 127.0.0.1:7001@17001 master - 0 0 2 connected 8192-16383 [7-<-" A "]\n"
        C " 127.0.0.1:7002@17002 master - 0 0 3 connected\n";
    r = route(migrating, 100);
    CHECK_STR(r.owner, "127.0.0.1:7000");
    CHECK_INT(r.owner_is_me, 1);
    CHECK_STR(r.target, "127.0.0.1:7002");
    r = route(migrating, 10); /* a prefix of "100" is another slot */
    CHECK_STR(r.target, "");
    r = route(migrating, 7);
    CHECK_STR(r.owner, "127.0.0.1:7000");
    CHECK_STR(r.target, "");
}

/* A: the even slots; B: the odd ones, one token each (8192 on a line). */
static char *interleaved(void) {
    size_t cap = 2 * (16384 * 7 + 256);
    char *text = malloc(cap);
    size_t n = 0;
    for (int node = 0; node < 2; node++) {
        n += (size_t)snprintf(text + n, cap - n, "%s 127.0.0.1:%d@1700%d %s - 0 0 %d connected",
                              node ? B : A, 7000 + node, node, node ? "master" : "myself,master",
                              node + 1);
        for (int slot = node; slot < 16384; slot += 2) {
            n += (size_t)snprintf(text + n, cap - n, " %d", slot);
        }
        n += (size_t)snprintf(text + n, cap - n, "\n");
    }
    return text;
}

static void testLongLines(void) {
    char *text = interleaved();
    ClusterRoute r = route(text, 16383); /* B's 8192nd token */
    CHECK_STR(r.owner, "127.0.0.1:7001");
    CHECK_INT(r.owner_is_me, 0);
    r = route(text, 8193); /* B's 4097th */
    CHECK_STR(r.owner, "127.0.0.1:7001");
    r = route(text, 16382); /* A's last */
    CHECK_STR(r.owner, "127.0.0.1:7000");
    CHECK_INT(r.owner_is_me, 1);
    free(text);
}

static void testMalformed(void) {
    /* Too few fields, garbage slot tokens, an empty text: no owner, no crash. */
    ClusterRoute r = route(A " 127.0.0.1:7000@17000 myself,master - 0 0\n", 0);
    CHECK_STR(r.owner, "");
    r = route(A " 1.2.3.4:1@2 master - 0 0 1 connected x-y 5- -5 9999999999 12a\n", 5);
    CHECK_STR(r.owner, "");
    r = route(A " 1.2.3.4:1@2 master - 0 0 1 connected [5->-\n", 5);
    CHECK_STR(r.owner, "");
    r = route("", 0);
    CHECK_STR(r.owner, "");
    CHECK_STR(r.target, "");
}

int main(void) {
    testOwnersAndRoles();
    testReplicaAndMigration();
    testLongLines();
    testMalformed();
    return Unit_Done("cluster_nodes");
}

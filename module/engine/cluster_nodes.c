/*
 * cluster_nodes.c - see cluster_nodes.h. Fields are (pointer, length)
 * views into the caller's text: a line's slot tokens are walked one by
 * one, never gathered into a table, so no line is too long.
 */
#include "engine/cluster_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Span {
    const char *p;
    size_t n;
} Span;

/* The next space-separated token of [*at, end), or n == 0 at the end. */
static Span nextToken(const char **at, const char *end) {
    const char *p = *at;
    while (p < end && *p == ' ') p++;
    const char *s = p;
    while (p < end && *p != ' ') p++;
    *at = p;
    return (Span){.p = s, .n = (size_t)(p - s)};
}

/* One node's line: the first eight fields; slots from `rest` on. */
typedef struct NodeLine {
    Span id;
    Span addr; /* ip:port, cut at '@' */
    Span flags;
    const char *rest;
    const char *end;
} NodeLine;

static int parseLine(const char *line, const char *end, NodeLine *n) {
    const char *at = line;
    Span field[8];
    for (int i = 0; i < 8; i++) {
        field[i] = nextToken(&at, end);
        if (field[i].n == 0) return 0;
    }
    n->id = field[0];
    n->addr = field[1];
    const char *cport = memchr(n->addr.p, '@', n->addr.n);
    if (cport) n->addr.n = (size_t)(cport - n->addr.p);
    n->flags = field[2];
    n->rest = at;
    n->end = end;
    return 1;
}

static int spanIs(Span s, const char *text, size_t len) {
    return s.n == len && !memcmp(s.p, text, len);
}

static int hasFlag(Span flags, const char *flag) {
    size_t len = strlen(flag);
    const char *p = flags.p, *end = flags.p + flags.n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if ((size_t)(stop - p) == len && !memcmp(p, flag, len)) return 1;
        p = stop + 1;
    }
    return 0;
}

/* A decimal number at the start of s (at most 5 digits: slots end at
 * 16383); *used is how many characters it took, 0 if none. */
static long long slotNumber(const char *s, size_t n, size_t *used) {
    long long v = 0;
    size_t i = 0;
    while (i < n && i < 6 && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
    *used = i;
    return v;
}

/* "lo" or "lo-hi" holds slot. */
static int rangeHolds(Span t, long long slot) {
    size_t used;
    long long lo = slotNumber(t.p, t.n, &used);
    if (used == 0) return 0;
    long long hi = lo;
    if (used < t.n) {
        if (t.p[used] != '-') return 0;
        size_t more;
        hi = slotNumber(t.p + used + 1, t.n - used - 1, &more);
        if (more == 0) return 0;
    }
    return lo <= slot && slot <= hi;
}

/* Whether n's slot list serves slot; when it marks the slot migrating
 * ("[slot->-id]"), *migrating_to is the target's id. */
static int walkSlots(const NodeLine *n, long long slot, Span *migrating_to) {
    char mark[32];
    int mlen = snprintf(mark, sizeof(mark), "[%lld->-", slot);
    int serves = 0;
    const char *at = n->rest;
    for (Span t = nextToken(&at, n->end); t.n > 0; t = nextToken(&at, n->end)) {
        if (t.p[0] != '[') {
            serves |= rangeHolds(t, slot);
        } else if (migrating_to && t.n > (size_t)mlen && !memcmp(t.p, mark, (size_t)mlen)) {
            const char *id = t.p + mlen;
            const char *close = memchr(id, ']', t.n - (size_t)mlen);
            migrating_to->p = id;
            migrating_to->n = close ? (size_t)(close - id) : t.n - (size_t)mlen;
        }
    }
    return serves;
}

static void copyAddr(char dst[CLUSTER_ADDR_LEN], Span addr) {
    snprintf(dst, CLUSTER_ADDR_LEN, "%.*s", (int)addr.n, addr.p);
}

void ClusterNodes_Route(const char *text, size_t len, long long slot, ClusterRoute *r) {
    memset(r, 0, sizeof(*r));
    const char *end = text + len;
    Span target_id = {.p = NULL, .n = 0};
    /* Two passes: the migration target's address is on another line. */
    for (int pass = 0; pass < 2; pass++) {
        for (const char *line = text; line < end;) {
            const char *nl = memchr(line, '\n', (size_t)(end - line));
            const char *stop = nl ? nl : end;
            if (stop > line && stop[-1] == '\r') stop--;
            NodeLine n;
            if (parseLine(line, stop, &n)) {
                int me = hasFlag(n.flags, "myself");
                if (pass == 0) {
                    if (me) r->me_replica = hasFlag(n.flags, "slave");
                    if (walkSlots(&n, slot, me ? &target_id : NULL)) {
                        copyAddr(r->owner, n.addr);
                        r->owner_is_me = me;
                    }
                } else if (spanIs(n.id, target_id.p, target_id.n)) {
                    copyAddr(r->target, n.addr);
                }
            }
            line = nl ? nl + 1 : end;
        }
        if (target_id.n == 0) break;
    }
}

/*
 * rai_load.c - a closed-loop Redis load generator for the benchmarks in
 * bench/: N connections, each with exactly one command in flight, every
 * round trip timed. One thread and epoll, as redis-benchmark, so that the
 * client costs as little CPU as possible on a machine with few cores (a
 * Python client of 32 threads would be the bottleneck, not the server).
 *
 *   rai_load --port P [--clients N] --cmd FILE [--cmd FILE ...]
 *            [--requests N | --seconds S] [--warmup N]
 *
 * Each FILE holds one command already encoded in RESP. Every connection
 * sends the commands in turn (A, B, A, B ... and B, A, B, A ... on
 * alternate rounds, so that order effects cancel out), which interleaves
 * the two sides of a ratio on the same connection. --warmup round trips per
 * connection are not recorded. --requests counts recorded round trips of
 * each command over all connections; --seconds bounds the recorded part by
 * time instead. An error reply stops the run (exit 1, the text on stderr).
 *
 * Prints one JSON object: per command, count, p50/p90/p99/mean latency in
 * microseconds and completions per second over the recorded window.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CMDS 8

typedef struct Cmd {
    char *bytes;
    size_t len;
    double *lat; /* recorded latencies, seconds */
    size_t n, cap;
} Cmd;

typedef struct Conn {
    int fd;
    unsigned round; /* commands sent so far, selects the next one */
    int cur;        /* index of the command in flight */
    size_t sent;    /* bytes of it written */
    double t0;
    long warm_left;
    char *in;
    size_t in_len, in_cap;
} Conn;

static Cmd cmds[MAX_CMDS];
static int ncmds;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rai_load: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void readCmd(const char *path, Cmd *c) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) die("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    if (n <= 0) die("%s: empty", path);
    c->bytes = malloc((size_t)n);
    if (c->bytes == NULL || fread(c->bytes, 1, (size_t)n, f) != (size_t)n) die("%s: cannot read", path);
    fclose(f);
    c->len = (size_t)n;
}

/* Length of one complete RESP2 reply at p, 0 when more bytes are needed. */
static size_t replyLen(const char *p, size_t len) {
    const char *eol = memmem(p, len, "\r\n", 2);
    if (eol == NULL) return 0;
    size_t head = (size_t)(eol - p) + 2;
    switch (p[0]) {
    case '+':
    case '-':
    case ':':
        return head;
    case '$': {
        long long n = strtoll(p + 1, NULL, 10);
        if (n < 0) return head;
        size_t total = head + (size_t)n + 2;
        return len >= total ? total : 0;
    }
    case '*': {
        long long n = strtoll(p + 1, NULL, 10);
        size_t off = head;
        for (long long i = 0; i < n; i++) {
            if (off >= len) return 0;
            size_t k = replyLen(p + off, len - off);
            if (k == 0) return 0;
            off += k;
        }
        return off;
    }
    default:
        die("unexpected reply byte 0x%02x", (unsigned char)p[0]);
    }
}

static void record(Cmd *c, double d) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 4096;
        c->lat = realloc(c->lat, c->cap * sizeof(double));
        if (c->lat == NULL) die("out of memory");
    }
    c->lat[c->n++] = d;
}

/* Writes what the socket takes of the command in flight; 1 when all sent. */
static int pump(Conn *k) {
    Cmd *c = &cmds[k->cur];
    while (k->sent < c->len) {
        ssize_t w = write(k->fd, c->bytes + k->sent, c->len - k->sent);
        if (w < 0) {
            if (errno == EAGAIN) return 0;
            if (errno == EINTR) continue;
            die("write: %s", strerror(errno));
        }
        k->sent += (size_t)w;
    }
    return 1;
}

static void start(Conn *k, int epfd) {
    /* A, B, C, then C, B, A on the next round, and so on. */
    unsigned r = k->round / (unsigned)ncmds, i = k->round % (unsigned)ncmds;
    k->cur = (r % 2 == 0) ? (int)i : ncmds - 1 - (int)i;
    k->round++;
    k->sent = 0;
    k->t0 = now();
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
    if (!pump(k)) ev.events |= EPOLLOUT;
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, k->fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
}

static int connectTo(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) die("connect: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static int cmpDouble(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *s, size_t n, double q) {
    size_t i = (size_t)(q * (double)n);
    return s[i < n ? i : n - 1];
}

typedef struct Options {
    int port, clients;
    long requests, warmup;
    double seconds;
} Options;

static Options parseOptions(int argc, char **argv) {
    Options o = {.clients = 1, .warmup = 20};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--port")) o.port = atoi(v);
        else if (!strcmp(a, "--clients")) o.clients = atoi(v);
        else if (!strcmp(a, "--requests")) o.requests = atol(v);
        else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
        else if (!strcmp(a, "--warmup")) o.warmup = atol(v);
        else if (!strcmp(a, "--cmd")) {
            if (ncmds == MAX_CMDS) die("too many --cmd");
            readCmd(v, &cmds[ncmds++]);
        } else die("unknown option %s", a);
    }
    if (argc % 2 == 0) die("options come in pairs");
    if (o.port <= 0 || o.clients <= 0 || ncmds == 0) {
        die("--port, --clients >= 1 and --cmd are required");
    }
    if ((o.requests > 0) == (o.seconds > 0)) die("give exactly one of --requests and --seconds");
    return o;
}

/* Reads what the server sent on k into k->in, until the socket would block. */
static void readAvailable(Conn *k) {
    for (;;) {
        if (k->in_cap - k->in_len < 65536) {
            k->in_cap = k->in_cap ? k->in_cap * 2 : 1 << 17;
            k->in = realloc(k->in, k->in_cap);
            if (k->in == NULL) die("out of memory");
        }
        ssize_t r = read(k->fd, k->in + k->in_len, k->in_cap - k->in_len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) die("connection closed by the server");
        k->in_len += (size_t)r;
    }
}

/* The JSON line bench_floor.py reads: per command, its latency percentiles and rate. */
static void report(int clients, double window) {
    printf("{\"clients\": %d, \"window_s\": %.4f, \"commands\": [", clients, window);
    for (int i = 0; i < ncmds; i++) {
        Cmd *c = &cmds[i];
        if (c->n == 0) die("command %d was never recorded", i);
        qsort(c->lat, c->n, sizeof(double), cmpDouble);
        double sum = 0;
        for (size_t j = 0; j < c->n; j++) sum += c->lat[j];
        printf("%s{\"count\": %zu, \"p50_us\": %.2f, \"p90_us\": %.2f, \"p99_us\": %.2f, "
               "\"mean_us\": %.2f, \"rps\": %.1f}",
               i ? ", " : "", c->n, pct(c->lat, c->n, .5) * 1e6, pct(c->lat, c->n, .9) * 1e6,
               pct(c->lat, c->n, .99) * 1e6, sum / (double)c->n * 1e6, (double)c->n / window);
    }
    printf("]}\n");
}

int main(int argc, char **argv) {
    Options o = parseOptions(argc, argv);
    int epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1: %s", strerror(errno));
    Conn *conns = calloc((size_t)o.clients, sizeof(Conn));
    if (conns == NULL) die("out of memory");
    for (int i = 0; i < o.clients; i++) {
        Conn *k = &conns[i];
        k->fd = connectTo(o.port);
        k->warm_left = o.warmup;
        k->round = (unsigned)i; /* connections start on different commands */
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, k->fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
    }
    double t_first = now(), t_last = 0, deadline = 0;
    /* connections past their warm-up: all of them at once with --warmup 0 */
    int warm = o.warmup > 0 ? 0 : o.clients;
    for (int i = 0; i < o.clients; i++) start(&conns[i], epfd);

    int stopped = 0;  /* connections that sent their last command */
    long recorded = 0, wanted = o.requests * ncmds;
    struct epoll_event evs[256];
    while (stopped < o.clients) {
        int n = epoll_wait(epfd, evs, 256, 10000);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("no reply for 10 s");
        for (int e = 0; e < n; e++) {
            Conn *k = evs[e].data.ptr;
            if ((evs[e].events & EPOLLOUT) && pump(k)) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
                epoll_ctl(epfd, EPOLL_CTL_MOD, k->fd, &ev);
            }
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            readAvailable(k);
            size_t m = replyLen(k->in, k->in_len);
            if (m == 0) continue;
            double t1 = now();
            if (k->in[0] == '-') die("error reply: %.*s", (int)(m - 2), k->in);
            if (m != k->in_len) die("more than one reply: pipelining is not expected");
            k->in_len = 0;
            if (k->warm_left > 0) {
                if (--k->warm_left == 0 && ++warm == o.clients) t_first = t1;
            } else if (warm == o.clients && !(deadline > 0 && t1 > deadline)) {
                record(&cmds[k->cur], t1 - k->t0);
                recorded++;
                t_last = t1;
            }
            if (warm == o.clients && o.seconds > 0 && deadline == 0) deadline = t_first + o.seconds;
            int done = (o.requests > 0 && recorded >= wanted) || (deadline > 0 && t1 > deadline);
            if (done) {
                epoll_ctl(epfd, EPOLL_CTL_DEL, k->fd, NULL);
                stopped++;
            } else {
                start(k, epfd);
            }
        }
    }
    report(o.clients, (o.seconds > 0 ? deadline : t_last) - t_first);
    for (int i = 0; i < o.clients; i++) close(conns[i].fd);
    return 0;
}

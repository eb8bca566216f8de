/*
 * iso_control.c - the control connections of the hosts, and the supervisor
 * thread that reads them (docs/isolation.md, "The protocol" and "The
 * failure table").
 *
 * Only the supervisor reads a control connection: a thread that asks
 * something of a host (create, info, a channel, the hello) sends its
 * request and sleeps on the slot's condition variable until the supervisor
 * hands it the reply with its request id. The supervisor also polls each
 * host's pidfd, so a host that dies while idle is seen at once, reaps it,
 * and publishes why it ended before anyone formats an error about it.
 * Frees are not sent by the thread that frees (Redis's main thread): a host
 * that reads nothing (stopped, or stuck) would let a few hundred of them
 * fill the socket and block that thread's send. They are queued on the slot
 * and the supervisor sends them, non-blocking, when the socket has room.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "core/run_gate.h"
#include "isolation/core/iso_spawn.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define BUILD_ID REDISAI_VERSION_STRING " " REDISAI_GIT_SHA

static int wake_fd = -1;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static IsoControlHooks hooks;

void IsoControl_SetHooks(const IsoControlHooks *h) {
    hooks = *h;
}

void IsoControl_Wake(void) {
    uint64_t one = 1;
    if (wake_fd >= 0 && write(wake_fd, &one, sizeof(one)) < 0) {
        /* a full counter already means "wake up" */
    }
}

/* --- frees --------------------------------------------------------------------- */

void IsoControl_QueueFree(IsoSlot *s, uint16_t type, uint64_t handle) {
    IsoFree *f = malloc(sizeof(*f));
    if (f == NULL) return; /* out of memory: the host keeps it until it restarts */
    *f = (IsoFree){.type = type, .handle = handle};
    int was_empty = s->frees == NULL;
    if (s->frees_tail) {
        s->frees_tail->next = f;
    } else {
        s->frees = f;
    }
    s->frees_tail = f;
    s->frees_queued++;
    /* A supervisor that saw the queue empty polls without POLLOUT. */
    if (was_empty) IsoControl_Wake();
}

/* The kernel calls a socket writable while its send buffer is at most a
 * quarter full: frees sent only then leave the rest to the requests of
 * threads that send blocking (a worker's channel, a create, SHUTDOWN). */
static int ctlHasRoom(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

static void popFree(IsoSlot *s) {
    IsoFree *f = s->frees;
    s->frees = f->next;
    if (s->frees == NULL) s->frees_tail = NULL;
    s->frees_queued--;
    free(f);
}

/* Sends queued frees, oldest first, while the control connection has room
 * (slot->mu held; each send non-blocking). One the socket refuses for any
 * reason but a full buffer is dropped: the host is ending, and its death
 * drops the rest. */
static void flushFrees(IsoSlot *s) {
    while (s->frees && s->ctl >= 0 && ctlHasRoom(s->ctl)) {
        IsoBuf b;
        IsoBuf_Init(&b);
        IsoBuf_U64(&b, s->frees->handle);
        int rc = b.oom ? 0 : Iso_TrySend(s->ctl, s->frees->type, ++s->next_request_id, b.data,
                                         b.len);
        IsoBuf_Free(&b);
        if (rc != 0 && errno == EAGAIN) return;
        popFree(s);
    }
}

static void dropFrees(IsoSlot *s) {
    while (s->frees) popFree(s);
}

/* --- requests ----------------------------------------------------------------- */

static void deadlineAfter(struct timespec *ts, long long ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* The control descriptor, duplicated so that a death (the supervisor
 * closes ctl) cannot make us send on a recycled descriptor number. */
static int ctlDup(IsoSlot *s) {
    pthread_mutex_lock(&s->mu);
    int fd = s->ctl >= 0 ? fcntl(s->ctl, F_DUPFD_CLOEXEC, 0) : -1;
    pthread_mutex_unlock(&s->mu);
    return fd;
}

int IsoControl_Request(IsoSlot *s, uint16_t type, const IsoBuf *payload, const int *fds, int nfds,
                       long long timeout_ms, IsoMsg *reply) {
    if (payload->oom) return -1;
    IsoPending p = {.type = type, .done = 0};
    pthread_mutex_lock(&s->mu);
    if (s->ctl < 0) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    p.id = ++s->next_request_id;
    p.next = s->pending;
    s->pending = &p;
    /* Not ahead of frees queued before it, while they fit: a create after
     * a DEL finds the old model's memory given back. */
    flushFrees(s);
    pthread_mutex_unlock(&s->mu);

    int fd = ctlDup(s);
    int sent = fd >= 0 && Iso_Send(fd, type, p.id, payload->data, payload->len, fds, nfds) == 0;
    if (fd >= 0) close(fd);

    struct timespec until;
    deadlineAfter(&until, timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (sent && p.done == 0) {
        if (pthread_cond_timedwait(&s->cond, &s->mu, &until) == ETIMEDOUT) break;
    }
    for (IsoPending **pp = &s->pending; *pp; pp = &(*pp)->next) {
        if (*pp == &p) {
            *pp = p.next;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!sent || p.done < 0) {
        if (p.done > 0) IsoMsg_Free(&p.msg);
        return -1;
    }
    if (p.done == 0) return 0;
    *reply = p.msg;
    return 1;
}

void IsoControl_Send(IsoSlot *s, uint16_t type, const IsoBuf *payload) {
    if (payload->oom) return;
    pthread_mutex_lock(&s->mu);
    uint64_t id = ++s->next_request_id;
    pthread_mutex_unlock(&s->mu);
    int fd = ctlDup(s);
    if (fd < 0) return;
    Iso_Send(fd, type, id, payload->data, payload->len, NULL, 0);
    close(fd);
}

/* --- deaths ------------------------------------------------------------------- */

void IsoControl_KillWithReason(IsoSlot *s, uint64_t generation, const char *reason,
                               const char *token) {
    pthread_mutex_lock(&s->mu);
    if (s->generation == generation && s->pid > 0 && s->dead_generation < generation) {
        if (s->kill_reason[0] == '\0') {
            snprintf(s->kill_reason, sizeof(s->kill_reason), "%s", reason);
            snprintf(s->last_exit_token, sizeof(s->last_exit_token), "%s", token);
        }
        IsoSpawn_Kill(s);
    }
    pthread_mutex_unlock(&s->mu);
}

void IsoControl_KillForProtocol(IsoSlot *s, uint64_t generation, const char *why) {
    char reason[400];
    snprintf(reason, sizeof(reason), "killed: protocol error: %s", why);
    IsoControl_KillWithReason(s, generation, reason, "killed_protocol");
}

void IsoControl_ExitError(IsoSlot *s, uint64_t generation, const char *doing, const char *key,
                          RAI_Error *err) {
    struct timespec until;
    deadlineAfter(&until, 5000);
    while (s->dead_generation < generation) {
        if (pthread_cond_timedwait(&s->cond, &s->mu, &until) == ETIMEDOUT) break;
    }
    const char *why = s->dead_generation >= generation ? s->last_exit : "reason not known yet";
    Error_SetFmt(err, "ERR %s backend process exited (%s) while %s %s", Backend_KindName(s->kind),
                 why, doing, key);
}

/* Reaps the host: waits for its pidfd to say it ended (the control EOF may
 * come a moment before), then waitid. 1 with code/status, or 0 when Redis
 * reaped it first (it waits for any child while it has a fork child). */
static int reap(IsoSlot *s, int *code, int *status) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (s->pidfd >= 0) {
        struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
        poll(&p, 1, 3000);
        if (waitid((idtype_t)P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG) != 0) return 0;
    } else {
        for (int i = 0; i < 300; i++) {
            if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG) != 0) return 0;
            if (si.si_pid) break;
            usleep(10000);
        }
    }
    if (si.si_pid == 0) return 0;
    *code = si.si_code;
    *status = si.si_status;
    return 1;
}

static void onDeath(IsoSlot *s) {
    pthread_mutex_lock(&s->mu);
    if (s->ctl < 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    close(s->ctl);
    s->ctl = -1;
    uint64_t gen = s->generation;
    if (hooks.channels_down) hooks.channels_down(s);
    pthread_mutex_unlock(&s->mu);

    int code = 0, status = 0;
    int reaped = reap(s, &code, &status);

    pthread_mutex_lock(&s->mu);
    char text[256], token[64];
    if (s->kill_reason[0]) {
        snprintf(text, sizeof(text), "%s", s->kill_reason);
        snprintf(token, sizeof(token), "%s", s->last_exit_token);
    } else if (reaped) {
        IsoSpawn_Describe(code, status, text, sizeof(text), token, sizeof(token));
    } else if (s->dying_signal) {
        IsoSpawn_Describe(CLD_KILLED, s->dying_signal, text, sizeof(text), token, sizeof(token));
    } else if (s->exiting_why[0]) {
        snprintf(text, sizeof(text), "exit (status reaped by Redis)");
        snprintf(token, sizeof(token), "exit_reaped");
    } else {
        snprintf(text, sizeof(text), "signal 9 SIGKILL (inferred)");
        snprintf(token, sizeof(token), "signal_9_SIGKILL");
    }
    snprintf(s->last_exit, sizeof(s->last_exit), "%s", text);
    snprintf(s->last_exit_token, sizeof(s->last_exit_token), "%s", token);
    s->last_exit_time = (long long)time(NULL);
    s->kill_reason[0] = '\0';
    s->dying_signal = 0;
    s->exiting_why[0] = '\0';
    if (s->pidfd >= 0) close(s->pidfd);
    s->pidfd = -1;
    pid_t pid = s->pid;
    s->pid = 0;
    s->channels = 0;
    s->dead_generation = gen;
    s->generation = gen + 1;
    s->state = ISO_DEAD;
    dropFrees(s);
    for (IsoPending *p = s->pending; p; p = p->next) {
        if (p->done == 0) p->done = -1;
    }
    int retired = s->retired;
    if (!retired && hooks.schedule_restart) hooks.schedule_restart(s);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    RunGate_Wake(); /* parked runs whose host will not be back in time fail now */
    RedisModule_Log(NULL, "warning", "%s backend host %s (pid %d) exited: %s%s",
                    Backend_KindName(s->kind), s->name, (int)pid, text,
                    strstr(text, "SIGKILL") ? " (out of memory or an operator: see the kernel log)"
                                            : "");
}

/* --- messages from a host ------------------------------------------------------ */

static void onMessage(IsoSlot *s, IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    switch (m->h.type) {
    case ISO_MSG_LOG: {
        uint32_t level = 0;
        const char *text = "";
        size_t len = 0;
        IsoReader_U32(&r, &level);
        IsoReader_StrView(&r, &text, &len, ISO_NAME_MAX);
        static const char *levels[] = {"debug", "verbose", "notice", "warning"};
        if (r.why == NULL) {
            RedisModule_Log(NULL, levels[level <= 3 ? level : 3], "%s host: %.*s", s->name,
                            (int)(len > 4000 ? 4000 : len), text);
        }
        IsoMsg_Free(m);
        return;
    }
    case ISO_MSG_DYING: {
        uint32_t sig = 0, code = 0;
        uint64_t addr = 0;
        IsoReader_U32(&r, &sig);
        IsoReader_U32(&r, &code);
        IsoReader_U64(&r, &addr);
        pthread_mutex_lock(&s->mu);
        if (r.why == NULL && sig < 65) s->dying_signal = (int)sig;
        pthread_mutex_unlock(&s->mu);
        RedisModule_Log(NULL, "warning",
                        "%s backend host %s: fatal signal %u (code %u, address 0x%llx)",
                        Backend_KindName(s->kind), s->name, sig, code, (unsigned long long)addr);
        IsoMsg_Free(m);
        return;
    }
    case ISO_MSG_EXITING: {
        const char *why = "";
        size_t len = 0;
        IsoReader_StrView(&r, &why, &len, 256);
        pthread_mutex_lock(&s->mu);
        snprintf(s->exiting_why, sizeof(s->exiting_why), "%.*s", (int)(r.why ? 0 : len), why);
        pthread_mutex_unlock(&s->mu);
        IsoMsg_Free(m);
        return;
    }
    default:
        break;
    }
    /* A reply: to whoever waits for its id. */
    pthread_mutex_lock(&s->mu);
    IsoPending *p = s->pending;
    while (p && p->id != m->h.id) p = p->next;
    if (p && p->done == 0) {
        p->msg = *m;
        p->done = 1;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    pthread_mutex_unlock(&s->mu);
    /* A late reply (its waiter timed out) is dropped. */
    IsoMsg_Free(m);
}

static void *supervisorMain(void *arg) {
    (void)arg;
    for (;;) {
        struct pollfd pfds[1 + 2 * ISO_MAX_HOSTS];
        IsoSlot *who[1 + 2 * ISO_MAX_HOSTS];
        uint64_t gens[1 + 2 * ISO_MAX_HOSTS];
        int n = 0;
        pfds[n] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
        who[n++] = NULL;
        for (int i = 0; i < ISO_MAX_HOSTS; i++) {
            IsoSlot *s = __atomic_load_n(&iso_slots[i], __ATOMIC_ACQUIRE);
            if (s == NULL) continue;
            pthread_mutex_lock(&s->mu);
            if (s->ctl >= 0) {
                gens[n] = s->generation;
                who[n] = s;
                short events = s->frees ? POLLIN | POLLOUT : POLLIN;
                pfds[n++] = (struct pollfd){.fd = s->ctl, .events = events};
                if (s->pidfd >= 0) {
                    gens[n] = s->generation;
                    who[n] = s;
                    pfds[n++] = (struct pollfd){.fd = s->pidfd, .events = POLLIN};
                }
            }
            pthread_mutex_unlock(&s->mu);
        }
        if (poll(pfds, (nfds_t)n, 1000) <= 0) continue;
        if (pfds[0].revents) {
            uint64_t v;
            if (read(wake_fd, &v, sizeof(v)) < 0) {
                /* nothing to drain */
            }
        }
        for (int i = 1; i < n; i++) {
            if (!pfds[i].revents) continue;
            IsoSlot *s = who[i];
            pthread_mutex_lock(&s->mu);
            int current = s->generation == gens[i] && s->ctl >= 0;
            int is_ctl = current && s->ctl == pfds[i].fd;
            pthread_mutex_unlock(&s->mu);
            if (!current) continue;
            if (!is_ctl) {
                onDeath(s); /* the pidfd: the process ended */
                continue;
            }
            if (pfds[i].revents & POLLOUT) {
                pthread_mutex_lock(&s->mu);
                if (s->generation == gens[i]) flushFrees(s);
                pthread_mutex_unlock(&s->mu);
                if (!(pfds[i].revents & ~POLLOUT)) continue;
            }
            IsoMsg m;
            char why[256];
            int rc = Iso_Recv(pfds[i].fd, &m, why, sizeof(why));
            if (rc == 1) {
                onMessage(s, &m);
            } else if (rc == -2) {
                IsoControl_KillForProtocol(s, gens[i], why);
            } else if (rc == 0 || (errno != EINTR && errno != EAGAIN)) {
                onDeath(s);
            }
        }
    }
    return NULL;
}

static void startThreads(void) {
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &attr, supervisorMain, NULL);
    pthread_attr_destroy(&attr);
}

void IsoControl_StartThreads(void) {
    pthread_once(&threads_once, startThreads);
}

/* --- hello ---------------------------------------------------------------------- */

/* The HELLO request: the build, the backend and every setting the host
 * needs, once; it never asks the core for them later. */
static void encodeHello(IsoSlot *s, IsoBuf *b) {
    IsoBuf_Init(b);
    IsoBuf_U32(b, ISO_PROTOCOL_VERSION);
    IsoBuf_CStr(b, BUILD_ID);
    IsoBuf_U32(b, (uint32_t)s->kind);
    IsoBuf_CStr(b, s->name);
    IsoBuf_CStr(b, s->real);
    IsoBuf_CStr(b, rai_config.backends_path);
    IsoBuf_U8(b, (uint8_t)(rai_config.backends_confined != 0));
    IsoBuf_I64(b, rai_config.threads_per_queue);
    IsoBuf_I64(b, rai_config.intra_op_parallelism);
    IsoBuf_I64(b, rai_config.inter_op_parallelism);
    IsoBuf_I64(b, rai_config.model_execution_timeout);
    IsoBuf_I64(b, rai_config.backend_memory_limit);
    IsoBuf_U64(b, (uint64_t)Iso_Api()->run_queue_count());
    IsoBuf_U32(b, RAI_LOG_NOTICE);
}

/* HELLO_OK's facts into the slot: 1, or 0 with why (a malformed reply, or
 * a restarted host whose backend is no longer the one first loaded). */
static int readHelloOk(IsoSlot *s, IsoReader *r, long long started, char *why, size_t whylen) {
    uint32_t pid, amaj, amin, asize, nmaj, nmin;
    uint8_t scripts, info;
    uint64_t load_us;
    const char *fw, *ver, *var;
    size_t fwl, verl, varl;
    IsoReader_U32(r, &pid);
    IsoReader_U32(r, &amaj);
    IsoReader_U32(r, &amin);
    IsoReader_U32(r, &asize);
    IsoReader_U32(r, &nmaj);
    IsoReader_U32(r, &nmin);
    IsoReader_StrView(r, &fw, &fwl, 63);
    IsoReader_StrView(r, &ver, &verl, 63);
    IsoReader_StrView(r, &var, &varl, 31);
    IsoReader_U8(r, &scripts);
    IsoReader_U8(r, &info);
    IsoReader_U64(r, &load_us);
    if (!IsoReader_Done(r)) {
        snprintf(why, whylen, "protocol error: HELLO_OK: %s", r->why);
        return 0;
    }
    if (s->framework[0] &&
        (strlen(s->version) != verl || memcmp(s->version, ver, verl) ||
         strlen(s->framework) != fwl || memcmp(s->framework, fw, fwl) ||
         strlen(s->variant) != varl || memcmp(s->variant, var, varl))) {
        snprintf(why, whylen, "start failed: backend changed from %s %s to %.*s %.*s",
                 s->framework, s->version, (int)fwl, fw, (int)verl, ver);
        return 0;
    }
    snprintf(s->framework, sizeof(s->framework), "%.*s", (int)fwl, fw);
    snprintf(s->version, sizeof(s->version), "%.*s", (int)verl, ver);
    snprintf(s->variant, sizeof(s->variant), "%.*s", (int)varl, var);
    s->has_scripts = scripts != 0;
    s->has_info = info != 0;
    s->last_start_seconds = (Iso_NowMs() - started) / 1000.0;
    return 1;
}

int IsoControl_Hello(IsoSlot *s, char *why, size_t whylen) {
    IsoBuf b;
    encodeHello(s, &b);
    IsoMsg m;
    long long started = Iso_NowMs();
    int rc = IsoControl_Request(s, ISO_MSG_HELLO, &b, NULL, 0, rai_config.backend_start_timeout,
                                &m);
    IsoBuf_Free(&b);
    pthread_mutex_lock(&s->mu);
    uint64_t gen = s->generation;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0) {
        snprintf(why, whylen, "%s backend host for %s did not answer within %lld ms",
                 Backend_KindName(s->kind), s->shown, rai_config.backend_start_timeout);
        char reason[128];
        snprintf(reason, sizeof(reason), "killed: no hello within %lld ms",
                 rai_config.backend_start_timeout);
        IsoControl_KillWithReason(s, gen, reason, "hello_timeout");
        return -1;
    }
    if (rc < 0) {
        pthread_mutex_lock(&s->mu);
        RAI_Error e;
        Error_Init(&e);
        IsoControl_ExitError(s, gen, "starting", s->shown, &e);
        pthread_mutex_unlock(&s->mu);
        snprintf(why, whylen, "%s", Error_Message(&e) + 4);
        Error_Clear(&e);
        return -1;
    }
    IsoReader r;
    IsoReader_Init(&r, m.payload, m.payload_len);
    int ok = 0;
    if (m.h.type == ISO_MSG_ERROR) {
        const char *text = "";
        size_t len = 0;
        IsoReader_StrView(&r, &text, &len, ISO_NAME_MAX);
        if (len > 4 && !strncmp(text, "ERR ", 4)) text += 4, len -= 4;
        snprintf(why, whylen, "%.*s", (int)len, text);
    } else if (m.h.type != ISO_MSG_HELLO_OK) {
        snprintf(why, whylen, "protocol error: %s in answer to HELLO", Iso_MsgTypeName(m.h.type));
    } else {
        ok = readHelloOk(s, &r, started, why, whylen);
    }
    IsoMsg_Free(&m);
    if (!ok) {
        char reason[300];
        snprintf(reason, sizeof(reason), "killed: start failed: %.200s", why);
        IsoControl_KillWithReason(s, gen, reason, "start_failed");
        return -1;
    }
    return 0;
}

/*
 * host_main.c - redisai-backend-host: runs one backend in a process of its
 * own and serves it to the core over a Unix socket (docs/isolation.md, "The
 * host process"). This file: argv, the startup hardening in the design's
 * order, signals, HELLO, and the control loop. The main thread reads every
 * control message as it comes and opens channels itself; creates, frees,
 * INFO and shutdown go, in the core's order, to one thread of their own
 * (the backend sees them one at a time, as on Redis's main thread
 * in-process), so that no channel waits behind a create that takes seconds.
 *
 *   redisai-backend-host --kind ONNX --name <name> --so <path> --ppid <pid> --fd 3
 *   redisai-backend-host --version      (the build id HELLO must carry)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "isolation/host/host.h"

#define BUILD_ID REDISAI_VERSION_STRING " " REDISAI_GIT_SHA

static void usage(const char *why) {
    fprintf(stderr,
            "redisai-backend-host: %s\n"
            "usage: redisai-backend-host --kind <TF|TORCH|ONNX> --name <name> --so <path> "
            "--ppid <pid> --fd <n>\n"
            "It is started by redisai.so for an isolated backend, not by hand.\n",
            why);
    _exit(ISO_HOST_EXIT_PROTOCOL);
}

/* --- startup hardening ----------------------------------------------------------- */

static void closeAbove(int keep) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0) == 0) return;
#endif
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        for (int fd = keep + 1; fd < 65536; fd++) close(fd);
        return;
    }
    int dfd = dirfd(d);
    int fds[1024], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024) {
        int fd = atoi(e->d_name);
        if (fd > keep && fd != dfd) fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++) close(fds[i]);
}

/* Prebuilt DYING datagram, sent from the fatal-signal handler: send() is
 * async-signal-safe, and a SEQPACKET datagram is atomic, so no lock. */
static unsigned char dying[sizeof(IsoHeader) + 4 + 4 + 8];

static void onFatal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    IsoHeader h = {.magic = ISO_MAGIC, .type = ISO_MSG_DYING, .inline_len = 16};
    uint32_t s = (uint32_t)sig, code = (uint32_t)si->si_code;
    uint64_t addr = (uint64_t)(uintptr_t)si->si_addr;
    memcpy(dying, &h, sizeof(h));
    memcpy(dying + sizeof(h), &s, 4);
    memcpy(dying + sizeof(h) + 4, &code, 4);
    memcpy(dying + sizeof(h) + 8, &addr, 8);
    send(HOST_CTL_FD, dying, sizeof(dying), MSG_NOSIGNAL | MSG_DONTWAIT);
    /* SA_RESETHAND restored the default: re-raise so the exit status tells
     * the signal (a fault would also re-fault on return; a raise() would not). */
    raise(sig);
}

static void sendExiting(const char *why) {
    unsigned char msg[sizeof(IsoHeader) + 4 + 64];
    size_t n = strlen(why);
    if (n > 64) n = 64;
    IsoHeader h = {.magic = ISO_MAGIC, .type = ISO_MSG_EXITING, .inline_len = (uint32_t)(4 + n)};
    uint32_t len = (uint32_t)n;
    memcpy(msg, &h, sizeof(h));
    memcpy(msg + sizeof(h), &len, 4);
    memcpy(msg + sizeof(h) + 4, why, n);
    send(HOST_CTL_FD, msg, sizeof(h) + 4 + n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void onTerm(int sig) {
    (void)sig;
    sendExiting("SIGTERM");
    _exit(0);
}

/* A framework that calls exit() tells the core first (Redis may reap the
 * host before the core can, see the failure table). */
static void atExit(void) {
    sendExiting("exit");
}

static void installSignals(void) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, onTerm);
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
    sigaltstack(&ss, NULL);
    struct sigaction sa = {.sa_sigaction = onFatal,
                           .sa_flags = SA_ONSTACK | SA_RESETHAND | SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL,
                                SIGSYS,  SIGTRAP, SIGXCPU, SIGXFSZ};
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) sigaction(fatal[i], &sa, NULL);
}

/* The design's start, steps 1-4, before anything is read from the core. */
static void harden(long ppid, int fd) {
    /* 1. Die with Redis; a Redis that died before the prctl is caught. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (ppid > 0 && (long)getppid() != ppid) {
        Host_Say("parent %ld is gone (parent now %ld); exiting", ppid, (long)getppid());
        _exit(ISO_HOST_EXIT_PROTOCOL);
    }
    /* 2. The connection at 3, nothing of Redis's above it. */
    if (fd != HOST_CTL_FD) {
        if (dup2(fd, HOST_CTL_FD) < 0) usage("--fd: not an open descriptor");
        close(fd);
    }
    int fl = fcntl(HOST_CTL_FD, F_GETFD);
    if (fl < 0) usage("--fd: not an open descriptor");
    fcntl(HOST_CTL_FD, F_SETFD, fl | FD_CLOEXEC);
    closeAbove(HOST_CTL_FD);
    setenv("REDISAI_BACKEND_HOST", "1", 1);
    /* 3. No privileges gained by exec; the OOM killer takes a host first. */
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    char name[16];
    snprintf(name, sizeof(name), "rai-host-%s", host.kind_name);
    prctl(PR_SET_NAME, name, 0, 0, 0);
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        if (write(oom, "1000", 4) != 4) Host_Say("cannot raise oom_score_adj: %s", strerror(errno));
        close(oom);
    }
    /* 4. */
    installSignals();
    atexit(atExit);
}

/* Step 6: limits before any backend code runs. */
/* RLIMIT_DATA counts every private writable mapping, touched or not: each
 * thread stack's 8 MiB, glibc's arenas, the framework's own code data. A
 * host limited to exactly BACKEND_MEMORY_LIMIT could not start ONNX
 * Runtime's thread pool under the 32 MB that in-process RedisAI users set
 * for ORT's allocator; the limit is that much above the setting, and the
 * ONNX backend's allocator limit still applies inside at the setting. */
#define HOST_DATA_HEADROOM_MB 512

static void applyLimits(void) {
    long long mb = host.config[RAI_CONFIG_BACKEND_MEMORY_LIMIT];
    if (mb > 0) {
        mb += HOST_DATA_HEADROOM_MB;
        struct rlimit rl = {.rlim_cur = (rlim_t)mb << 20, .rlim_max = (rlim_t)mb << 20};
        if (setrlimit(RLIMIT_DATA, &rl) != 0)
            Host_Say("cannot set RLIMIT_DATA to %lld MB: %s", mb, strerror(errno));
    }
    const char *core = getenv("REDISAI_BACKEND_HOST_CORE");
    if (!core || strcmp(core, "keep") != 0) {
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
    }
}

/* --- the control connection --------------------------------------------------------- */

static void recvOrExit(IsoMsg *m) {
    char why[256];
    int rc = Iso_Recv(HOST_CTL_FD, m, why, sizeof(why));
    if (rc == 0) {
        /* The core closed the connection: nothing more to serve. */
        _exit(0);
    }
    if (rc == -1) Host_ProtocolError("receive failed: %s", strerror(errno));
    if (rc == -2) Host_ProtocolError("%s", why);
}

static void sendOrExit(uint16_t type, uint64_t id, IsoBuf *b, const int *fds, int nfds) {
    if (b->oom) Host_ProtocolError("out of memory encoding %s", Iso_MsgTypeName(type));
    if (Iso_Send(HOST_CTL_FD, type, id, b->data, b->len, fds, nfds) != 0) {
        if (errno == EPIPE || errno == ECONNRESET) _exit(0);
        Host_ProtocolError("send failed: %s", strerror(errno));
    }
}

static void hello(void) {
    IsoMsg m;
    recvOrExit(&m);
    if (m.h.type != ISO_MSG_HELLO)
        Host_ProtocolError("%s before HELLO", Iso_MsgTypeName(m.h.type));
    IsoReader r;
    IsoReader_Init(&r, m.payload, m.payload_len);
    uint32_t version, kind, confined8 = 0;
    uint8_t confined;
    const char *build, *name;
    size_t build_len, name_len;
    IsoReader_U32(&r, &version);
    IsoReader_StrView(&r, &build, &build_len, 256);
    IsoReader_U32(&r, &kind);
    IsoReader_StrView(&r, &name, &name_len, 4096);
    IsoReader_StrDup(&r, &host.real, NULL, 4096);
    IsoReader_StrDup(&r, &host.backends_path, NULL, 4096);
    IsoReader_U8(&r, &confined);
    for (int i = 0; i < ISO_CONFIG_KEYS; i++) {
        int64_t v = 0;
        IsoReader_I64(&r, &v);
        host.config[i] = (long long)v;
    }
    IsoReader_U64(&r, &host.run_queue_count);
    IsoReader_U32(&r, &host.verbosity);
    if (!IsoReader_Done(&r)) Host_ProtocolError("HELLO: %s", r.why);
    confined8 = confined;
    host.confined = confined8 != 0;
    if (version != ISO_PROTOCOL_VERSION || build_len != strlen(BUILD_ID) ||
        memcmp(build, BUILD_ID, build_len) != 0) {
        char text[512];
        snprintf(text, sizeof(text),
                 "ERR %s backend host %s is from another build (%s, protocol %u), the module is "
                 "%.*s (protocol %u)", host.kind_name, host.so, BUILD_ID, ISO_PROTOCOL_VERSION,
                 (int)(build_len > 200 ? 200 : build_len), build, version);
        Iso_SendError(HOST_CTL_FD, m.h.id, text);
        Host_Say("%s", text + 4);
        _exit(ISO_HOST_EXIT_PROTOCOL);
    }
    if (kind != (uint32_t)host.kind || name_len != strlen(host.name) ||
        memcmp(name, host.name, name_len) != 0)
        Host_ProtocolError("HELLO: kind or name differ from the command line");
    applyLimits();

    RAI_Error err;
    Error_Init(&err);
    if (!Host_Load(&err)) {
        Iso_SendError(HOST_CTL_FD, m.h.id, Error_Message(&err));
        Host_Say("cannot load: %s", Error_Message(&err));
        _exit(1);
    }
    const RAI_BackendDescriptor *d = host.desc;
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U32(&b, (uint32_t)getpid());
    IsoBuf_U32(&b, d->abi_major);
    IsoBuf_U32(&b, d->abi_minor);
    IsoBuf_U32(&b, d->size);
    IsoBuf_U32(&b, host.note_major);
    IsoBuf_U32(&b, host.note_minor);
    IsoBuf_CStr(&b, d->framework);
    IsoBuf_CStr(&b, d->framework_version);
    IsoBuf_CStr(&b, d->variant);
    IsoBuf_U8(&b, Backend_HasScripts(d));
    IsoBuf_U8(&b, d->size >= RAI_DESCRIPTOR_SIZE_1_2 && d->info != NULL);
    IsoBuf_U64(&b, (uint64_t)(host.load_seconds * 1e6)); /* microseconds */
    sendOrExit(ISO_MSG_HELLO_OK, m.h.id, &b, NULL, 0);
    IsoBuf_Free(&b);
    IsoMsg_Free(&m);
}

static void freeNames(RAI_ModelNames *n) {
    for (size_t i = 0; n->inputs && i < n->ninputs; i++) free(n->inputs[i]);
    for (size_t i = 0; n->outputs && i < n->noutputs; i++) free(n->outputs[i]);
    free(n->inputs);
    free(n->outputs);
}

static void freeStrs(char **v, uint32_t n) {
    for (uint32_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

static char **readNames(IsoReader *r, uint32_t *n) {
    if (!IsoReader_Count(r, n, ISO_NAMES_MAX, 4)) return NULL;
    char **v = calloc(*n ? *n : 1, sizeof(char *));
    if (v == NULL) Host_ProtocolError("out of memory decoding names");
    for (uint32_t i = 0; i < *n; i++) IsoReader_StrDup(r, &v[i], NULL, ISO_NAME_MAX);
    return v;
}

static void modelCreate(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t handle;
    uint32_t device, nin = 0, nout = 0;
    int64_t device_id;
    char *key = NULL, *device_str = NULL;
    size_t key_len = 0;
    const char *blob;
    size_t blob_len;
    IsoReader_U64(&r, &handle);
    IsoReader_StrDup(&r, &key, &key_len, ISO_NAME_MAX);
    IsoReader_StrDup(&r, &device_str, NULL, 256);
    IsoReader_U32(&r, &device);
    IsoReader_I64(&r, &device_id);
    char **inputs = readNames(&r, &nin);
    char **outputs = readNames(&r, &nout);
    IsoReader_StrView(&r, &blob, &blob_len, ISO_BULK_MAX > UINT32_MAX ? UINT32_MAX : ISO_BULK_MAX);
    if (!IsoReader_Done(&r)) Host_ProtocolError("MODEL_CREATE: %s", r.why);
    if (device > RAI_DEVICE_GPU) Host_ProtocolError("MODEL_CREATE: device %u", device);
    if (HostHandles_Exists(handle))
        Host_ProtocolError("MODEL_CREATE: handle %llu exists", (unsigned long long)handle);

    RAI_ModelSpec spec = {
        .size = sizeof(spec),
        .device_str = device_str,
        .device = (RAI_DeviceKind)device,
        .device_id = device_id,
        .blob = blob,
        .blob_len = blob_len,
        .ninputs = nin,
        .inputs = (const char *const *)inputs,
        .noutputs = nout,
        .outputs = (const char *const *)outputs,
        .key = key,
        .key_len = key_len,
        /* The blob is a view of the request, gone after the reply. */
        .blob_kept = 0,
    };
    RAI_ModelNames names = {0};
    RAI_Error err;
    Error_Init(&err);
    void *model = host.desc->model_create(&spec, &names, &err);
    if (model == NULL) {
        Iso_SendError(HOST_CTL_FD, m->h.id, Error_Message(&err));
    } else if (HostHandles_Add(handle, HOST_HANDLE_MODEL, model) != 0) {
        host.desc->model_free(model);
        Iso_SendError(HOST_CTL_FD, m->h.id, RAI_ERR_HOST_OOM);
    } else {
        IsoBuf b;
        IsoBuf_Init(&b);
        IsoBuf_U8(&b, names.inputs || names.outputs);
        IsoBuf_U32(&b, names.inputs ? (uint32_t)names.ninputs : 0);
        for (size_t i = 0; names.inputs && i < names.ninputs; i++) IsoBuf_CStr(&b, names.inputs[i]);
        IsoBuf_U8(&b, names.outputs != NULL);
        IsoBuf_U32(&b, names.outputs ? (uint32_t)names.noutputs : 0);
        for (size_t i = 0; names.outputs && i < names.noutputs; i++)
            IsoBuf_CStr(&b, names.outputs[i]);
        sendOrExit(ISO_MSG_MODEL_CREATED, m->h.id, &b, NULL, 0);
        IsoBuf_Free(&b);
    }
    Error_Clear(&err);
    freeNames(&names);
    freeStrs(inputs, nin);
    freeStrs(outputs, nout);
    free(key);
    free(device_str);
}

static void modelFree(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t handle;
    IsoReader_U64(&r, &handle);
    if (!IsoReader_Done(&r)) Host_ProtocolError("MODEL_FREE: %s", r.why);
    void *model = HostHandles_Remove(handle, HOST_HANDLE_MODEL);
    if (model == NULL) Host_ProtocolError("MODEL_FREE: no handle %llu", (unsigned long long)handle);
    host.desc->model_free(model);
}

static void scriptCreate(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t handle;
    uint32_t device, nentry = 0;
    int64_t device_id;
    char *key = NULL, *device_str = NULL, *source = NULL;
    size_t key_len = 0, source_len = 0;
    IsoReader_U64(&r, &handle);
    IsoReader_StrDup(&r, &key, &key_len, ISO_NAME_MAX);
    IsoReader_StrDup(&r, &device_str, NULL, 256);
    IsoReader_U32(&r, &device);
    IsoReader_I64(&r, &device_id);
    char **entry_points = readNames(&r, &nentry);
    IsoReader_StrDup(&r, &source, &source_len, ISO_BULK_MAX > UINT32_MAX ? UINT32_MAX : ISO_BULK_MAX);
    if (!IsoReader_Done(&r)) Host_ProtocolError("SCRIPT_CREATE: %s", r.why);
    if (device > RAI_DEVICE_GPU) Host_ProtocolError("SCRIPT_CREATE: device %u", device);
    if (HostHandles_Exists(handle))
        Host_ProtocolError("SCRIPT_CREATE: handle %llu exists", (unsigned long long)handle);

    RAI_Error err;
    Error_Init(&err);
    if (!Backend_HasScripts(host.desc)) {
        /* The core knows from HELLO_OK; a core that asks anyway gets the
         * in-process refusal, not a dead host. */
        Error_SetFmt(&err, "ERR %s backend does not support scripts", host.kind_name);
        Iso_SendError(HOST_CTL_FD, m->h.id, Error_Message(&err));
    } else {
        RAI_ScriptSpec spec = {
            .size = sizeof(spec),
            .device_str = device_str,
            .device = (RAI_DeviceKind)device,
            .device_id = device_id,
            .source = source,
            .source_len = source_len,
            .nentry_points = nentry,
            .entry_points = (const char *const *)entry_points,
            .key = key,
            .key_len = key_len,
        };
        void *script = host.desc->script_create(&spec, &err);
        if (script == NULL) {
            Iso_SendError(HOST_CTL_FD, m->h.id, Error_Message(&err));
        } else if (HostHandles_Add(handle, HOST_HANDLE_SCRIPT, script) != 0) {
            host.desc->script_free(script);
            Iso_SendError(HOST_CTL_FD, m->h.id, RAI_ERR_HOST_OOM);
        } else {
            IsoBuf b;
            IsoBuf_Init(&b);
            sendOrExit(ISO_MSG_SCRIPT_CREATED, m->h.id, &b, NULL, 0);
            IsoBuf_Free(&b);
        }
    }
    Error_Clear(&err);
    freeStrs(entry_points, nentry);
    free(key);
    free(device_str);
    free(source);
}

static void scriptFree(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t handle;
    IsoReader_U64(&r, &handle);
    if (!IsoReader_Done(&r)) Host_ProtocolError("SCRIPT_FREE: %s", r.why);
    void *script = HostHandles_Remove(handle, HOST_HANDLE_SCRIPT);
    if (script == NULL)
        Host_ProtocolError("SCRIPT_FREE: no script handle %llu", (unsigned long long)handle);
    host.desc->script_free(script);
}

static void openChannel(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    uint64_t channel;
    IsoReader_U64(&r, &channel);
    if (!IsoReader_Done(&r)) Host_ProtocolError("OPEN_CHANNEL: %s", r.why);
    /* The fourth, when it comes, is the channel's ring (iso_ring.h). */
    if (m->nfds != 3 && m->nfds != 4)
        Host_ProtocolError("OPEN_CHANNEL: %d descriptors, want 3 or 4", m->nfds);
    char why[200];
    int rc = HostChannel_Open(channel, m->fds[0], m->fds[1], m->fds[2],
                              m->nfds == 4 ? m->fds[3] : -1, why, sizeof(why));
    m->fds[0] = m->fds[1] = m->fds[2] = m->fds[3] = -1; /* taken */
    if (rc == -2) Host_ProtocolError("OPEN_CHANNEL: %s", why);
    if (rc != 0) {
        /* A resource limit (threads, maps), not a malformed request: the
         * core gets the reason and the host serves on. */
        char text[256];
        snprintf(text, sizeof(text), "ERR backend host could not open a channel: %s", why);
        Iso_SendError(HOST_CTL_FD, m->h.id, text);
        return;
    }
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U64(&b, channel);
    sendOrExit(ISO_MSG_CHANNEL_OK, m->h.id, &b, NULL, 0);
    IsoBuf_Free(&b);
}

typedef struct InfoCollect {
    IsoBuf *b;
    uint32_t n;
} InfoCollect;

static void infoAdd(void *ctx, const char *field, const char *value) {
    InfoCollect *c = ctx;
    IsoBuf_CStr(c->b, field);
    IsoBuf_CStr(c->b, value);
    c->n++;
}

static void info(IsoMsg *m) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    IsoReader_U64(&r, &host.run_queue_count);
    if (!IsoReader_Done(&r)) Host_ProtocolError("INFO: %s", r.why);
    IsoBuf fields;
    IsoBuf_Init(&fields);
    InfoCollect c = {.b = &fields};
    if (host.desc->size >= RAI_DESCRIPTOR_SIZE_1_2 && host.desc->info)
        host.desc->info(&c, infoAdd);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U64(&b, (uint64_t)ru.ru_maxrss * 1024); /* peak RSS, bytes */
    IsoBuf_U64(&b, (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec);
    IsoBuf_U64(&b, (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec);
    IsoBuf_U32(&b, c.n);
    IsoBuf_Bytes(&b, fields.data, fields.len);
    if (fields.oom) b.oom = 1;
    sendOrExit(ISO_MSG_INFO_REPLY, m->h.id, &b, NULL, 0);
    IsoBuf_Free(&b);
    IsoBuf_Free(&fields);
}

/* --- the control thread and the work thread ------------------------------------ */

/* Messages for the work thread, oldest first. */
typedef struct Work {
    IsoMsg m;
    struct Work *next;
} Work;

static pthread_mutex_t work_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static Work *work_head, *work_tail;

/* Creates, frees, INFO and SHUTDOWN, one at a time in the order they came.
 * INFO too: a backend's info is never called during one of its creates,
 * as in-process (the core does not ask for it while it re-creates). */
static void *workMain(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&work_mu);
        while (work_head == NULL) pthread_cond_wait(&work_cond, &work_mu);
        Work *w = work_head;
        work_head = w->next;
        if (work_head == NULL) work_tail = NULL;
        pthread_mutex_unlock(&work_mu);
        switch (w->m.h.type) {
        case ISO_MSG_MODEL_CREATE: modelCreate(&w->m); break;
        case ISO_MSG_MODEL_FREE: modelFree(&w->m); break;
        case ISO_MSG_INFO: info(&w->m); break;
        case ISO_MSG_SCRIPT_CREATE: scriptCreate(&w->m); break;
        case ISO_MSG_SCRIPT_FREE: scriptFree(&w->m); break;
        default: /* ISO_MSG_SHUTDOWN */
            HostHandles_FreeAll();
            sendExiting("SHUTDOWN");
            _exit(0);
        }
        IsoMsg_Free(&w->m);
        free(w);
    }
    return NULL;
}

static void startWork(void) {
    pthread_t tid;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&tid, &attr, workMain, NULL) != 0) {
        Host_Say("cannot start the work thread");
        _exit(1);
    }
    pthread_attr_destroy(&attr);
}

static void queueWork(IsoMsg *m) {
    Work *w = malloc(sizeof(*w));
    if (w == NULL) Host_ProtocolError("out of memory queueing %s", Iso_MsgTypeName(m->h.type));
    w->m = *m;
    w->next = NULL;
    pthread_mutex_lock(&work_mu);
    if (work_tail) {
        work_tail->next = w;
    } else {
        work_head = w;
    }
    work_tail = w;
    pthread_cond_signal(&work_cond);
    pthread_mutex_unlock(&work_mu);
}

/* Replies of both threads go on the one control socket: each is one
 * SEQPACKET datagram, and the core routes them by request id. */
static void serve(void) {
    startWork();
    for (;;) {
        IsoMsg m;
        recvOrExit(&m);
        switch (m.h.type) {
        case ISO_MSG_OPEN_CHANNEL:
            openChannel(&m);
            IsoMsg_Free(&m);
            break;
        case ISO_MSG_MODEL_CREATE:
        case ISO_MSG_MODEL_FREE:
        case ISO_MSG_INFO:
        case ISO_MSG_SCRIPT_CREATE:
        case ISO_MSG_SCRIPT_FREE:
            queueWork(&m); /* taken: the work thread frees it */
            break;
        case ISO_MSG_SHUTDOWN:
            /* The last message: the work thread exits once what came
             * before it is done (the core kills a host that takes over 2 s). */
            queueWork(&m);
            for (;;) pause();
        default:
            Host_ProtocolError("%s is not allowed on the control connection",
                               Iso_MsgTypeName(m.h.type));
        }
    }
}

int main(int argc, char **argv) {
    const char *kind = NULL;
    long ppid = 0;
    int fd = -1;
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        /* The build id HELLO must carry: for tools and tests. */
        printf("redisai-backend-host %s protocol %d\n", BUILD_ID, ISO_PROTOCOL_VERSION);
        return 0;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--kind")) kind = argv[i + 1];
        else if (!strcmp(argv[i], "--name")) host.name = argv[i + 1];
        else if (!strcmp(argv[i], "--so")) host.so = argv[i + 1];
        else if (!strcmp(argv[i], "--ppid")) ppid = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--fd")) fd = (int)strtol(argv[i + 1], NULL, 10);
        else usage("unknown argument");
    }
    if (argc % 2 == 0) usage("arguments come in pairs");
    if (!kind || !host.name || !host.so || fd < 0 || ppid <= 0) usage("missing argument");
    if (!Backend_ParseKind(kind, &host.kind)) usage("--kind must be TF, TFLITE, TORCH or ONNX");
    host.kind_name = Backend_KindName(host.kind);
    HostShim_Init();
    harden(ppid, fd);
    hello();
    serve();
    return 0;
}

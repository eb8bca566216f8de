/*
 * fault_model.c - the fault-injection backend's models.
 *
 * A model's blob is a small text spec, one directive per line:
 *
 *     identity            first line: what create does (identity,
 *                         crash-on-create, hang-on-create, probe-host)
 *     inputs 2            inputs of the model (default 1, at most 16)
 *     outputs 2           outputs (default: as many as inputs, at most inputs)
 *     error <text>        the error text of magic 7 (default below)
 *     run-ms <n>          every run first sleeps n ms (0 to 60000): a slow
 *                         model whose runs stay in flight, never a fault
 *     crash-if-exists <p> a create crashes (SIGSEGV) while the file p exists:
 *                         a model stored fine whose re-creation crashes
 *     slow-if-exists <p>  while the file p exists a create writes the
 *                         file <p>.started, waits until p is gone (at
 *                         most 30 s), then writes <p>.done: a re-creation
 *                         the test holds and sees begin and end
 *
 * A run reads the first element of its first input (any integer or float
 * type) and does what that magic value says (fault_backend.h); any other
 * value, or an empty or STRING first input, is the identity: output i is a
 * copy of input i.
 *
 * A probe-host model (inside the isolation host only) reports what the host
 * gave it instead of running: every run fails with one text naming the key
 * its spec and its run info carried (ABI 1.5) and what redis_call and
 * model_execute answer when called from a thread of the backend's own,
 * which serves no request.
 */
#define _GNU_SOURCE /* strndup */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rai_run.h"
#include "fault_backend.h"

#define FAULT_MAX_TENSORS 16
#define FAULT_DEFAULT_ERROR "ERR fault backend: injected error"
#define FAULT_ALLOC_BLOCK ((size_t)64 << 20)

typedef struct FaultModel {
    size_t ninputs;
    size_t noutputs;
    char *error_text; /* host allocator */
    long run_ms;      /* run-ms */
    int probe;        /* probe-host */
    char *key;        /* probe-host: the spec's key, host allocator */
} FaultModel;

/* ---------------------------------------------------------------------- */
/* The faults themselves. Each fatal one never returns. */

static void fault_segv(void) {
    /* Through a volatile: a literal NULL store is undefined behaviour that
     * GCC turns into a trap (SIGILL), not the SIGSEGV a framework gives. */
    int *volatile p = NULL;
    *p = 1;
    raise(SIGSEGV); /* not reached */
}

static void fault_hang(void) {
    for (;;) {
        pause();
    }
}

/* Allocates and touches 64 MiB blocks until malloc fails (a memory limit
 * is set) or the kernel kills the process (none is). On failure every
 * block is given back, so that a limited host survives with its pid. */
static int fault_alloc(RAI_Error *err) {
    void *head = NULL;
    size_t blocks = 0;
    for (;;) {
        void *b = malloc(FAULT_ALLOC_BLOCK);
        if (!b) {
            break;
        }
        memset(b, 1, FAULT_ALLOC_BLOCK);
        *(void **)b = head;
        head = b;
        blocks++;
    }
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
    fault.host->error_set(err, "ERR fault backend: out of memory after %zu MiB",
                          blocks * (FAULT_ALLOC_BLOCK >> 20));
    return -1;
}

static void fault_garbage(void) {
    static const char junk[] = "\xff\xfe not a protocol message \xfd";
    /* fd 3 is the host's socket to the core (docs/isolation.md). */
    ssize_t n = write(3, junk, sizeof(junk) - 1);
    (void)n;
}

/* The core-to-host counters open the memfd (iso_ring.h): the reader's
 * count of that direction, the host's own, lies 64 bytes in. The core
 * reads it before each send; the host writes it again at each message it
 * takes, so it is written again and again. */
static void *ring_garbage_thread(void *arg) {
    (void)arg;
    for (int round = 0; round < 2000; round++) {
        FILE *f = fopen("/proc/self/maps", "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
            if (!strstr(line, "redisai-ring")) continue;
            unsigned long lo = strtoul(line, NULL, 16);
            volatile uint64_t *tail = (volatile uint64_t *)(lo + 64);
            *tail = 0xdead0000ULL;
        }
        if (f) fclose(f);
        usleep(1000);
    }
    return NULL;
}

static void fault_ring_garbage(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, ring_garbage_thread, NULL) == 0) pthread_detach(t);
}

static const char *magic_name(int magic) {
    switch (magic) {
    case FAULT_SEGV: return "SIGSEGV";
    case FAULT_ABORT: return "abort";
    case FAULT_HANG: return "hang";
    case FAULT_ALLOC: return "unbounded allocation";
    case FAULT_EXIT: return "_exit(3)";
    case FAULT_GARBAGE: return "garbage on fd 3";
    case FAULT_FPE: return "SIGFPE";
    case FAULT_KILL: return "SIGKILL";
    case FAULT_RING_GARBAGE: return "garbage in the ring";
    default: return "?";
    }
}

/* Whether this process may run the fault: every one in the host; in
 * Redis only with REDISAI_FAULT_BACKEND_IN_PROCESS=fatal, and never the
 * write on fd 3, which in Redis is some other file. */
static int fault_allowed(int magic, RAI_Error *err) {
    if (fault.mode == FAULT_MODE_HOST ||
        (fault.mode == FAULT_MODE_IN_PROCESS_FATAL && magic != FAULT_GARBAGE &&
         magic != FAULT_RING_GARBAGE)) {
        return 1;
    }
    fault.host->error_set(err,
                          "ERR fault backend: magic %d (%s) is fatal and runs only inside the "
                          "isolation host",
                          magic, magic_name(magic));
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The spec. */

static int parse_count(const char *word, const char *value, size_t *out, RAI_Error *err) {
    char *end = NULL;
    long n = strtol(value, &end, 10);
    if (end == value || *end != '\0' || n < 1 || n > FAULT_MAX_TENSORS) {
        fault.host->error_set(err, "ERR fault backend: '%s' wants a count from 1 to %d, got '%s'",
                              word, FAULT_MAX_TENSORS, value);
        return -1;
    }
    *out = (size_t)n;
    return 0;
}

/* The path argument of a *-if-exists directive: -1 (none given, err set),
 * 0 (no such file), 1 (it exists). */
static int path_exists(const char *directive, const char *path, RAI_Error *err) {
    if (path[0] == '\0') {
        fault.host->error_set(err, "ERR fault backend: '%s' wants a path", directive);
        return -1;
    }
    return access(path, F_OK) == 0;
}

/* Creates the empty file <path>.<what>, for a test to see. */
static void touch_mark(const char *path, const char *what) {
    char mark[4096];
    snprintf(mark, sizeof(mark), "%s.%s", path, what);
    FILE *f = fopen(mark, "w");
    if (f) {
        fclose(f);
    }
}

/* One line (NUL-terminated, without its newline) of the spec after the
 * first. */
static int parse_directive(FaultModel *m, char *line, int *have_outputs, RAI_Error *err) {
    char *rest = strchr(line, ' ');
    if (rest) {
        *rest++ = '\0';
    } else {
        rest = line + strlen(line);
    }
    if (strcmp(line, "inputs") == 0) {
        return parse_count(line, rest, &m->ninputs, err);
    }
    if (strcmp(line, "outputs") == 0) {
        *have_outputs = 1;
        return parse_count(line, rest, &m->noutputs, err);
    }
    if (strcmp(line, "error") == 0) {
        if (rest[0] == '\0') {
            fault.host->error_set(err, "ERR fault backend: 'error' wants a text");
            return -1;
        }
        fault.host->free(m->error_text);
        m->error_text = fault.host->strdup(rest);
        if (!m->error_text) {
            fault.host->error_set(err, "ERR fault backend: out of memory");
            return -1;
        }
        return 0;
    }
    if (strcmp(line, "run-ms") == 0) {
        char *end = NULL;
        long ms = strtol(rest, &end, 10);
        if (end == rest || *end != '\0' || ms < 0 || ms > 60000) {
            fault.host->error_set(err, "ERR fault backend: 'run-ms' wants 0 to 60000, got '%s'",
                                  rest);
            return -1;
        }
        m->run_ms = ms;
        return 0;
    }
    if (strcmp(line, "crash-if-exists") == 0) {
        /* A create that crashes only once the test has made the file: a
         * model stored fine whose re-creation after a restart crashes. */
        int exists = path_exists(line, rest, err);
        if (exists <= 0) {
            return exists;
        }
        if (fault.mode != FAULT_MODE_HOST) {
            fault.host->error_set(err, "ERR fault backend: 'crash-if-exists' is fatal and runs "
                                       "only inside the isolation host");
            return -1;
        }
        fault_segv();
    }
    if (strcmp(line, "slow-if-exists") == 0) {
        /* A create that takes as long as the test keeps the file (at most
         * 30 s), marked at its start and its end: a re-creation after a
         * restart the test can hold, and see begin and end. */
        int exists = path_exists(line, rest, err);
        if (exists <= 0) {
            return exists;
        }
        touch_mark(rest, "started");
        for (int i = 0; i < 30000 && access(rest, F_OK) == 0; i++) {
            usleep(1000);
        }
        touch_mark(rest, "done");
        return 0;
    }
    fault.host->error_set(err,
                          "ERR fault backend: unknown directive '%s' (expected inputs, outputs, "
                          "error, run-ms, crash-if-exists or slow-if-exists)",
                          line);
    return -1;
}

/* Parses text (a private, writable copy) into m; the first line's
 * behaviour goes to *create. */
static int parse_spec(FaultModel *m, char *text, char **create, RAI_Error *err) {
    int have_outputs = 0;
    char *save = NULL;
    *create = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') {
            line[len - 1] = '\0';
        }
        if (line[0] == '\0') {
            continue;
        }
        if (!*create) {
            *create = line;
            continue;
        }
        if (parse_directive(m, line, &have_outputs, err) != 0) {
            return -1;
        }
    }
    if (!*create) {
        fault.host->error_set(err, "ERR fault backend: empty model spec");
        return -1;
    }
    if (!have_outputs) {
        m->noutputs = m->ninputs;
    }
    if (m->noutputs > m->ninputs) {
        fault.host->error_set(err, "ERR fault backend: %zu outputs but only %zu inputs to copy",
                              m->noutputs, m->ninputs);
        return -1;
    }
    return 0;
}

static char *strndup_host(const char *s, size_t n) {
    char *c = fault.host->alloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

static char **make_names(const char *prefix, size_t n) {
    char **names = fault.host->calloc(n, sizeof(*names));
    if (!names) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s%zu", prefix, i);
        names[i] = fault.host->strdup(name);
        if (!names[i]) {
            for (size_t j = 0; j < i; j++) {
                fault.host->free(names[j]);
            }
            fault.host->free(names);
            return NULL;
        }
    }
    return names;
}

/* ---------------------------------------------------------------------- */
/* The descriptor's model functions. */

static void destroy(FaultModel *m) {
    if (!m) {
        return;
    }
    fault.host->free(m->error_text);
    fault.host->free(m->key);
    fault.host->free(m);
}

void fault_model_free(void *model) {
    if (model) {
        __atomic_sub_fetch(&fault.models, 1, __ATOMIC_RELAXED);
    }
    destroy(model);
}

static int fault_on_create(const char *create, RAI_Error *err) {
    int crash = strcmp(create, "crash-on-create") == 0;
    int hang = strcmp(create, "hang-on-create") == 0;
    if (strcmp(create, "identity") == 0) {
        return 0;
    }
    if (strcmp(create, "probe-host") == 0) {
        if (fault.mode == FAULT_MODE_HOST) {
            return 0;
        }
        /* A callback from a thread of its own would reach Redis unguarded. */
        fault.host->error_set(err, "ERR fault backend: 'probe-host' runs only inside the "
                                   "isolation host");
        return -1;
    }
    if (!crash && !hang) {
        fault.host->error_set(err,
                              "ERR fault backend: unknown model spec '%s' (expected identity, "
                              "crash-on-create or hang-on-create)",
                              create);
        return -1;
    }
    if (fault.mode == FAULT_MODE_IN_PROCESS) {
        fault.host->error_set(err,
                              "ERR fault backend: '%s' is fatal and runs only inside the isolation "
                              "host",
                              create);
        return -1;
    }
    if (crash) {
        fault_segv();
    }
    fault_hang();
    return -1; /* not reached */
}

void *fault_model_create(const RAI_ModelSpec *spec, RAI_ModelNames *names, RAI_Error *err) {
    const RAI_HostApi *host = fault.host;
    FaultModel *m = host->calloc(1, sizeof(*m));
    char *text = strndup(spec->blob ? spec->blob : "", spec->blob_len);
    char *create = NULL;
    *names = (RAI_ModelNames){0};
    if (!m || !text) {
        host->error_set(err, "ERR fault backend: out of memory");
        goto fail;
    }
    m->ninputs = 1;
    if (spec->blob_len && memchr(spec->blob, '\0', spec->blob_len)) {
        host->error_set(err, "ERR fault backend: the model spec is text, it holds a NUL byte");
        goto fail;
    }
    if (parse_spec(m, text, &create, err) != 0 || fault_on_create(create, err) != 0) {
        goto fail;
    }
    if (!m->error_text) {
        m->error_text = host->strdup(FAULT_DEFAULT_ERROR);
    }
    m->probe = strcmp(create, "probe-host") == 0;
    if (m->probe) {
        int has_key = spec->size >= offsetof(RAI_ModelSpec, key_len) + sizeof(size_t);
        m->key = strndup_host(has_key && spec->key ? spec->key : "",
                              has_key && spec->key ? spec->key_len : 0);
    }
    names->inputs = make_names("input", m->ninputs);
    names->outputs = make_names("output", m->noutputs);
    if (!m->error_text || !names->inputs || !names->outputs) {
        host->error_set(err, "ERR fault backend: out of memory");
        goto fail;
    }
    names->ninputs = m->ninputs;
    names->noutputs = m->noutputs;
    free(text);
    __atomic_add_fetch(&fault.models, 1, __ATOMIC_RELAXED);
    return m;

fail:
    /* Names already made are the core's to free only on success. */
    for (size_t i = 0; names->inputs && i < m->ninputs; i++) {
        host->free(names->inputs[i]);
    }
    for (size_t i = 0; names->outputs && i < m->noutputs; i++) {
        host->free(names->outputs[i]);
    }
    host->free(names->inputs);
    host->free(names->outputs);
    *names = (RAI_ModelNames){0};
    free(text);
    destroy(m);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* probe-host */

typedef struct ProbeCall {
    RAI_Tensor *input;
    RAI_Error *err;
    char reply[160];
} ProbeCall;

static void *probe_thread(void *arg) {
    ProbeCall *p = arg;
    const RAI_HostApi *host = fault.host;
    RAI_CallReply *r = host->redis_call("PING", NULL, NULL, 0);
    snprintf(p->reply, sizeof(p->reply), "%.*s", r && r->str ? (int)r->len : 0,
             r && r->str ? r->str : "");
    host->call_reply_free(r);
    RAI_Tensor *out = NULL;
    if (host->model_execute("m", 1, &p->input, 1, &out, 1, p->err) == 0 && out) {
        host->tensor_release(out);
    }
    return NULL;
}

static int fault_probe(const FaultModel *m, const RAI_RunInfo *info, RAI_Tensor *input,
                       RAI_Error *err) {
    const RAI_HostApi *host = fault.host;
    ProbeCall p = {.input = input, .err = err};
    pthread_t tid;
    if (pthread_create(&tid, NULL, probe_thread, &p) != 0) {
        host->error_set(err, "ERR fault backend: cannot start a thread");
        return -1;
    }
    pthread_join(tid, NULL);
    char *executed = host->error_take(err); /* what model_execute recorded, if anything */
    int has_key = info->size >= offsetof(RAI_RunInfo, key_len) + sizeof(size_t);
    host->error_set(err,
                    "ERR fault backend probe: create key '%s', run key '%.*s', from a thread of "
                    "its own: redis_call '%s', model_execute '%s'",
                    m->key ? m->key : "", has_key && info->key ? (int)info->key_len : 0,
                    has_key && info->key ? info->key : "", p.reply,
                    executed ? executed : "(no error)");
    host->free(executed);
    return -1;
}

/* The magic value of a run: the first element of the first input, or 0
 * (identity) when it has none or no number. */
static int read_magic(RAI_Tensor *t) {
    const RAI_HostApi *host = fault.host;
    RAI_DType dt = host->tensor_dtype(t);
    if (host->tensor_length(t) == 0) {
        return 0;
    }
    const void *d = host->tensor_data(t);
    double v = 0;
    if (dt.code == RAI_DTYPE_FLOAT && dt.bits == 32) {
        v = *(const float *)d;
    } else if (dt.code == RAI_DTYPE_FLOAT && dt.bits == 64) {
        v = *(const double *)d;
    } else if (dt.code == RAI_DTYPE_INT && dt.bits == 8) {
        v = *(const int8_t *)d;
    } else if (dt.code == RAI_DTYPE_INT && dt.bits == 16) {
        v = *(const int16_t *)d;
    } else if (dt.code == RAI_DTYPE_INT && dt.bits == 32) {
        v = *(const int32_t *)d;
    } else if (dt.code == RAI_DTYPE_INT && dt.bits == 64) {
        v = (double)*(const int64_t *)d;
    } else if (dt.code == RAI_DTYPE_UINT && dt.bits == 8) {
        v = *(const uint8_t *)d;
    } else if (dt.code == RAI_DTYPE_UINT && dt.bits == 16) {
        v = *(const uint16_t *)d;
    } else {
        return 0;
    }
    /* Only whole values in the magic range count (NaN and huge values too
     * are the identity, without an out-of-range conversion). */
    if (v >= FAULT_SEGV && v <= FAULT_KILL && v == (double)(int)v) {
        return (int)v;
    }
    return v == FAULT_RING_GARBAGE ? FAULT_RING_GARBAGE : 0;
}

static RAI_Tensor *copy_tensor(RAI_Tensor *t) {
    const RAI_HostApi *host = fault.host;
    RAI_DType dt = host->tensor_dtype(t);
    const int64_t *dims = host->tensor_dims(t);
    int ndims = host->tensor_ndims(t);
    if (dt.code != RAI_DTYPE_STRING) {
        RAI_Tensor *out = host->tensor_create(dt, dims, ndims);
        if (out) {
            memcpy(host->tensor_data(out), host->tensor_data(t), host->tensor_byte_size(t));
        }
        return out;
    }
    size_t n = host->tensor_length(t);
    const char **elems = host->alloc((n ? n : 1) * sizeof(*elems));
    size_t *lens = host->alloc((n ? n : 1) * sizeof(*lens));
    RAI_Tensor *out = NULL;
    if (elems && lens) {
        for (size_t i = 0; i < n; i++) {
            elems[i] = host->tensor_string_at(t, i, &lens[i]);
        }
        out = host->tensor_create_strings(dims, ndims, elems, lens);
    }
    host->free(elems);
    host->free(lens);
    return out;
}

int fault_model_run(void *model, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                    size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err) {
    const RAI_HostApi *host = fault.host;
    FaultModel *m = model;
    if (RAI_CheckRunCounts(host, err, ninputs, m->ninputs, noutputs, m->noutputs) != 0) {
        return -1;
    }
    if (m->probe) {
        return fault_probe(m, info, inputs[0], err);
    }
    if (m->run_ms > 0) {
        usleep((useconds_t)(m->run_ms * 1000));
    }
    int magic = read_magic(inputs[0]);
    if (magic == FAULT_ERROR) {
        host->error_set(err, "%s", m->error_text);
        return -1;
    }
    if (((magic >= FAULT_SEGV && magic <= FAULT_KILL) || magic == FAULT_RING_GARBAGE) &&
        !fault_allowed(magic, err)) {
        return -1;
    }
    switch (magic) {
    case FAULT_SEGV: fault_segv(); break;
    case FAULT_ABORT: abort();
    case FAULT_HANG: fault_hang(); break;
    case FAULT_ALLOC: return fault_alloc(err);
    case FAULT_EXIT: _exit(3);
    case FAULT_GARBAGE: fault_garbage(); break; /* then the identity: the core must notice */
    case FAULT_FPE: raise(SIGFPE); break;
    case FAULT_KILL: raise(SIGKILL); break;
    case FAULT_RING_GARBAGE: fault_ring_garbage(); break; /* then the identity */
    default: break;
    }
    for (size_t i = 0; i < noutputs; i++) {
        outputs[i] = copy_tensor(inputs[i]);
        if (!outputs[i]) {
            host->error_set(err, "ERR fault backend: could not create output %zu", i);
            return -1;
        }
    }
    return 0;
}

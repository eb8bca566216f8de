/*
 * rai_floor.c - the in-process floor of a model run: a backend .so loaded
 * through the same ABI the module uses (backend_abi.h), no Redis at all.
 *
 * The model is created on the main thread and run N times on one worker
 * thread, on the same input tensors, as a run-queue worker of the module
 * would (worker_index 0, THREADS_PER_QUEUE 1); each run's outputs are
 * released as the module releases them. Prints one JSON object: latency
 * percentiles of a run and single-thread throughput (runs / wall time of
 * the timed loop). What a Redis round trip adds on top of this is what the
 * benchmarks in bench/ measure against it.
 *
 *   rai_floor --so BACKEND.so --kind TF|TORCH|ONNX --model BLOB
 *             --input DTYPE:D1xD2x...:FILE [--input ...] [--in-name N ...]
 *             [--out-name N ...] [--noutputs K] [--iters N] [--warmup N]
 *             [--intra N] [--inter N] [--timeout-ms N] [--dump-output FILE]
 *
 * DTYPE is FLOAT, DOUBLE, INT32, INT64 or UINT8; FILE holds the raw
 * little-endian bytes (exactly product(dims) elements). TF needs the
 * input and output names; the other backends read them from the model.
 * --intra / --inter are what INTRA_OP_PARALLELISM / INTER_OP_PARALLELISM
 * give the backend (0: the backend's default, as in the module);
 * --timeout-ms is MODEL_EXECUTION_TIMEOUT (0, the default here: none; the
 * module's default is 5000, which ONNX runs watch).
 *
 * The host table is a small one of its own (host_api.c of the isolation
 * host is tied to its channel and log socket): libc memory with 64-byte
 * aligned tensor data, errors as text, no calls back into Redis.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redisai/backend_abi.h"

#define MAX_IO 16
#define MAX_DIMS 8

/* ------------------------------- host tensors ------------------------------ */

struct RAI_Tensor {
    int refcount; /* atomic: outputs may be released on any thread */
    RAI_DType dtype;
    int ndims;
    int64_t dims[MAX_DIMS];
    size_t length;
    size_t nbytes;
    void *data;
    void (*deleter)(void *ctx);
    void *deleter_ctx;
    uint64_t *offsets; /* STRING only */
};

struct RAI_Error {
    char *msg;
};

static RAI_Tensor *shell(RAI_DType dt, const int64_t *dims, int ndims) {
    if (ndims < 0 || ndims > MAX_DIMS) return NULL;
    RAI_Tensor *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    t->refcount = 1;
    t->dtype = dt;
    t->ndims = ndims;
    t->length = 1;
    for (int i = 0; i < ndims; i++) {
        t->dims[i] = dims[i];
        t->length *= (size_t)(dims[i] > 0 ? dims[i] : 0);
    }
    return t;
}

static RAI_Tensor *tensorCreate(RAI_DType dt, const int64_t *dims, int ndims) {
    if (dt.code == RAI_DTYPE_STRING) return NULL;
    RAI_Tensor *t = shell(dt, dims, ndims);
    if (t == NULL) return NULL;
    t->nbytes = t->length * (dt.bits / 8);
    /* 64-byte aligned: the best case for every framework (TF copies
     * anything less aligned), which is what a floor is. */
    if (posix_memalign(&t->data, 64, t->nbytes ? t->nbytes : 64) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

static RAI_Tensor *tensorAdopt(RAI_DType dt, const int64_t *dims, int ndims, void *data,
                               size_t nbytes, void (*deleter)(void *), void *ctx) {
    if (dt.code == RAI_DTYPE_STRING) return NULL;
    RAI_Tensor *t = shell(dt, dims, ndims);
    if (t == NULL) return NULL;
    t->data = data;
    t->nbytes = nbytes;
    t->deleter = deleter;
    t->deleter_ctx = ctx;
    return t;
}

static RAI_Tensor *tensorCreateStrings(const int64_t *dims, int ndims, const char *const *elems,
                                       const size_t *lens) {
    RAI_Tensor *t = shell((RAI_DType){RAI_DTYPE_STRING, 8}, dims, ndims);
    if (t == NULL) return NULL;
    size_t total = 0;
    for (size_t i = 0; i < t->length; i++) total += lens[i] + 1;
    t->data = malloc(total ? total : 1);
    t->offsets = malloc(sizeof(uint64_t) * (t->length ? t->length : 1));
    if (t->data == NULL || t->offsets == NULL) {
        free(t->data);
        free(t->offsets);
        free(t);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < t->length; i++) {
        t->offsets[i] = off;
        memcpy((char *)t->data + off, elems[i], lens[i]);
        ((char *)t->data)[off + lens[i]] = '\0';
        off += lens[i] + 1;
    }
    t->nbytes = total;
    return t;
}

static RAI_Tensor *tensorRetain(RAI_Tensor *t) {
    __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

static void tensorRelease(RAI_Tensor *t) {
    if (t == NULL || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (t->deleter) {
        t->deleter(t->deleter_ctx);
    } else {
        free(t->data);
    }
    free(t->offsets);
    free(t);
}

static RAI_DType tensorDtype(const RAI_Tensor *t) { return t->dtype; }
static int tensorNdims(const RAI_Tensor *t) { return t->ndims; }
static const int64_t *tensorDims(const RAI_Tensor *t) { return t->dims; }
static size_t tensorLength(const RAI_Tensor *t) { return t->length; }
static size_t tensorByteSize(const RAI_Tensor *t) { return t->nbytes; }
static void *tensorData(RAI_Tensor *t) { return t->data; }

static const char *tensorStringAt(const RAI_Tensor *t, size_t i, size_t *len) {
    if (t->offsets == NULL || i >= t->length) return NULL;
    const char *s = (const char *)t->data + t->offsets[i];
    if (len) *len = strlen(s);
    return s;
}

/* ------------------------- diagnostics and settings ------------------------ */

static long long config[RAI_CONFIG_BACKEND_MEMORY_LIMIT + 1] = {
    [RAI_CONFIG_THREADS_PER_QUEUE] = 1,
};

static void hostLog(RAI_LogLevel level, const char *fmt, ...) {
    if (level < RAI_LOG_WARNING) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("backend: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void hostErrorSet(RAI_Error *err, const char *fmt, ...) {
    if (err == NULL || err->msg != NULL) return; /* first one wins, as in the core */
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&err->msg, fmt, ap) < 0) err->msg = NULL;
    va_end(ap);
}

static char *hostErrorTake(RAI_Error *err) {
    char *m = err ? err->msg : NULL;
    if (err) err->msg = NULL;
    return m;
}

static long long hostConfigGet(RAI_ConfigKey key) {
    return (unsigned)key < sizeof(config) / sizeof(config[0]) ? config[key] : 0;
}

static RAI_CallReply *hostRedisCall(const char *cmd, const char *const *args, const size_t *lens,
                                    size_t nargs) {
    (void)cmd, (void)args, (void)lens, (void)nargs;
    static const char text[] = "ERR no Redis in the floor harness";
    RAI_CallReply *r = calloc(1, sizeof(*r));
    if (r == NULL) abort();
    r->type = RAI_REPLY_ERROR;
    r->str = text;
    r->len = sizeof(text) - 1;
    return r;
}

static void hostCallReplyFree(RAI_CallReply *r) { free(r); }

static int hostModelExecute(const char *key, size_t key_len, RAI_Tensor *const *inputs,
                            size_t ninputs, RAI_Tensor **outputs, size_t noutputs,
                            RAI_Error *err) {
    (void)key, (void)key_len, (void)inputs, (void)ninputs, (void)outputs, (void)noutputs;
    hostErrorSet(err, "ERR no Redis in the floor harness");
    return -1;
}

static size_t hostRunQueueCount(void) { return 1; }
static void *hostCalloc(size_t n, size_t m) { return calloc(n, m); }

static const RAI_HostApi api = {
    .abi_major = RAI_ABI_MAJOR,
    .abi_minor = RAI_ABI_MINOR,
    .size = sizeof(RAI_HostApi),
    .alloc = malloc,
    .calloc = hostCalloc,
    .realloc = realloc,
    .free = free,
    .strdup = strdup,
    .log = hostLog,
    .error_set = hostErrorSet,
    .config_get = hostConfigGet,
    .tensor_create = tensorCreate,
    .tensor_adopt = tensorAdopt,
    .tensor_create_strings = tensorCreateStrings,
    .tensor_retain = tensorRetain,
    .tensor_release = tensorRelease,
    .tensor_dtype = tensorDtype,
    .tensor_ndims = tensorNdims,
    .tensor_dims = tensorDims,
    .tensor_length = tensorLength,
    .tensor_byte_size = tensorByteSize,
    .tensor_data = tensorData,
    .tensor_string_at = tensorStringAt,
    .redis_call = hostRedisCall,
    .call_reply_free = hostCallReplyFree,
    .model_execute = hostModelExecute,
    .error_take = hostErrorTake,
    .run_queue_count = hostRunQueueCount,
};

/* --------------------------------- options -------------------------------- */

typedef struct Options {
    const char *so;
    const char *kind;
    const char *model;
    const char *dump_output;
    const char *in_names[MAX_IO];
    size_t nin_names;
    const char *out_names[MAX_IO];
    size_t nout_names;
    RAI_Tensor *inputs[MAX_IO];
    size_t ninputs;
    size_t noutputs; /* 0: as many as the model names */
    long iters;
    long warmup;
} Options;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rai_floor: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static char *readFile(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) die("%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) die("%s: cannot seek", path);
    long n = ftell(f);
    if (n < 0) die("%s: cannot tell its size", path);
    rewind(f);
    char *buf = malloc(n ? (size_t)n : 1);
    if (buf == NULL) die("out of memory reading %s", path);
    if (n && fread(buf, 1, (size_t)n, f) != (size_t)n) die("%s: short read", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int parseDType(const char *s, size_t len, RAI_DType *dt) {
    static const struct {
        const char *name;
        RAI_DType dt;
    } names[] = {
        {"FLOAT", {RAI_DTYPE_FLOAT, 32}}, {"DOUBLE", {RAI_DTYPE_FLOAT, 64}},
        {"INT32", {RAI_DTYPE_INT, 32}},   {"INT64", {RAI_DTYPE_INT, 64}},
        {"UINT8", {RAI_DTYPE_UINT, 8}},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && !strncmp(s, names[i].name, len)) {
            *dt = names[i].dt;
            return 1;
        }
    }
    return 0;
}

/* DTYPE:D1xD2x...:FILE */
static RAI_Tensor *parseInput(const char *spec) {
    const char *c1 = strchr(spec, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL) die("--input %s: expected DTYPE:DIMS:FILE", spec);
    RAI_DType dt;
    if (!parseDType(spec, (size_t)(c1 - spec), &dt)) die("--input %s: unknown dtype", spec);
    int64_t dims[MAX_DIMS];
    int ndims = 0;
    const char *p = c1 + 1;
    while (p < c2) {
        if (ndims == MAX_DIMS) die("--input %s: more than %d dims", spec, MAX_DIMS);
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0 || (end != c2 && *end != 'x')) die("--input %s: bad dims", spec);
        dims[ndims++] = d;
        p = end == c2 ? c2 : end + 1;
    }
    RAI_Tensor *t = tensorCreate(dt, dims, ndims);
    if (t == NULL) die("--input %s: cannot create the tensor", spec);
    size_t len;
    char *bytes = readFile(c2 + 1, &len);
    if (len != t->nbytes) die("--input %s: file has %zu bytes, the shape needs %zu", spec, len,
                              t->nbytes);
    memcpy(t->data, bytes, len);
    free(bytes);
    return t;
}

static long parseCount(const char *opt, const char *v, long min) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min) die("%s %s: expected an integer >= %ld", opt, v, min);
    return n;
}

static void parseArgs(int argc, char **argv, Options *o) {
    *o = (Options){.iters = 1000, .warmup = 100};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) die("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--so")) {
            o->so = v;
        } else if (!strcmp(a, "--kind")) {
            o->kind = v;
        } else if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--dump-output")) {
            o->dump_output = v;
        } else if (!strcmp(a, "--in-name")) {
            if (o->nin_names == MAX_IO) die("too many --in-name");
            o->in_names[o->nin_names++] = v;
        } else if (!strcmp(a, "--out-name")) {
            if (o->nout_names == MAX_IO) die("too many --out-name");
            o->out_names[o->nout_names++] = v;
        } else if (!strcmp(a, "--input")) {
            if (o->ninputs == MAX_IO) die("too many --input");
            o->inputs[o->ninputs++] = parseInput(v);
        } else if (!strcmp(a, "--noutputs")) {
            o->noutputs = (size_t)parseCount(a, v, 1);
        } else if (!strcmp(a, "--iters")) {
            o->iters = parseCount(a, v, 1);
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = parseCount(a, v, 0);
        } else if (!strcmp(a, "--intra")) {
            config[RAI_CONFIG_INTRA_OP_PARALLELISM] = parseCount(a, v, 0);
        } else if (!strcmp(a, "--inter")) {
            config[RAI_CONFIG_INTER_OP_PARALLELISM] = parseCount(a, v, 0);
        } else if (!strcmp(a, "--timeout-ms")) {
            config[RAI_CONFIG_MODEL_EXECUTION_TIMEOUT] = parseCount(a, v, 0);
        } else {
            die("unknown option %s", a);
        }
    }
    if (!o->so || !o->kind || !o->model) die("--so, --kind and --model are required");
    if (o->ninputs == 0) die("at least one --input is required");
}

static RAI_BackendKind parseKind(const char *s) {
    if (!strcmp(s, "TF")) return RAI_BACKEND_TF;
    if (!strcmp(s, "TORCH")) return RAI_BACKEND_TORCH;
    if (!strcmp(s, "ONNX")) return RAI_BACKEND_ONNX;
    die("--kind %s: expected TF, TORCH or ONNX", s);
}

/* ---------------------------------- the run -------------------------------- */

typedef struct Job {
    const RAI_BackendDescriptor *desc;
    void *model;
    const Options *o;
    size_t noutputs;
    double *lat; /* seconds, iters of them */
    double wall; /* seconds of the timed loop */
    char *error;
} Job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One run, outputs released as the module does after replying. Returns 0,
 * or -1 with job->error set. dump (may be NULL) receives output 0. */
static int runOnce(Job *job, const RAI_RunInfo *info, FILE *dump) {
    RAI_Tensor *outs[MAX_IO] = {0};
    RAI_Error err = {0};
    int rc = job->desc->model_run(job->model, info, job->o->inputs, job->o->ninputs, outs,
                                  job->noutputs, &err);
    if (rc != 0) job->error = err.msg ? err.msg : strdup("model_run failed without a message");
    if (rc == 0 && dump && outs[0]) fwrite(outs[0]->data, 1, outs[0]->nbytes, dump);
    for (size_t i = 0; i < job->noutputs; i++) tensorRelease(outs[i]);
    return rc;
}

static void *worker(void *arg) {
    Job *job = arg;
    RAI_RunInfo info = {.size = sizeof(info), .worker_index = 0, .key = "floor", .key_len = 5};
    for (long i = 0; i < job->o->warmup; i++) {
        if (runOnce(job, &info, NULL) != 0) return NULL;
    }
    double start = now();
    for (long i = 0; i < job->o->iters; i++) {
        double t0 = now();
        if (runOnce(job, &info, NULL) != 0) return NULL;
        job->lat[i] = now() - t0;
    }
    job->wall = now() - start;
    if (job->o->dump_output) {
        FILE *f = fopen(job->o->dump_output, "wb");
        if (f == NULL) {
            job->error = strdup("cannot open --dump-output");
            return NULL;
        }
        runOnce(job, &info, f);
        fclose(f);
    }
    return NULL;
}

static int cmpDouble(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double q) {
    long i = (long)(q * (double)n);
    return sorted[i < n ? i : n - 1];
}

int main(int argc, char **argv) {
    Options o;
    parseArgs(argc, argv, &o);
    RAI_BackendKind kind = parseKind(o.kind);

    /* As the module does before its first dlopen (backend_loader.c). */
    setenv("TF_CPP_MIN_LOG_LEVEL", "3", 0);
    setenv("TF_ENABLE_ONEDNN_OPTS", "0", 0);
    void *so = dlopen(o.so, RTLD_NOW | RTLD_LOCAL);
    if (so == NULL) die("%s: dlopen failed: %s", o.so, dlerror());
    RAI_BackendEntryFn entry = (RAI_BackendEntryFn)dlsym(so, RAI_BACKEND_ENTRY_SYMBOL);
    if (entry == NULL) die("%s: no entry point %s", o.so, RAI_BACKEND_ENTRY_SYMBOL);
    char why[512] = "";
    const RAI_BackendDescriptor *desc = entry(&api, why, sizeof(why));
    if (desc == NULL) die("%s: the entry refused: %s", o.so, why);
    if (desc->kind != kind) die("%s: a backend of kind %d, not %s", o.so, desc->kind, o.kind);

    size_t blob_len;
    char *blob = readFile(o.model, &blob_len);
    RAI_ModelSpec spec = {
        .size = sizeof(spec),
        .device_str = "CPU",
        .device = RAI_DEVICE_CPU,
        .device_id = -1,
        .blob = blob,
        .blob_len = blob_len,
        .ninputs = o.nin_names,
        .inputs = o.in_names,
        .noutputs = o.nout_names,
        .outputs = o.out_names,
        .key = "floor",
        .key_len = 5,
    };
    RAI_ModelNames names = {0};
    RAI_Error err = {0};
    void *model = desc->model_create(&spec, &names, &err);
    if (model == NULL) die("%s: model_create failed: %s", o.model, err.msg ? err.msg : "?");
    free(blob);

    Job job = {
        .desc = desc,
        .model = model,
        .o = &o,
        .noutputs = o.noutputs ? o.noutputs : names.outputs ? names.noutputs : o.nout_names,
        .lat = calloc((size_t)o.iters, sizeof(double)),
    };
    if (job.noutputs == 0 || job.noutputs > MAX_IO) die("cannot tell the output count: give --noutputs");
    if (job.lat == NULL) die("out of memory");
    /* A worker thread of its own, as the module's run queue: frameworks keep
     * per-thread state (Torch's intra-op setting, thread-local pools). */
    pthread_t th;
    if (pthread_create(&th, NULL, worker, &job) != 0) die("cannot start the worker thread");
    pthread_join(th, NULL);
    if (job.error) die("model_run failed: %s", job.error);

    qsort(job.lat, (size_t)o.iters, sizeof(double), cmpDouble);
    double sum = 0;
    for (long i = 0; i < o.iters; i++) sum += job.lat[i];
    printf("{\"kind\": \"%s\", \"framework\": \"%s\", \"framework_version\": \"%s\", "
           "\"iters\": %ld, \"warmup\": %ld, \"intra\": %lld, \"inter\": %lld, \"timeout_ms\": %lld, "
           "\"p50_us\": %.2f, \"p90_us\": %.2f, \"p99_us\": %.2f, \"min_us\": %.2f, "
           "\"mean_us\": %.2f, \"rps\": %.1f}\n",
           o.kind, desc->framework, desc->framework_version, o.iters, o.warmup,
           config[RAI_CONFIG_INTRA_OP_PARALLELISM], config[RAI_CONFIG_INTER_OP_PARALLELISM],
           config[RAI_CONFIG_MODEL_EXECUTION_TIMEOUT],
           pct(job.lat, o.iters, .5) * 1e6, pct(job.lat, o.iters, .9) * 1e6,
           pct(job.lat, o.iters, .99) * 1e6, job.lat[0] * 1e6, sum / (double)o.iters * 1e6,
           (double)o.iters / job.wall);
    desc->model_free(model);
    for (size_t i = 0; i < names.ninputs; i++) free(names.inputs ? names.inputs[i] : NULL);
    for (size_t i = 0; i < names.noutputs; i++) free(names.outputs ? names.outputs[i] : NULL);
    free(names.inputs);
    free(names.outputs);
    for (size_t i = 0; i < o.ninputs; i++) tensorRelease(o.inputs[i]);
    free(job.lat);
    return 0;
}

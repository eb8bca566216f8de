/*
 * tflite_floor.c - a .tflite model run by LiteRT in-process in a C loop, no
 * Redis and no backend ABI: the TFLITE floor of bench/bench_tflite.py. It
 * compiles the backend's own LiteRT declarations and instances
 * (backends/tflite/tfl_api.c, tfl_instance.c, tfl_guard.cpp), so it calls
 * the library exactly as the backend does.
 *
 *   tflite_floor --lib libLiteRt.so --model FILE [--input FILE ...]
 *                [--iters N] [--warmup N] [--intra N] [--instances N]
 *                [--threads 2,4] [--seconds S] [--rounds R] [--dump-output FILE]
 *
 * Inputs are raw bytes in the model's positional order (zeros when none are
 * given). Three parts, one JSON object on stdout:
 *
 * 1. single: one compiled model, one thread, --iters timed runs (the run
 *    alone: the inputs are written once), runs/s, median, p99;
 * 2. instances: the RSS growth over --instances more compiled models of
 *    the model (each with its buffers, as the backend's pool holds them),
 *    and the median time to compile one;
 * 3. threads: for each N of --threads, N threads running the model for
 *    --seconds, --rounds times, the two ways a compiled model is kept from
 *    running on two threads at once (shared/LITERT.md's trap), alternating:
 *    "lock", one compiled model behind a mutex (copy in, run, copy out under
 *    it), and "pool", a compiled model per thread (the backend's choice).
 *    Every output is compared with the single run's: "wrong" counts those
 *    that differ (both ways must give 0). Each gives runs/s, the process's
 *    CPU per run and its voluntary context switches per run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "tflite/tfl_api.h"
#include "tflite/tfl_instance.h"

#define MAX_INPUTS 16
#define MAX_THREAD_COUNTS 8

typedef struct Opts {
    const char *lib, *model, *dump;
    const char *inputs[MAX_INPUTS];
    int ninputs;
    long iters, warmup, instances, rounds;
    int intra;
    int thread_counts[MAX_THREAD_COUNTS];
    int nthread_counts;
    double seconds;
} Opts;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tflite_floor: ", stderr);
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

static char *readFile(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) die("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) die("cannot read %s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static long rssKb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) die("cannot read /proc/self/statm");
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmpDouble(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of n sorted values (nearest rank). */
static double quantile(const double *sorted, long n, double q) {
    long i = (long)(q * (double)n);
    return sorted[i < n ? i : n - 1];
}

/* --- the model, its inputs and the reference outputs --------------------- */

static TflEnvironment env;
static TflModel model;
static TflIface io;
static Opts opts;
static void **input_data;  /* by signature index, each in_bytes long */
static void **ref_output;  /* by signature index, each out_bytes long */

static TflInstance *compile(void) {
    char why[512] = "";
    TflInstance *in = TflInstance_Create(env, model, &io, opts.intra, why, sizeof(why));
    if (in == NULL) die("cannot compile the model: %s", why);
    return in;
}

static void copyIn(TflInstance *in) {
    for (size_t i = 0; i < in->nin; i++) memcpy(in->in_mem[i], input_data[i], in->in_bytes[i]);
}

static void run(TflInstance *in) {
    char why[512] = "";
    if (TflInstance_Run(in, why, sizeof(why)) != 0) die("run failed: %s", why);
}

/* Reads the --input files into input_data (positional order), zeros else. */
static void loadInputs(const TflInstance *in) {
    if (opts.ninputs != 0 && (size_t)opts.ninputs != io.nin)
        die("the model has %zu inputs, %d --input given", io.nin, opts.ninputs);
    input_data = calloc(in->nin ? in->nin : 1, sizeof(void *));
    for (size_t p = 0; p < io.nin; p++) {
        size_t i = io.in[p].sig;
        input_data[i] = calloc(1, in->in_bytes[i] ? in->in_bytes[i] : 1);
        if (opts.ninputs == 0) continue;
        size_t len = 0;
        char *bytes = readFile(opts.inputs[p], &len);
        if (len != in->in_bytes[i])
            die("%s: %zu bytes, input %zu takes %zu", opts.inputs[p], len, p, in->in_bytes[i]);
        memcpy(input_data[i], bytes, len);
        free(bytes);
    }
}

static void keepReference(const TflInstance *in) {
    ref_output = calloc(in->nout ? in->nout : 1, sizeof(void *));
    for (size_t i = 0; i < in->nout; i++) {
        ref_output[i] = malloc(in->out_bytes[i] ? in->out_bytes[i] : 1);
        memcpy(ref_output[i], in->out_mem[i], in->out_bytes[i]);
    }
    if (opts.dump == NULL) return;
    FILE *f = fopen(opts.dump, "wb");
    if (f == NULL) die("cannot write %s", opts.dump);
    for (size_t p = 0; p < io.nout; p++) {
        size_t i = io.out[p].sig;
        fwrite(in->out_mem[i], 1, in->out_bytes[i], f);
    }
    fclose(f);
}

/* --- 1. one thread -------------------------------------------------------- */

static void single(TflInstance *in) {
    double *lat = malloc((size_t)opts.iters * sizeof(double));
    if (lat == NULL) die("out of memory");
    copyIn(in);
    for (long k = 0; k < opts.warmup; k++) run(in);
    double t0 = now();
    for (long k = 0; k < opts.iters; k++) {
        double a = now();
        run(in);
        lat[k] = now() - a;
    }
    double total = now() - t0;
    double sum = 0;
    for (long k = 0; k < opts.iters; k++) sum += lat[k];
    qsort(lat, (size_t)opts.iters, sizeof(double), cmpDouble);
    printf("\"single\": {\"iters\": %ld, \"runs_per_s\": %.1f, \"p50_us\": %.2f, "
           "\"p99_us\": %.2f, \"mean_us\": %.2f, \"min_us\": %.2f}",
           opts.iters, (double)opts.iters / total, quantile(lat, opts.iters, 0.5) * 1e6,
           quantile(lat, opts.iters, 0.99) * 1e6, sum / (double)opts.iters * 1e6, lat[0] * 1e6);
    free(lat);
}

/* --- 2. memory per compiled model ----------------------------------------- */

static void instances(void) {
    long n = opts.instances;
    TflInstance **all = calloc((size_t)(n ? n : 1), sizeof(*all));
    double *took = calloc((size_t)(n ? n : 1), sizeof(double));
    if (all == NULL || took == NULL) die("out of memory");
    long before = rssKb();
    for (long k = 0; k < n; k++) {
        double t0 = now();
        all[k] = compile();
        took[k] = now() - t0;
    }
    long after = rssKb();
    qsort(took, (size_t)n, sizeof(double), cmpDouble);
    printf(",\n\"instances\": {\"count\": %ld, \"rss_before_kb\": %ld, \"rss_after_kb\": %ld, "
           "\"per_instance_kb\": %.1f, \"compile_p50_us\": %.1f}",
           n, before, after, n ? (double)(after - before) / (double)n : 0.0,
           n ? quantile(took, n, 0.5) * 1e6 : 0.0);
    for (long k = 0; k < n; k++) TflInstance_Free(all[k]);
    free(all);
    free(took);
}

/* --- 3. threads: a lock per compiled model against one per thread --------- */

typedef struct Shared {
    TflInstance *one; /* lock mode: the compiled model all threads share */
    pthread_mutex_t mu;
    pthread_barrier_t start;
    atomic_int stop;
} Shared;

typedef struct Worker {
    pthread_t tid;
    Shared *sh;
    TflInstance *own; /* pool mode: this thread's compiled model; NULL: lock mode */
    void **out;       /* the thread's copy of each output */
    long runs, wrong;
} Worker;

static long compareOutputs(void *const *out, const TflInstance *in) {
    for (size_t i = 0; i < in->nout; i++)
        if (memcmp(out[i], ref_output[i], in->out_bytes[i]) != 0) return 1;
    return 0;
}

/* Copy in, run, copy out: what a request does with an instance. */
static void runRequest(TflInstance *in, void **out) {
    copyIn(in);
    run(in);
    for (size_t i = 0; i < in->nout; i++) memcpy(out[i], in->out_mem[i], in->out_bytes[i]);
}

static void *work(void *arg) {
    Worker *w = arg;
    Shared *sh = w->sh;
    TflInstance *shape = w->own ? w->own : sh->one;
    pthread_barrier_wait(&sh->start);
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        if (w->own) {
            runRequest(w->own, w->out);
        } else {
            pthread_mutex_lock(&sh->mu);
            runRequest(sh->one, w->out);
            pthread_mutex_unlock(&sh->mu);
        }
        w->runs++;
        w->wrong += compareOutputs(w->out, shape);
    }
    return NULL;
}

static double cpuSeconds(const struct rusage *ru) {
    return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) +
           (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

/* One measurement: n threads for opts.seconds; pool: a compiled model each.
 * Besides runs/s, the process's CPU per run and its voluntary context
 * switches per run (a thread that blocks on the mutex): on a shared
 * machine runs/s follows the cores the others leave free, CPU per run
 * much less. */
static void measure(int n, int pool, TflInstance *one, TflInstance **own) {
    Shared sh = {.one = one};
    Worker w[64];
    pthread_mutex_init(&sh.mu, NULL);
    pthread_barrier_init(&sh.start, NULL, (unsigned)n + 1);
    atomic_init(&sh.stop, 0);
    for (int t = 0; t < n; t++) {
        w[t] = (Worker){.sh = &sh, .own = pool ? own[t] : NULL};
        w[t].out = calloc(one->nout ? one->nout : 1, sizeof(void *));
        for (size_t i = 0; i < one->nout; i++) w[t].out[i] = malloc(one->out_bytes[i] ? one->out_bytes[i] : 1);
        if (pthread_create(&w[t].tid, NULL, work, &w[t]) != 0) die("cannot start a thread");
    }
    pthread_barrier_wait(&sh.start);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now();
    struct timespec pause = {.tv_sec = (time_t)opts.seconds,
                             .tv_nsec = (long)((opts.seconds - (double)(time_t)opts.seconds) * 1e9)};
    nanosleep(&pause, NULL);
    atomic_store(&sh.stop, 1);
    long runs = 0, wrong = 0;
    for (int t = 0; t < n; t++) {
        pthread_join(w[t].tid, NULL);
        runs += w[t].runs;
        wrong += w[t].wrong;
        for (size_t i = 0; i < one->nout; i++) free(w[t].out[i]);
        free(w[t].out);
    }
    double took = now() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = cpuSeconds(&ru1) - cpuSeconds(&ru0);
    long waits = ru1.ru_nvcsw - ru0.ru_nvcsw;
    pthread_barrier_destroy(&sh.start);
    pthread_mutex_destroy(&sh.mu);
    printf("\"%s\": {\"runs\": %ld, \"seconds\": %.3f, \"runs_per_s\": %.1f, "
           "\"cpu_us_per_run\": %.2f, \"waits_per_run\": %.3f, \"wrong\": %ld}",
           pool ? "pool" : "lock", runs, took, (double)runs / took,
           runs ? cpu * 1e6 / (double)runs : 0.0, runs ? (double)waits / (double)runs : 0.0, wrong);
}

static void threads(TflInstance *one) {
    printf(",\n\"threads\": [");
    for (int c = 0; c < opts.nthread_counts; c++) {
        int n = opts.thread_counts[c];
        TflInstance *own[64];
        own[0] = one;
        for (int t = 1; t < n; t++) own[t] = compile();
        printf("%s\n {\"threads\": %d, \"rounds\": [", c ? "," : "", n);
        for (long r = 0; r < opts.rounds; r++) {
            /* Alternate which way goes first, so that drift in the machine's
             * load falls on both. */
            int first = (int)(r % 2);
            printf("%s\n  {", r ? "," : "");
            measure(n, first, one, own);
            printf(", ");
            measure(n, !first, one, own);
            printf("}");
            fflush(stdout);
        }
        printf("]}");
        for (int t = 1; t < n; t++) TflInstance_Free(own[t]);
    }
    printf("]");
}

/* --- arguments ------------------------------------------------------------ */

static void parseThreadCounts(const char *list) {
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int n = atoi(tok);
        if (n < 1 || n > 64 || opts.nthread_counts == MAX_THREAD_COUNTS) die("--threads: 1 to 64, at most 8 counts");
        opts.thread_counts[opts.nthread_counts++] = n;
    }
    free(copy);
}

static void parseArgs(int argc, char **argv) {
    opts = (Opts){.iters = 20000, .warmup = 500, .intra = 1, .instances = 50, .rounds = 3,
                  .seconds = 2.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) die("%s needs a value", a);
        i++;
        if (!strcmp(a, "--lib")) opts.lib = v;
        else if (!strcmp(a, "--model")) opts.model = v;
        else if (!strcmp(a, "--dump-output")) opts.dump = v;
        else if (!strcmp(a, "--input")) {
            if (opts.ninputs == MAX_INPUTS) die("at most %d inputs", MAX_INPUTS);
            opts.inputs[opts.ninputs++] = v;
        } else if (!strcmp(a, "--iters")) opts.iters = atol(v);
        else if (!strcmp(a, "--warmup")) opts.warmup = atol(v);
        else if (!strcmp(a, "--intra")) opts.intra = atoi(v);
        else if (!strcmp(a, "--instances")) opts.instances = atol(v);
        else if (!strcmp(a, "--rounds")) opts.rounds = atol(v);
        else if (!strcmp(a, "--seconds")) opts.seconds = atof(v);
        else if (!strcmp(a, "--threads")) parseThreadCounts(v);
        else die("unknown argument %s", a);
    }
    if (opts.lib == NULL || opts.model == NULL) die("--lib and --model are required");
    if (opts.iters < 1 || opts.warmup < 0 || opts.instances < 0 || opts.rounds < 1 || opts.seconds <= 0)
        die("--iters, --rounds >= 1; --warmup, --instances >= 0; --seconds > 0");
}

int main(int argc, char **argv) {
    char why[512] = "";
    parseArgs(argc, argv);
    if (Tfl_Open(opts.lib, why, sizeof(why)) != 0) die("%s", why);
    TflEnvOption env_opts[2] = {
        {.tag = TFL_ENV_AUTO_REGISTER_ACCELERATORS, .value = {.type = TFL_ANY_INT, .v.i = 1}},
        {.tag = TFL_ENV_MIN_LOG_SEVERITY, .value = {.type = TFL_ANY_INT, .v.i = 3}},
    };
    if (tfl.CreateEnvironment(2, env_opts, &env) != 0) die("cannot create a LiteRT environment");
    size_t len = 0;
    char *blob = readFile(opts.model, &len); /* LiteRT reads it for the model's life */
    if (tfl.CreateModelFromBuffer(env, blob, len, &model) != 0) die("%s: not a model LiteRT loads", opts.model);
    if (TflIface_Read(model, &io, why, sizeof(why)) != 0) die("%s", why);
    double t0 = now();
    TflInstance *one = compile();
    double first_compile = now() - t0;
    loadInputs(one);
    printf("{\"lib\": \"%s\", \"model\": \"%s\", \"intra\": %d, \"first_compile_us\": %.1f,\n",
           opts.lib, opts.model, opts.intra, first_compile * 1e6);
    single(one);
    keepReference(one);
    instances();
    if (opts.nthread_counts > 0) threads(one);
    printf("}\n");
    fflush(stdout);
    /* Straight out, as redisai_tflite_check does: nothing to tear down. */
    _exit(0);
}

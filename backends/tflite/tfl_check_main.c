/*
 * tfl_check_main.c - redisai_tflite_check, the short-lived process that
 * tries a new TFLITE model before the server's own LiteRT sees it.
 *
 *     redisai_tflite_check <path of libLiteRt.so>   (the model on fd 0)
 *
 * It loads the model, compiles it with its buffers fenced (each ends on an
 * inaccessible page), runs it on zeros, ones and small random values, checks
 * after each run that no output changed shape or was written past, then
 * frees everything, and only then writes one line to fd 1: "OK", or
 * "ERR <text>" for a model LiteRT refused cleanly. A model that kills LiteRT
 * kills this process instead of Redis; the backend reads no line and
 * refuses the model (tfl_check.c, docs/backends.md "A bad TFLITE model").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tflite/tfl_api.h"
#include "tflite/tfl_instance.h"
#include "tflite/tfl_memory.h"
#include "tflite/tfl_read.h"

/* The line, then straight out: LiteRT's destructors have nothing to say. */
static int verdict(const char *line) {
    printf("%s\n", line);
    fflush(stdout);
    _exit(0);
}

#define TRIAL_RUNS 3

/* Trial inputs: zeros, ones, then small random values (0 or 1 for
 * integers, so that an index input stays in range), typed. */
static void fillInput(void *mem, size_t bytes, int type, int fill) {
    size_t size = Tfl_ElementSize(type), n = size ? bytes / size : 0;
    for (size_t k = 0; k < n; k++) {
        int bit = fill == 0 ? 0 : fill == 1 ? 1 : rand() & 1;
        double real = fill == 2 ? (double)rand() / RAND_MAX : bit;
        switch (type) {
        case TFL_TYPE_FLOAT32: ((float *)mem)[k] = (float)real; break;
        case TFL_TYPE_FLOAT64: ((double *)mem)[k] = real; break;
        case TFL_TYPE_INT64: ((int64_t *)mem)[k] = bit; break;
        case TFL_TYPE_INT32: ((int32_t *)mem)[k] = bit; break;
        case TFL_TYPE_INT16: ((int16_t *)mem)[k] = (int16_t)bit; break;
        default: ((uint8_t *)mem)[k] = (uint8_t)bit; break;
        }
    }
}

/* 0 when every output kept the shape its buffer was made for and nothing
 * was written past a buffer; -1 with what happened in why. */
static int checkOutputs(TflInstance *in, const TflIface *io, char *why, size_t whylen) {
    for (size_t i = 0; i < in->nin; i++) {
        if (!Tfl_BufferIntact(in->in_mem[i], in->in_bytes[i])) {
            snprintf(why, whylen, "writes past input %zu", i);
            return -1;
        }
    }
    for (size_t p = 0; p < io->nout; p++) {
        size_t i = io->out[p].sig;
        if (!Tfl_BufferIntact(in->out_mem[i], in->out_bytes[i])) {
            snprintf(why, whylen, "writes past output %zu", p);
            return -1;
        }
    }
    if (in->nout == 0) return 0;
    TflLayout *now = calloc(in->nout, sizeof(TflLayout));
    if (now == NULL) return 0;
    TflStatus st = Tfl_OutputLayouts(in->cm, in->nout, now, why, whylen);
    int changed = 0;
    for (size_t i = 0; st == 0 && i < in->nout; i++) {
        int rank = TFL_LAYOUT_RANK(&now[i]);
        if (rank != TFL_LAYOUT_RANK(&in->out_layout[i]) ||
            memcmp(now[i].dims, in->out_layout[i].dims, sizeof(int32_t) * (size_t)rank) != 0)
            changed = 1;
    }
    free(now);
    if (changed) {
        snprintf(why, whylen, "changes the shape of an output");
        return -1;
    }
    return 0;
}

static char *readAll(int fd, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *more = realloc(buf, cap * 2);
            if (more == NULL) break;
            buf = more;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r == 0) {
            *len = n;
            return buf;
        }
        if (r < 0) break;
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    char why[512] = "", line[640];
    if (argc != 2) {
        fprintf(stderr, "usage: %s <libLiteRt.so> < model.tflite\n", argv[0]);
        return 2;
    }
    size_t len = 0;
    char *blob = readAll(0, &len);
    if (blob == NULL) return verdict("ERR cannot read the model");
    if (Tfl_Open(argv[1], why, sizeof(why)) != 0) {
        snprintf(line, sizeof(line), "ERR %s", why);
        return verdict(line);
    }
    TflEnvOption opts[2] = {
        {.tag = TFL_ENV_AUTO_REGISTER_ACCELERATORS, .value = {.type = TFL_ANY_INT, .v.i = 1}},
        {.tag = TFL_ENV_MIN_LOG_SEVERITY, .value = {.type = TFL_ANY_INT, .v.i = 4}},
    };
    TflEnvironment env = NULL;
    TflModel model = NULL;
    if (tfl.CreateEnvironment(2, opts, &env) != 0) return verdict("ERR cannot create a LiteRT environment");
    if (len == 0 || tfl.CreateModelFromBuffer(env, blob, len, &model) != 0)
        return verdict("ERR Failed to load model from buffer");
    TflIface io;
    if (TflIface_Read(model, &io, why, sizeof(why)) != 0) {
        snprintf(line, sizeof(line), "ERR Failed to load model from buffer (%s)", why);
        return verdict(line);
    }
    Tfl_FenceBuffers();
    TflInstance *in = TflInstance_Create(env, model, &io, 1, why, sizeof(why));
    if (in == NULL) {
        snprintf(line, sizeof(line), "ERR Failed to construct interpreter (%s)", why);
        return verdict(line);
    }
    /* Trial runs: a run that fails cleanly may still succeed on real inputs,
     * so only an escaping exception, a changed output or a write past a
     * buffer refuses the model (and a crash, seen as a missing line). */
    for (int fill = 0; fill < TRIAL_RUNS; fill++) {
        for (size_t p = 0; p < io.nin; p++) {
            size_t i = io.in[p].sig;
            fillInput(in->in_mem[i], in->in_bytes[i], io.in[p].type, fill);
        }
        if (TflInstance_Run(in, why, sizeof(why)) != 0 && strncmp(why, "LiteRT threw", 12) == 0) {
            snprintf(line, sizeof(line), "ERR Failed to invoke TfLite (a trial run: %s)", why);
            return verdict(line);
        }
        if (checkOutputs(in, &io, why, sizeof(why)) != 0) {
            snprintf(line, sizeof(line), "ERR Failed to load model from buffer (a trial run %s)", why);
            return verdict(line);
        }
    }
    /* Freeing is where an overflow inside LiteRT's own memory shows. */
    TflInstance_Free(in);
    tfl.DestroyModel(model);
    tfl.DestroyEnvironment(env);
    TflIface_Free(&io);
    return verdict("OK");
}

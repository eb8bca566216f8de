/*
 * tfl_check_main.c - redisai_tflite_check, the short-lived process that
 * tries a new TFLITE model before the server's own LiteRT sees it.
 *
 *     redisai_tflite_check <path of libLiteRt.so>   (the model on fd 0)
 *
 * It loads the model, compiles it for the CPU and runs it once on zeros of
 * its own shapes, then writes one line to fd 1: "OK", or "ERR <text>" for a
 * model LiteRT refused cleanly. A model that kills LiteRT kills this process
 * instead of Redis; the backend reads no line and refuses the model
 * (tfl_check.c, docs/backends.md "A bad TFLITE model").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tflite/tfl_api.h"
#include "tflite/tfl_instance.h"

/* The line, then straight out: LiteRT's destructors have nothing to say. */
static int verdict(const char *line) {
    printf("%s\n", line);
    fflush(stdout);
    _exit(0);
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
    TflInstance *in = TflInstance_Create(env, model, &io, 1, why, sizeof(why));
    if (in == NULL) {
        snprintf(line, sizeof(line), "ERR Failed to construct interpreter (%s)", why);
        return verdict(line);
    }
    /* A trial run on zeros: a run that fails cleanly may still succeed on
     * real inputs, so only an escaping exception refuses the model (and a
     * crash, which the backend sees as a missing line). */
    if (TflInstance_Run(in, why, sizeof(why)) != 0 &&
        strncmp(why, "LiteRT threw", 12) == 0) {
        snprintf(line, sizeof(line), "ERR Failed to invoke TfLite (a trial run: %s)", why);
        return verdict(line);
    }
    return verdict("OK");
}

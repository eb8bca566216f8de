/*
 * tfl_check.h - tries a new model in redisai_tflite_check, a short-lived
 * process, before the server's LiteRT reads it (docs/backends.md, "A bad
 * TFLITE model").
 */
#ifndef REDISAI_TFL_CHECK_H
#define REDISAI_TFL_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The validator's path beside the backend that holds addr, checked to be an
 * executable file. 0, or -1 with "<path>: <reason>" in why. */
int TflCheck_Find(const void *addr, char *path, size_t pathlen, char *why, size_t whylen);

/* Runs the validator at checker on blob with LiteRT at lib. 0 when the
 * model loaded, compiled and ran once; otherwise -1 with the text to reply
 * in why ("Failed to load model from buffer ..."). Waits at most
 * timeout_ms; a validator still running then is killed. */
int TflCheck_Model(const char *checker, const char *lib, const char *blob, size_t len,
                   long long timeout_ms, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif

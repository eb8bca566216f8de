/*
 * unit.h - the harness of the C unit tests: checks that report file:line and
 * count, nothing else. One test program per unit (CMakeLists.txt, "tests
 * only: C unit tests"); main() ends with `return Unit_Done("<unit>");`, which
 * prints the counts and is nonzero when any check failed, so CTest and
 * tests/unit/test_c_units.py see the failure. A failed check does not stop
 * the program: one run lists every broken promise.
 */
#ifndef REDISAI_UNIT_H
#define REDISAI_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_checks;
static int unit_failures;

static inline int Unit_Check(int ok, const char *file, int line, const char *what) {
    unit_checks++;
    if (!ok) {
        unit_failures++;
        fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
    }
    return ok;
}

static inline int Unit_CheckInt(long long got, long long want, const char *file, int line,
                                const char *expr) {
    unit_checks++;
    if (got != want) {
        unit_failures++;
        fprintf(stderr, "%s:%d: FAILED: %s is %lld, expected %lld\n", file, line, expr, got,
                want);
    }
    return got == want;
}

static inline int Unit_CheckStr(const char *got, const char *want, const char *file, int line,
                                const char *expr) {
    int ok = got != NULL && want != NULL ? strcmp(got, want) == 0 : got == want;
    unit_checks++;
    if (!ok) {
        unit_failures++;
        fprintf(stderr, "%s:%d: FAILED: %s is \"%s\", expected \"%s\"\n", file, line, expr,
                got ? got : "(null)", want ? want : "(null)");
    }
    return ok;
}

/* haystack holds needle: error messages are checked by the part that says
 * which check refused, not word for word. */
static inline int Unit_CheckHas(const char *haystack, const char *needle, const char *file,
                                int line, const char *expr) {
    int ok = haystack != NULL && strstr(haystack, needle) != NULL;
    unit_checks++;
    if (!ok) {
        unit_failures++;
        fprintf(stderr, "%s:%d: FAILED: %s is \"%s\", which lacks \"%s\"\n", file, line, expr,
                haystack ? haystack : "(null)", needle);
    }
    return ok;
}

#define CHECK(cond) Unit_Check(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_INT(got, want) Unit_CheckInt((long long)(got), (long long)(want), __FILE__, \
                                           __LINE__, #got)
#define CHECK_STR(got, want) Unit_CheckStr((got), (want), __FILE__, __LINE__, #got)
#define CHECK_HAS(haystack, needle) Unit_CheckHas((haystack), (needle), __FILE__, __LINE__, \
                                                  #haystack)

static inline int Unit_Done(const char *unit) {
    printf("%s: %d checks, %d failed\n", unit, unit_checks, unit_failures);
    /* No check at all is a broken test program, not a pass. */
    return unit_failures != 0 || unit_checks == 0;
}

#endif

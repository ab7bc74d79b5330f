/*
 * skip.h — saying why (part of) a test did not run.
 *
 * Every test program runs under tests/run_test.sh, which turns a program that printed a
 * "not run: REASON" line (or a cmocka case that called skip()) into CTest's "skipped" status
 * and lists the reasons in the test summary; under CI=true a missing model fails the test.
 * Use these instead of a bare skip() so the reason is always there:
 *
 *     if (access(path, R_OK) != 0) {
 *         TS_SKIP_NO_MODEL(path);      // a cmocka case: prints the reason, then skip()
 *     }
 *     TS_NOT_RUN("AVX-512 kernels: this CPU has no AVX-512");   // a part of a test
 */
#ifndef TS_TESTS_COMMON_SKIP_H
#define TS_TESTS_COMMON_SKIP_H

#include <stdio.h>

/* Reports a part of a test that could not run; the program goes on (and is reported skipped). */
#define TS_NOT_RUN(...)                                                                            \
    do {                                                                                           \
        printf("not run: " __VA_ARGS__);                                                           \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

/* Skips the current cmocka case for a missing model file (a failure under CI=true). */
#define TS_SKIP_NO_MODEL(path)                                                                     \
    do {                                                                                           \
        TS_NOT_RUN("model %s is absent (python3 scripts/fetch_model.py)", (path));                 \
        skip();                                                                                    \
    } while (0)

/* Skips the current cmocka case for another missing prerequisite. */
#define TS_SKIP(...)                                                                               \
    do {                                                                                           \
        TS_NOT_RUN(__VA_ARGS__);                                                                   \
        skip();                                                                                    \
    } while (0)

#endif /* TS_TESTS_COMMON_SKIP_H */

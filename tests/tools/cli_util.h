/*
 * cli_util.h — what the tests of the `tessera` binary share: where the binary is, and running
 * a command line with its output captured in files.
 */
#ifndef TS_TESTS_CLI_UTIL_H
#define TS_TESTS_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The binary named by TS_BIN (set by CMake), or NULL when it is not there (tests skip). */
static inline const char *cli_bin(void) {
    const char *b = getenv("TS_BIN");
    return b != NULL && access(b, X_OK) == 0 ? b : NULL;
}

/* Runs a command with stdout and stderr in separate files; returns the exit status. */
static inline int cli_run_to(const char *cmd, const char *out_path, const char *err_path) {
    char full[4096];
    snprintf(full, sizeof full, "%s >%s 2>%s", cmd, out_path, err_path);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* TS_TESTS_CLI_UTIL_H */

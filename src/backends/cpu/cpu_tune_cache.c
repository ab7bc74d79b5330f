/*
 * cpu_tune_cache.c — the kernel choice cache file: where it lives, which CPU it is for, and
 * reading and writing it.
 *
 * The file is text, one fact a line (docs/quant.md):
 *
 *     tessera-kernels 2                  format version (CPU_TUNE_FORMAT)
 *     cpu GenuineIntel-6-143-8-avx512    the CPU it was measured on (cpu_id)
 *     build 5f1c...                      the kernels measured (cpu_build_id: a hash of their
 *                                        sources and the compiler)
 *     Q4_1 row avx2                      type, shape class (row | rows), level
 *     Q4_1 rows avx512 packed            ... and "packed": the level's gemm on repacked weights
 *     ...
 *     end                                written last: a file without it was cut short
 *
 * The file is untrusted (it may be truncated, copied from another machine or edited by hand),
 * so every line is checked, and any fault discards the whole file: another CPU or build (kernels
 * built from other sources may be faster or slower, so their choices are measured afresh), a type
 * this build has no kernels for, a shape class or level that does not exist, a level above what
 * this CPU runs, a duplicate entry, or anything after `end`. A discarded file is rewritten after
 * the next measurement. Writes go to a temporary file renamed over the old one, so processes
 * sharing the cache (tests running in parallel) never read half a file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "backends/cpu/cpu_tune.h"
#include "ts_kernels_id.h" /* generated: cmake/kernels_id.cmake */

#define CACHE_MAX_BYTES 8192 /* far above the largest file this writes (~2 KiB) */

static const char *const k_shape_names[CPU_SHAPE_COUNT] = {"row", "rows"};

bool cpu_cache_dir(char *buf, size_t size) {
    const char *env = getenv("TS_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (env != NULL && env[0] != '\0') {
        n = snprintf(buf, size, "%s", env);
    } else if (xdg != NULL && xdg[0] != '\0') {
        n = snprintf(buf, size, "%s/tessera", xdg);
    } else if (home != NULL && home[0] != '\0') {
        n = snprintf(buf, size, "%s/.cache/tessera", home);
    }
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0';
        return false;
    }
    return true;
}

void cpu_id(char *buf, size_t size) {
    char vendor[13] = "generic";
    unsigned family = 0, model = 0, stepping = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(vendor, &b, 4);
        memcpy(vendor + 4, &d, 4);
        memcpy(vendor + 8, &c, 4);
        vendor[12] = '\0';
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
        stepping = a & 0xf;
        family = base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family;
        model = base_family == 0x6 || base_family == 0xf ? (((a >> 16) & 0xf) << 4) | base_model
                                                         : base_model;
    }
#endif
    snprintf(buf, size, "%s-%u-%u-%u-%s", vendor, family, model, stepping,
             ts_isa_name(ts_quant_cpu_isa()));
    /* The id becomes part of a file name: keep it to letters, digits and dashes. */
    for (char *p = buf; *p != '\0'; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        *p = ok ? *p : '-';
    }
}

/* Appends one line to the notice (the first problem is the one that matters; later ones are
 * added while room is left). */
static void note(cpu_kernels *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(cpu_kernels *k, const char *fmt, ...) {
    size_t at = strlen(k->notice);
    if (at > 0 && at + 2 < sizeof k->notice) {
        memcpy(k->notice + at, "; ", 3);
        at += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->notice + at, sizeof k->notice - at, fmt, ap);
    va_end(ap);
}

/* Checks one entry line and stores it; NULL when valid, else what is wrong. */
static const char *parse_entry(cpu_kernels *k, char *line, int8_t (*isa)[CPU_SHAPE_COUNT],
                               int8_t (*packed)[CPU_SHAPE_COUNT]) {
    char *save = NULL;
    char *tname = strtok_r(line, " ", &save);
    char *shape = strtok_r(NULL, " ", &save);
    char *level = strtok_r(NULL, " ", &save);
    char *layout = strtok_r(NULL, " ", &save);
    if (tname == NULL || shape == NULL || level == NULL ||
        (layout != NULL && strcmp(layout, "packed") != 0) || strtok_r(NULL, " ", &save) != NULL) {
        return "not 'TYPE row|rows LEVEL [packed]'";
    }
    ts_type t;
    if (!ts_type_from_name(tname, &t) || ts_quant_ops_get(t, TS_ISA_SCALAR) == NULL) {
        return "unknown weight type";
    }
    int s = -1;
    for (int i = 0; i < CPU_SHAPE_COUNT; i++) {
        s = strcmp(shape, k_shape_names[i]) == 0 ? i : s;
    }
    if (s < 0) {
        return "unknown shape class";
    }
    int l = -1;
    for (int i = TS_ISA_SCALAR; i <= TS_ISA_AVX512; i++) {
        l = strcmp(level, ts_isa_name((ts_isa)i)) == 0 ? i : l;
    }
    if (l < 0) {
        return "unknown instruction-set level";
    }
    if (!ts_quant_isa_supported((ts_isa)l) || l > (int)k->top) {
        return "a level this CPU does not run";
    }
    if (layout != NULL) {
        const ts_quant_ops *o = ts_quant_ops_get(t, (ts_isa)l);
        if (o == NULL || o->isa != (ts_isa)l || o->gemm_packed == NULL) {
            return "a packed kernel this build does not have";
        }
    }
    if (isa[t][s] >= 0) {
        return "duplicate entry";
    }
    isa[t][s] = (int8_t)l;
    packed[t][s] = layout != NULL;
    return NULL;
}

void cpu_build_id(char *buf, size_t size) {
    snprintf(buf, size, "%s", TS_KERNELS_ID);
}

void cpu_cache_head(char *buf, size_t size) {
    char id[128], build[128];
    cpu_id(id, sizeof id);
    cpu_build_id(build, sizeof build);
    snprintf(buf, size, "tessera-kernels %d\ncpu %s\nbuild %s\n", CPU_TUNE_FORMAT, id, build);
}

/* Parses the whole file into isa; NULL when valid, else what is wrong at *line_no. */
static const char *parse(cpu_kernels *k, char *text, int8_t (*isa)[CPU_SHAPE_COUNT],
                         int8_t (*packed)[CPU_SHAPE_COUNT], int *line_no) {
    char id[128], build[128], want_head[32];
    cpu_id(id, sizeof id);
    cpu_build_id(build, sizeof build);
    snprintf(want_head, sizeof want_head, "tessera-kernels %d", CPU_TUNE_FORMAT);
    bool ended = false;
    int n = 0;
    *line_no = 0;
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl == NULL) {
            return "truncated (last line has no newline)";
        }
        *nl = '\0';
        *line_no = ++n;
        if (ended) {
            return "text after 'end'";
        }
        if (n == 1) {
            if (strcmp(line, want_head) != 0) {
                return "not a tessera kernel cache of this format version";
            }
        } else if (n == 2) {
            if (strncmp(line, "cpu ", 4) != 0 || strcmp(line + 4, id) != 0) {
                return "measured on another CPU";
            }
        } else if (n == 3) {
            if (strncmp(line, "build ", 6) != 0 || strcmp(line + 6, build) != 0) {
                return "measured with another tessera build (its kernels may differ)";
            }
        } else if (strcmp(line, "end") == 0) {
            ended = true;
        } else {
            const char *why = parse_entry(k, line, isa, packed);
            if (why != NULL) {
                return why;
            }
        }
        line = nl + 1;
    }
    return ended ? NULL : "truncated (no 'end' line)";
}

void cpu_tune_load(cpu_kernels *k) {
    FILE *f = fopen(k->path, "rb");
    if (f == NULL) {
        if (errno != ENOENT) {
            note(k, "kernel cache %s ignored: %s; measuring again", k->path, strerror(errno));
        }
        return;
    }
    char *text = malloc(CACHE_MAX_BYTES + 1);
    size_t len = text != NULL ? fread(text, 1, CACHE_MAX_BYTES + 1, f) : 0;
    bool read_err = ferror(f) != 0;
    fclose(f);
    if (text == NULL) {
        note(k, "kernel cache %s ignored: out of memory", k->path);
        return;
    }
    int8_t isa[TS_TYPE_COUNT][CPU_SHAPE_COUNT], packed[TS_TYPE_COUNT][CPU_SHAPE_COUNT];
    memset(isa, -1, sizeof isa);
    memset(packed, 0, sizeof packed);
    int line_no = 0;
    const char *why = NULL;
    if (read_err) {
        why = "read error";
    } else if (len > CACHE_MAX_BYTES) {
        why = "larger than any cache this writes";
    } else if (memchr(text, '\0', len) != NULL) {
        why = "not text";
    } else {
        text[len] = '\0';
        why = parse(k, text, isa, packed, &line_no);
    }
    for (int t = 0; why == NULL && t < TS_TYPE_COUNT; t++) {
        if (isa[t][CPU_SHAPE_ROW] != isa[t][CPU_SHAPE_ROWS] ||
            packed[t][CPU_SHAPE_ROW] != packed[t][CPU_SHAPE_ROWS]) {
            /* One level per type (cpu_tune.c): a half entry or two levels would make a
             * token's result depend on its batch; one layout per type, since a weight has
             * one copy. */
            why = "a type with two levels or layouts, or one shape class only";
        }
    }
    free(text);
    if (why != NULL) {
        if (line_no > 0) {
            note(k, "kernel cache %s ignored: line %d: %s; measuring again", k->path, line_no, why);
        } else {
            note(k, "kernel cache %s ignored: %s; measuring again", k->path, why);
        }
        return;
    }
    memcpy(k->isa, isa, sizeof isa);
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        k->packed[t] = packed[t][CPU_SHAPE_ROW] != 0;
    }
}

/* mkdir -p of the directory part of path. */
static bool make_parent_dirs(const char *path) {
    char dir[sizeof((cpu_kernels *)0)->path];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        return true;
    }
    *slash = '\0';
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                return false;
            }
            *p = '/';
        }
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

void cpu_tune_save(cpu_kernels *k) {
    if (k->path[0] == '\0') {
        return;
    }
    if (!make_parent_dirs(k->path)) {
        note(k, "kernel choices are not cached: cannot create the directory of %s: %s", k->path,
             strerror(errno));
        return;
    }
    char tmp[sizeof k->path + 32], head[384];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", k->path, (long)getpid());
    cpu_cache_head(head, sizeof head);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        note(k, "kernel choices are not cached: %s: %s", tmp, strerror(errno));
        return;
    }
    fputs(head, f);
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        for (int s = 0; s < CPU_SHAPE_COUNT; s++) {
            if (k->isa[t][s] >= 0) {
                fprintf(f, "%s %s %s%s\n", ts_type_name((uint32_t)t), k_shape_names[s],
                        ts_isa_name((ts_isa)k->isa[t][s]), k->packed[t] ? " packed" : "");
            }
        }
    }
    fprintf(f, "end\n");
    bool ok = fflush(f) == 0 && ferror(f) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, k->path) != 0) {
        note(k, "kernel choices are not cached: writing %s: %s", k->path, strerror(errno));
        unlink(tmp);
    }
}

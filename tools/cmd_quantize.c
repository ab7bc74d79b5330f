/*
 * cmd_quantize.c — `tessera quantize IN.gguf OUT.gguf TYPE [--pure]`: requantize a model.
 *
 * IN holds F32, F16 or BF16 weights. TYPE is a tensor type (F32 F16 BF16 Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 IQ4_NL IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K MXFP4) or a mix (Q4_K_M, Q5_K_M). The per-tensor
 * rules (llama-quantize's; tensor data byte-identical to its output without an importance matrix)
 * and what --pure changes are ts_quantize_file's, documented in include/tessera.h. This file
 * parses the arguments and reports: notes about type fallbacks and a progress bar (only when
 * stderr is a terminal: in a log it was one long line of redraws) go to stderr, then a summary of
 * the tensors written per type. Exit: 0 ok, 1 failure, 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "commands.h"
#include "tessera.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tessera quantize IN.gguf OUT.gguf TYPE [--pure] [-t THREADS]\n\n"
               "Requantizes an F32/F16/BF16 model. TYPE: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0\n"
               "IQ4_NL IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K MXFP4, or the mixes Q4_K_M Q5_K_M.\n"
               "  --pure          use TYPE for every quantizable matrix (no per-tensor rules)\n"
               "  -t, --threads N threads (default: the physical cores); the output is the same\n"
               "                  for any N\n");
}

/* The library's name for TYPE (its canonical spelling), or NULL when it is not a target. */
static const char *find_type(const char *type) {
    const char *name;
    for (size_t i = 0; (name = ts_quantize_type_name(i)) != NULL; i++) {
        if (strcasecmp(name, type) == 0) {
            return name;
        }
    }
    return NULL;
}

static void note(void *user, const char *msg) {
    (void)user;
    fprintf(stderr, "quantize: %s\n", msg);
}

/* Redraws the bar; *user records that a line is open, to be ended before the summary. */
static void progress(void *user, const char *tensor, uint64_t done, uint64_t total) {
    const int width = 30;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * width + 0.5);
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-40.40s", fill, "##############################",
            width - fill, "", (int)(frac * 100.0 + 0.5), tensor);
    fflush(stderr);
    *(int *)user = 1;
}

int ts_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0, pure = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pure") == 0) {
            pure = 1;
        } else if (strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--threads") == 0) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || end == argv[i + 1] || *end != '\0' || v < 1 || v > 256) {
                fprintf(stderr, "quantize: %s needs a thread count from 1 to 256\n", argv[i]);
                return 2;
            }
            threads = (int)v;
            i++;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || npos == 3) {
            fprintf(stderr, "quantize: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos != 3) {
        usage(stderr);
        return 2;
    }
    const char *type = find_type(pos[2]);
    if (type == NULL) {
        fprintf(stderr, "quantize: unknown type '%s'\n", pos[2]);
        usage(stderr);
        return 2;
    }

    int bar_open = 0;
    uint64_t counts[TS_TYPE_COUNT] = {0};
    const ts_quantize_params qp = {
        .type = type,
        .pure = pure,
        .n_threads = threads,
        .progress = isatty(STDERR_FILENO) ? progress : NULL,
        .note = note,
        .user = &bar_open,
        .n_by_type = counts,
    };
    ts_error err = {0};
    ts_status st = ts_quantize_file(pos[0], pos[1], &qp, &err);
    if (bar_open) {
        fprintf(stderr, "\n");
    }
    if (st != TS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "quantize: wrote %s (%s%s):", pos[1], type, pure ? ", pure" : "");
    for (uint32_t t = 0; t < TS_TYPE_COUNT; t++) {
        if (counts[t]) {
            fprintf(stderr, " %" PRIu64 " x %s", counts[t], ts_type_name(t));
        }
    }
    fprintf(stderr, "\n");
    return 0;
}

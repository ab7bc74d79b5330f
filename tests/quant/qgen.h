/*
 * qgen.h — deterministic test inputs for the quant tests (test-only helper).
 *
 * The generator must give the same floats on every machine and compiler, because the
 * llama.cpp reference hashes were computed from its output: SplitMix64 for bits, uniform
 * doubles built exactly from 53 random bits, and normals approximated by the Irwin-Hall
 * sum of 12 uniforms minus 6 (only IEEE additions; no libm calls whose last bit could
 * differ between C libraries).
 */
#ifndef TS_TESTS_QUANT_QGEN_H
#define TS_TESTS_QUANT_QGEN_H

#include <stdint.h>

typedef struct qgen_rng {
    uint64_t state;
} qgen_rng;

static inline uint64_t qgen_next(qgen_rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double qgen_uniform(qgen_rng *r) {
    return (double)(qgen_next(r) >> 11) * 0x1p-53;
}

/* Approximately standard normal (mean 0, variance 1, support [-6, 6]). */
static inline double qgen_normal(qgen_rng *r) {
    double s = 0.0;
    for (int i = 0; i < 12; i++) {
        s += qgen_uniform(r);
    }
    return s - 6.0;
}

/* Kinds of rows the structured generator produces. */
enum {
    QGEN_NORMAL = 0, /* normal * scale */
    QGEN_ZEROS,      /* all zero */
    QGEN_CONST_POS,  /* 0.5 everywhere */
    QGEN_CONST_NEG,  /* -3 everywhere */
    QGEN_OUTLIER,    /* normal * 0.02 with one value of 40 per 256 */
    QGEN_TINY,       /* normal * 1e-6 */
    QGEN_HUGE,       /* normal * 1000 */
    QGEN_POSITIVE,   /* uniform [0, 1) */
    QGEN_NEGATIVE,   /* -uniform [0, 1) - 0.25 */
    QGEN_HALF_ZERO,  /* zero in every other 32-block, normal in the rest */
    QGEN_SPARSE,     /* one nonzero in 37 */
    QGEN_RAMP,       /* linear ramp from -1 to 1 */
    QGEN_GRID,       /* multiples of 0.25 in [-2, 2]: many exact rounding ties */
    QGEN_KIND_COUNT,
};

/* Fills one row of n values (n a multiple of 256) of the given kind. */
static inline void qgen_row(qgen_rng *r, int kind, float scale, float *x, int n) {
    for (int i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case QGEN_ZEROS:
            v = 0.0;
            break;
        case QGEN_CONST_POS:
            v = 0.5;
            break;
        case QGEN_CONST_NEG:
            v = -3.0;
            break;
        case QGEN_OUTLIER:
            v = (i % 256 == 77) ? 40.0 : 0.02 * qgen_normal(r);
            break;
        case QGEN_TINY:
            v = 1e-6 * qgen_normal(r);
            break;
        case QGEN_HUGE:
            v = 1000.0 * qgen_normal(r);
            break;
        case QGEN_POSITIVE:
            v = qgen_uniform(r);
            break;
        case QGEN_NEGATIVE:
            v = -qgen_uniform(r) - 0.25;
            break;
        case QGEN_HALF_ZERO:
            v = (i / 32) % 2 == 0 ? 0.0 : qgen_normal(r);
            break;
        case QGEN_SPARSE:
            v = (i % 37 == 5) ? qgen_normal(r) : 0.0;
            break;
        case QGEN_RAMP:
            v = -1.0 + 2.0 * (double)i / (double)(n - 1);
            break;
        case QGEN_GRID:
            v = 0.25 * (double)((int)(qgen_next(r) % 17) - 8);
            break;
        default:
            v = (double)scale * qgen_normal(r);
            break;
        }
        x[i] = (float)v;
    }
}

/* The reference matrix of the llama.cpp comparison: rows x cols floats, seed fixed.
 * Rows 0..QGEN_KIND_COUNT-2 are the structured kinds (after QGEN_NORMAL), the rest normal
 * with scales cycling through 0.02, 0.1, 1 and 7. */
#define QGEN_REF_SEED 0x7e55e7a2024ull
#define QGEN_REF_COLS 1024
#define QGEN_REF_ROWS 64

static inline void qgen_reference_matrix(float *x) {
    static const float scales[4] = {0.02f, 0.1f, 1.0f, 7.0f};
    qgen_rng r = {QGEN_REF_SEED};
    for (int row = 0; row < QGEN_REF_ROWS; row++) {
        int kind = row + 1 < QGEN_KIND_COUNT ? row + 1 : QGEN_NORMAL;
        qgen_row(&r, kind, scales[row % 4], x + (size_t)row * QGEN_REF_COLS, QGEN_REF_COLS);
    }
}

#endif /* TS_TESTS_QUANT_QGEN_H */

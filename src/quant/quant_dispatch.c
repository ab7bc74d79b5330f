/*
 * quant_dispatch.c — kernel tables per instruction-set level, CPU detection, and the scalar
 * gemm that every type has as its reference.
 *
 * Four constant tables (scalar, AVX2, AVX-VNNI, AVX-512) map a type to its kernels. A SIMD
 * table names the fastest kernel available at its level for each function and falls back to
 * a lower level where none exists. The avx512/ files are compiled with F/BW/VL/DQ + VNNI
 * + BF16 enabled, so the compiler may use any of them anywhere in those files; the AVX-512
 * level therefore requires all six. The AVX-VNNI level is the AVX2 one with the integer dot
 * products rebuilt with -mavxvnni (avxvnni/); it needs the AVX2 level's features and AVX-VNNI,
 * which some AVX-512 CPUs lack (they have the EVEX vpdpbusd only): ts_quant_ops_get gives
 * them the AVX2 table for it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"

const char *ts_isa_name(ts_isa isa) {
    switch (isa) {
    case TS_ISA_SCALAR:
        return "scalar";
    case TS_ISA_AVX2:
        return "avx2";
    case TS_ISA_AVXVNNI:
        return "avxvnni";
    case TS_ISA_AVX512:
        return "avx512";
    }
    return "unknown";
}

/* CPUID bits that older compilers' __builtin_cpu_supports does not name (clang 14 knows
 * neither "f16c" nor "avxvnni"): F16C is leaf 1 ECX bit 29, AVX-VNNI leaf 7 subleaf 1 EAX
 * bit 4. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

static bool cpuid_bit(unsigned leaf, unsigned sub, int reg, unsigned bit) {
    unsigned r[4] = {0, 0, 0, 0};
    if (__get_cpuid_max(0, NULL) < leaf) {
        return false;
    }
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    return (r[reg] >> bit) & 1u;
}
#endif

/* The AVX2 level's features (AVX2 + FMA + F16C). */
static bool cpu_avx2(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           cpuid_bit(1, 0, 2, 29);
#else
    return false;
#endif
}

static bool cpu_avxvnni(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return cpu_avx2() && cpuid_bit(7, 1, 0, 4);
#else
    return false;
#endif
}

/* What the CPU runs, asked once: CPUID is slow (on a virtual machine it traps to the
 * hypervisor) and the kernel tables are looked up for every MUL_MAT on every thread. */
static ts_isa probe_cpu_isa(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!cpu_avx2()) {
        return TS_ISA_SCALAR;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16")) {
        return TS_ISA_AVX512;
    }
    return cpu_avxvnni() ? TS_ISA_AVXVNNI : TS_ISA_AVX2;
#else
    return TS_ISA_SCALAR;
#endif
}

static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;
static ts_isa g_cpu_isa;
static bool g_cpu_avxvnni;

static void probe_once(void) {
    g_cpu_isa = probe_cpu_isa();
    g_cpu_avxvnni = cpu_avxvnni();
}

ts_isa ts_quant_cpu_isa(void) {
    pthread_once(&g_isa_once, probe_once);
    return g_cpu_isa;
}

bool ts_quant_isa_supported(ts_isa isa) {
    if ((unsigned)isa > (unsigned)ts_quant_cpu_isa()) {
        return false;
    }
    return isa != TS_ISA_AVXVNNI || g_cpu_avxvnni;
}

/* The highest level at or below isa that this CPU runs. */
static ts_isa runnable(ts_isa isa) {
    ts_isa cpu = ts_quant_cpu_isa();
    if ((unsigned)isa > (unsigned)cpu) {
        isa = cpu;
    }
    while (isa > TS_ISA_SCALAR && !ts_quant_isa_supported(isa)) {
        isa = (ts_isa)(isa - 1);
    }
    return isa;
}

ts_isa ts_quant_detect_isa(void) {
    ts_isa isa = ts_quant_cpu_isa();
    const char *env = getenv("TS_ISA");
    if (env != NULL) {
        /* Only lowers: asking for more than the CPU has would crash. Unknown names are
         * ignored rather than fatal, since this runs deep inside kernel selection. */
        for (int l = TS_ISA_SCALAR; l <= TS_ISA_AVX512; l++) {
            if (strcmp(env, ts_isa_name((ts_isa)l)) == 0 && l < (int)isa) {
                isa = runnable((ts_isa)l);
            }
        }
    }
    return isa;
}

void ts_q_gemm_generic(const ts_quant_ops *ops, int64_t k, int64_t nr, int64_t nc, float *c,
                       size_t ldc, const void *w, size_t ldw, const void *a, size_t lda) {
    for (int64_t r = 0; r < nr; r++) {
        const char *wr = (const char *)w + (size_t)r * ldw;
        for (int64_t j = 0; j < nc; j++) {
            float *out = (float *)((char *)c + (size_t)j * ldc) + r;
            ops->vec_dot(k, out, wr, (const char *)a + (size_t)j * lda);
        }
    }
}

/* gemm as a loop over a given vec_dot: one wrapper per (type, dot) pair. */
static void gemm_loop(ts_vec_dot_fn dot, int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc,
                      const void *w, size_t ldw, const void *a, size_t lda) {
    for (int64_t r = 0; r < nr; r++) {
        const char *wr = (const char *)w + (size_t)r * ldw;
        for (int64_t j = 0; j < nc; j++) {
            float *out = (float *)((char *)c + (size_t)j * ldc) + r;
            dot(k, out, wr, (const char *)a + (size_t)j * lda);
        }
    }
}

#define GEMM_LOOP(NAME, DOT)                                                                       \
    static void NAME(int64_t k, int64_t nr, int64_t nc, float *c, size_t ldc, const void *w,       \
                     size_t ldw, const void *a, size_t lda) {                                      \
        gemm_loop(DOT, k, nr, nc, c, ldc, w, ldw, a, lda);                                         \
    }

#define SCALAR_GEMM(T) GEMM_LOOP(gemm_##T##_scalar, ts_q_dot_##T##_scalar)
SCALAR_GEMM(f32)
SCALAR_GEMM(f16)
SCALAR_GEMM(bf16)
SCALAR_GEMM(q4_0)
SCALAR_GEMM(q4_1)
SCALAR_GEMM(q5_0)
SCALAR_GEMM(q5_1)
SCALAR_GEMM(q8_0)
SCALAR_GEMM(q8_1)
SCALAR_GEMM(iq4_nl)
SCALAR_GEMM(mxfp4)
SCALAR_GEMM(q2_k)
SCALAR_GEMM(q3_k)
SCALAR_GEMM(q4_k)
SCALAR_GEMM(q5_k)
SCALAR_GEMM(q6_k)
SCALAR_GEMM(iq4_xs)
SCALAR_GEMM(q8_k)

#define ENTRY(TYPE, VD, TF, FF, DOT, GEMM, ISA)                                                    \
    [TYPE] = {.type = TYPE,                                                                        \
              .vec_dot_type = VD,                                                                  \
              .to_float = TF,                                                                      \
              .from_float = FF,                                                                    \
              .vec_dot = DOT,                                                                      \
              .gemm = GEMM,                                                                        \
              .isa = ISA}
/* A type whose gemm also reads packed weights (GP). */
#define ENTRY_PACKED(TYPE, VD, TF, FF, DOT, GEMM, GP, ISA)                                         \
    [TYPE] = {.type = TYPE,                                                                        \
              .vec_dot_type = VD,                                                                  \
              .to_float = TF,                                                                      \
              .from_float = FF,                                                                    \
              .vec_dot = DOT,                                                                      \
              .gemm = GEMM,                                                                        \
              .gemm_packed = GP,                                                                   \
              .isa = ISA}

#define SCALAR_ENTRY(TYPE, VD, T)                                                                  \
    ENTRY(TYPE, VD, ts_q_to_float_##T##_scalar, ts_q_from_float_##T##_scalar,                      \
          ts_q_dot_##T##_scalar, gemm_##T##_scalar, TS_ISA_SCALAR)

static const ts_quant_ops k_scalar[TS_TYPE_COUNT] = {
    SCALAR_ENTRY(TS_TYPE_F32, TS_TYPE_F32, f32),
    SCALAR_ENTRY(TS_TYPE_F16, TS_TYPE_F32, f16),
    SCALAR_ENTRY(TS_TYPE_BF16, TS_TYPE_BF16, bf16),
    SCALAR_ENTRY(TS_TYPE_Q4_0, TS_TYPE_Q8_0, q4_0),
    SCALAR_ENTRY(TS_TYPE_Q4_1, TS_TYPE_Q8_1, q4_1),
    SCALAR_ENTRY(TS_TYPE_Q5_0, TS_TYPE_Q8_0, q5_0),
    SCALAR_ENTRY(TS_TYPE_Q5_1, TS_TYPE_Q8_1, q5_1),
    SCALAR_ENTRY(TS_TYPE_Q8_0, TS_TYPE_Q8_0, q8_0),
    SCALAR_ENTRY(TS_TYPE_Q8_1, TS_TYPE_Q8_1, q8_1),
    SCALAR_ENTRY(TS_TYPE_IQ4_NL, TS_TYPE_Q8_0, iq4_nl),
    SCALAR_ENTRY(TS_TYPE_MXFP4, TS_TYPE_Q8_0, mxfp4),
    SCALAR_ENTRY(TS_TYPE_Q2_K, TS_TYPE_Q8_K, q2_k),
    SCALAR_ENTRY(TS_TYPE_Q3_K, TS_TYPE_Q8_K, q3_k),
    SCALAR_ENTRY(TS_TYPE_Q4_K, TS_TYPE_Q8_K, q4_k),
    SCALAR_ENTRY(TS_TYPE_Q5_K, TS_TYPE_Q8_K, q5_k),
    SCALAR_ENTRY(TS_TYPE_Q6_K, TS_TYPE_Q8_K, q6_k),
    SCALAR_ENTRY(TS_TYPE_IQ4_XS, TS_TYPE_Q8_K, iq4_xs),
    SCALAR_ENTRY(TS_TYPE_Q8_K, TS_TYPE_Q8_K, q8_k),
};

#if defined(__x86_64__)
/* Types without a SIMD dot at a level run the scalar dot in a loop. */
GEMM_LOOP(gemm_iq4_nl_avx2, ts_q_dot_iq4_nl_avx2)
GEMM_LOOP(gemm_iq4_nl_avxvnni, ts_q_dot_iq4_nl_avxvnni)
GEMM_LOOP(gemm_q5_k_avx512, ts_q_dot_q5_k_avx512)

static const ts_quant_ops k_avx2[TS_TYPE_COUNT] = {
    ENTRY(TS_TYPE_F32, TS_TYPE_F32, ts_q_to_float_f32_scalar, ts_q_from_float_f32_scalar,
          ts_q_dot_f32_avx2, ts_q_gemm_f32_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_F16, TS_TYPE_F32, ts_q_to_float_f16_avx2, ts_q_from_float_f16_avx2,
          ts_q_dot_f16_avx2, ts_q_gemm_f16_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_BF16, TS_TYPE_BF16, ts_q_to_float_bf16_avx2, ts_q_from_float_bf16_avx2,
          ts_q_dot_bf16_avx2, ts_q_gemm_bf16_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q4_0, TS_TYPE_Q8_0, ts_q_to_float_q4_0_avx2, ts_q_from_float_q4_0_scalar,
                 ts_q_dot_q4_0_avx2, ts_q_gemm_q4_0_avx2, ts_q_gemm_q4_0_packed_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q4_1, TS_TYPE_Q8_1, ts_q_to_float_q4_1_avx2, ts_q_from_float_q4_1_scalar,
                 ts_q_dot_q4_1_avx2, ts_q_gemm_q4_1_avx2, ts_q_gemm_q4_1_packed_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q5_0, TS_TYPE_Q8_0, ts_q_to_float_q5_0_avx2, ts_q_from_float_q5_0_scalar,
                 ts_q_dot_q5_0_avx2, ts_q_gemm_q5_0_avx2, ts_q_gemm_q5_0_packed_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_Q5_1, TS_TYPE_Q8_1, ts_q_to_float_q5_1_scalar, ts_q_from_float_q5_1_scalar,
          ts_q_dot_q5_1_scalar, gemm_q5_1_scalar, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q8_0, TS_TYPE_Q8_0, ts_q_to_float_q8_0_avx2, ts_q_from_float_q8_0_avx2,
                 ts_q_dot_q8_0_avx2, ts_q_gemm_q8_0_avx2, ts_q_gemm_q8_0_packed_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_Q8_1, TS_TYPE_Q8_1, ts_q_to_float_q8_1_scalar, ts_q_from_float_q8_1_avx2,
          ts_q_dot_q8_1_scalar, gemm_q8_1_scalar, TS_ISA_AVX2),
    ENTRY(TS_TYPE_IQ4_NL, TS_TYPE_Q8_0, ts_q_to_float_iq4_nl_scalar, ts_q_from_float_iq4_nl_scalar,
          ts_q_dot_iq4_nl_avx2, gemm_iq4_nl_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_MXFP4, TS_TYPE_Q8_0, ts_q_to_float_mxfp4_avx2,
                 ts_q_from_float_mxfp4_scalar, ts_q_dot_mxfp4_avx2, ts_q_gemm_mxfp4_avx2,
                 ts_q_gemm_mxfp4_packed_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_Q2_K, TS_TYPE_Q8_K, ts_q_to_float_q2_k_scalar, ts_q_from_float_q2_k_scalar,
          ts_q_dot_q2_k_scalar, gemm_q2_k_scalar, TS_ISA_AVX2),
    ENTRY(TS_TYPE_Q3_K, TS_TYPE_Q8_K, ts_q_to_float_q3_k_scalar, ts_q_from_float_q3_k_scalar,
          ts_q_dot_q3_k_scalar, gemm_q3_k_scalar, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q4_K, TS_TYPE_Q8_K, ts_q_to_float_q4_k_avx2, ts_q_from_float_q4_k_scalar,
                 ts_q_dot_q4_k_avx2, ts_q_gemm_q4_k_avx2, ts_q_gemm_q4_k_packed_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q5_K, TS_TYPE_Q8_K, ts_q_to_float_q5_k_avx2, ts_q_from_float_q5_k_scalar,
                 ts_q_dot_q5_k_avx2, ts_q_gemm_q5_k_avx2, ts_q_gemm_q5_k_packed_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_Q6_K, TS_TYPE_Q8_K, ts_q_to_float_q6_k_avx2, ts_q_from_float_q6_k_scalar,
                 ts_q_dot_q6_k_avx2, ts_q_gemm_q6_k_avx2, ts_q_gemm_q6_k_packed_avx2, TS_ISA_AVX2),
    ENTRY_PACKED(TS_TYPE_IQ4_XS, TS_TYPE_Q8_K, ts_q_to_float_iq4_xs_avx2,
                 ts_q_from_float_iq4_xs_scalar, ts_q_dot_iq4_xs_avx2, ts_q_gemm_iq4_xs_avx2,
                 ts_q_gemm_iq4_xs_packed_avx2, TS_ISA_AVX2),
    ENTRY(TS_TYPE_Q8_K, TS_TYPE_Q8_K, ts_q_to_float_q8_k_scalar, ts_q_from_float_q8_k_avx2,
          ts_q_dot_q8_k_scalar, gemm_q8_k_scalar, TS_ISA_AVX2),
};

/* The AVX2 table with the kernels avxvnni/ rebuilds (the same bits, fewer instructions). */
static const ts_quant_ops k_avxvnni[TS_TYPE_COUNT] = {
    ENTRY(TS_TYPE_F32, TS_TYPE_F32, ts_q_to_float_f32_scalar, ts_q_from_float_f32_scalar,
          ts_q_dot_f32_avx2, ts_q_gemm_f32_avx2, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_F16, TS_TYPE_F32, ts_q_to_float_f16_avx2, ts_q_from_float_f16_avx2,
          ts_q_dot_f16_avx2, ts_q_gemm_f16_avx2, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_BF16, TS_TYPE_BF16, ts_q_to_float_bf16_avx2, ts_q_from_float_bf16_avx2,
          ts_q_dot_bf16_avx2, ts_q_gemm_bf16_avx2, TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q4_0, TS_TYPE_Q8_0, ts_q_to_float_q4_0_avx2, ts_q_from_float_q4_0_scalar,
                 ts_q_dot_q4_0_avxvnni, ts_q_gemm_q4_0_avxvnni, ts_q_gemm_q4_0_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q4_1, TS_TYPE_Q8_1, ts_q_to_float_q4_1_avx2, ts_q_from_float_q4_1_scalar,
                 ts_q_dot_q4_1_avxvnni, ts_q_gemm_q4_1_avxvnni, ts_q_gemm_q4_1_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q5_0, TS_TYPE_Q8_0, ts_q_to_float_q5_0_avx2, ts_q_from_float_q5_0_scalar,
                 ts_q_dot_q5_0_avxvnni, ts_q_gemm_q5_0_avxvnni, ts_q_gemm_q5_0_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_Q5_1, TS_TYPE_Q8_1, ts_q_to_float_q5_1_scalar, ts_q_from_float_q5_1_scalar,
          ts_q_dot_q5_1_scalar, gemm_q5_1_scalar, TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q8_0, TS_TYPE_Q8_0, ts_q_to_float_q8_0_avx2, ts_q_from_float_q8_0_avx2,
                 ts_q_dot_q8_0_avxvnni, ts_q_gemm_q8_0_avxvnni, ts_q_gemm_q8_0_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_Q8_1, TS_TYPE_Q8_1, ts_q_to_float_q8_1_scalar, ts_q_from_float_q8_1_avx2,
          ts_q_dot_q8_1_scalar, gemm_q8_1_scalar, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_IQ4_NL, TS_TYPE_Q8_0, ts_q_to_float_iq4_nl_scalar, ts_q_from_float_iq4_nl_scalar,
          ts_q_dot_iq4_nl_avxvnni, gemm_iq4_nl_avxvnni, TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_MXFP4, TS_TYPE_Q8_0, ts_q_to_float_mxfp4_avx2,
                 ts_q_from_float_mxfp4_scalar, ts_q_dot_mxfp4_avxvnni, ts_q_gemm_mxfp4_avxvnni,
                 ts_q_gemm_mxfp4_packed_avxvnni, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_Q2_K, TS_TYPE_Q8_K, ts_q_to_float_q2_k_scalar, ts_q_from_float_q2_k_scalar,
          ts_q_dot_q2_k_scalar, gemm_q2_k_scalar, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_Q3_K, TS_TYPE_Q8_K, ts_q_to_float_q3_k_scalar, ts_q_from_float_q3_k_scalar,
          ts_q_dot_q3_k_scalar, gemm_q3_k_scalar, TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q4_K, TS_TYPE_Q8_K, ts_q_to_float_q4_k_avx2, ts_q_from_float_q4_k_scalar,
                 ts_q_dot_q4_k_avxvnni, ts_q_gemm_q4_k_avxvnni, ts_q_gemm_q4_k_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q5_K, TS_TYPE_Q8_K, ts_q_to_float_q5_k_avx2, ts_q_from_float_q5_k_scalar,
                 ts_q_dot_q5_k_avxvnni, ts_q_gemm_q5_k_avxvnni, ts_q_gemm_q5_k_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_Q6_K, TS_TYPE_Q8_K, ts_q_to_float_q6_k_avx2, ts_q_from_float_q6_k_scalar,
                 ts_q_dot_q6_k_avxvnni, ts_q_gemm_q6_k_avxvnni, ts_q_gemm_q6_k_packed_avxvnni,
                 TS_ISA_AVXVNNI),
    ENTRY_PACKED(TS_TYPE_IQ4_XS, TS_TYPE_Q8_K, ts_q_to_float_iq4_xs_avx2,
                 ts_q_from_float_iq4_xs_scalar, ts_q_dot_iq4_xs_avxvnni, ts_q_gemm_iq4_xs_avxvnni,
                 ts_q_gemm_iq4_xs_packed_avxvnni, TS_ISA_AVXVNNI),
    ENTRY(TS_TYPE_Q8_K, TS_TYPE_Q8_K, ts_q_to_float_q8_k_scalar, ts_q_from_float_q8_k_avx2,
          ts_q_dot_q8_k_scalar, gemm_q8_k_scalar, TS_ISA_AVXVNNI),
};

static const ts_quant_ops k_avx512[TS_TYPE_COUNT] = {
    ENTRY(TS_TYPE_F32, TS_TYPE_F32, ts_q_to_float_f32_scalar, ts_q_from_float_f32_scalar,
          ts_q_dot_f32_avx512, ts_q_gemm_f32_avx512, TS_ISA_AVX512),
    ENTRY(TS_TYPE_F16, TS_TYPE_F32, ts_q_to_float_f16_avx512, ts_q_from_float_f16_avx2,
          ts_q_dot_f16_avx512, ts_q_gemm_f16_avx512, TS_ISA_AVX512),
    ENTRY(TS_TYPE_BF16, TS_TYPE_BF16, ts_q_to_float_bf16_avx512, ts_q_from_float_bf16_avx2,
          ts_q_dot_bf16_avx512, ts_q_gemm_bf16_avx512, TS_ISA_AVX512),
    /* Q4_0, Q4_1, Q5_0: the AVX-512 gemm does the AVX2 dot's float operations (avx512/q32.c) */
    ENTRY_PACKED(TS_TYPE_Q4_0, TS_TYPE_Q8_0, ts_q_to_float_q4_0_avx512, ts_q_from_float_q4_0_scalar,
                 ts_q_dot_q4_0_avx2, ts_q_gemm_q4_0_avx512, ts_q_gemm_q4_0_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_Q4_1, TS_TYPE_Q8_1, ts_q_to_float_q4_1_avx512, ts_q_from_float_q4_1_scalar,
                 ts_q_dot_q4_1_avx2, ts_q_gemm_q4_1_avx512, ts_q_gemm_q4_1_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_Q5_0, TS_TYPE_Q8_0, ts_q_to_float_q5_0_avx2, ts_q_from_float_q5_0_scalar,
                 ts_q_dot_q5_0_avx2, ts_q_gemm_q5_0_avx512, ts_q_gemm_q5_0_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q5_1, TS_TYPE_Q8_1, ts_q_to_float_q5_1_scalar, ts_q_from_float_q5_1_scalar,
          ts_q_dot_q5_1_scalar, gemm_q5_1_scalar, TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_Q8_0, TS_TYPE_Q8_0, ts_q_to_float_q8_0_avx512, ts_q_from_float_q8_0_avx2,
                 ts_q_dot_q8_0_avx512, ts_q_gemm_q8_0_avx512, ts_q_gemm_q8_0_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q8_1, TS_TYPE_Q8_1, ts_q_to_float_q8_1_scalar, ts_q_from_float_q8_1_avx2,
          ts_q_dot_q8_1_scalar, gemm_q8_1_scalar, TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_IQ4_NL, TS_TYPE_Q8_0, ts_q_to_float_iq4_nl_scalar,
                 ts_q_from_float_iq4_nl_scalar, ts_q_dot_iq4_nl_avx512, ts_q_gemm_iq4_nl_avx512,
                 ts_q_gemm_iq4_nl_packed_avx512, TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_MXFP4, TS_TYPE_Q8_0, ts_q_to_float_mxfp4_avx2,
                 ts_q_from_float_mxfp4_scalar, ts_q_dot_mxfp4_avx512, ts_q_gemm_mxfp4_avx512,
                 ts_q_gemm_mxfp4_packed_avx512, TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q2_K, TS_TYPE_Q8_K, ts_q_to_float_q2_k_scalar, ts_q_from_float_q2_k_scalar,
          ts_q_dot_q2_k_scalar, gemm_q2_k_scalar, TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q3_K, TS_TYPE_Q8_K, ts_q_to_float_q3_k_scalar, ts_q_from_float_q3_k_scalar,
          ts_q_dot_q3_k_scalar, gemm_q3_k_scalar, TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_Q4_K, TS_TYPE_Q8_K, ts_q_to_float_q4_k_avx512, ts_q_from_float_q4_k_scalar,
                 ts_q_dot_q4_k_avx512, ts_q_gemm_q4_k_avx512, ts_q_gemm_q4_k_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q5_K, TS_TYPE_Q8_K, ts_q_to_float_q5_k_avx512, ts_q_from_float_q5_k_scalar,
          ts_q_dot_q5_k_avx512, gemm_q5_k_avx512, TS_ISA_AVX512),
    ENTRY_PACKED(TS_TYPE_Q6_K, TS_TYPE_Q8_K, ts_q_to_float_q6_k_avx512, ts_q_from_float_q6_k_scalar,
                 ts_q_dot_q6_k_avx512, ts_q_gemm_q6_k_avx512, ts_q_gemm_q6_k_packed_avx512,
                 TS_ISA_AVX512),
    ENTRY(TS_TYPE_IQ4_XS, TS_TYPE_Q8_K, ts_q_to_float_iq4_xs_avx2, ts_q_from_float_iq4_xs_scalar,
          ts_q_dot_iq4_xs_avx512, ts_q_gemm_iq4_xs_avx512, TS_ISA_AVX512),
    ENTRY(TS_TYPE_Q8_K, TS_TYPE_Q8_K, ts_q_to_float_q8_k_scalar, ts_q_from_float_q8_k_avx2,
          ts_q_dot_q8_k_scalar, gemm_q8_k_scalar, TS_ISA_AVX512),
};
#endif

const ts_quant_ops *ts_quant_ops_get(ts_type type, ts_isa isa) {
    if ((unsigned)type >= TS_TYPE_COUNT) {
        return NULL;
    }
    isa = runnable(isa);
    const ts_quant_ops *ops = &k_scalar[type];
#if defined(__x86_64__)
    if (isa == TS_ISA_AVX512) {
        ops = &k_avx512[type];
    } else if (isa == TS_ISA_AVXVNNI) {
        ops = &k_avxvnni[type];
    } else if (isa == TS_ISA_AVX2) {
        ops = &k_avx2[type];
    }
#endif
    return ops->to_float != NULL ? ops : NULL;
}

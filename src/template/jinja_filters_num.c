/*
 * jinja_filters_num.c — the number filters int, float and round, with Python's conversions:
 * int() truncates toward zero and reads "42", " 1_000 " and (through float) "4.7"; round()
 * rounds half to even on exact values. Where Python would give an integer beyond 64 bits
 * (1e300|int) the engine refuses with TS_ERR_RANGE rather than give a wrong number.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

/* Python's round(x, n) for floats: correctly rounded, ties to even on exact values. */
static double py_round(double x, int64_t nd) {
    if (!isfinite(x)) {
        return x;
    }
    if (nd >= 0 && nd <= 300) {
        char buf[400];
        snprintf(buf, sizeof(buf), "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    if (nd > 300) {
        return x;
    }
    if (nd < -308) {
        return copysign(0.0, x);
    }
    double p = pow(10.0, (double)-nd);
    double y = x / p;
    double r = nearbyint(y);
    return r * p;
}

/* int(x) of a float as jinja2's int filter gives it: truncation toward zero where the result
 * fits 64 bits; NaN is a ValueError there (the default); infinity is Python's OverflowError
 * and a finite float beyond int64 a big integer we cannot hold: both are errors rather than
 * a wrong number. */
static jj_value float_to_int(jj_ctx *c, double f, jj_value dflt) {
    if (isnan(f)) {
        return dflt;
    }
    if (f >= -9223372036854775808.0 && f < 9223372036854775808.0) {
        return jj_int((int64_t)f);
    }
    if (isinf(f)) {
        jj_fail(c, TS_ERR_RANGE, "int: cannot convert float %s to integer",
                f < 0 ? "-infinity" : "infinity");
    }
    char repr[40];
    jj_float_repr(f, repr);
    jj_fail(c, TS_ERR_RANGE, "int: %s does not fit the engine's 64-bit integers", repr);
}

jj_value jj_filter_int(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"default", "base", NULL};
    jj_args_check(c, a, "int", 2, kw);
    const jj_value *d = jj_arg(a, 0, "default");
    int64_t base = jj_int_arg(c, jj_arg(a, 1, "base"), 10, "int base");
    jj_value dflt = d ? *d : jj_int(0);
    switch (v.type) {
    case JJ_UNDEF:
        jj_undef_fail(c, v);
    case JJ_INT:
    case JJ_BOOL:
        return jj_int(v.i);
    case JJ_FLOAT:
        return float_to_int(c, v.f, dflt);
    case JJ_STR: {
        /* Python's int(s, base) accepts digits with single underscores between them;
         * jinja2 then tries int(float(s)). The copy drops the underscores. */
        jj_value t = jj_strip(c, v, jj_none(), true, true);
        char *buf = jj_alloc(c->arena, t.s.n + 1);
        size_t k = 0;
        for (size_t i = 0; i < t.s.n; i++) {
            if (!(t.s.p[i] == '_' && i > 0 && i + 1 < t.s.n &&
                  isalnum((unsigned char)t.s.p[i - 1]) && isalnum((unsigned char)t.s.p[i + 1]))) {
                buf[k++] = t.s.p[i];
            }
        }
        buf[k] = 0;
        if (k == 0 || memchr(buf, 0, k)) {
            return dflt;
        }
        char *end;
        if (base >= 2 && base <= 36) {
            errno = 0;
            long long r = strtoll(buf, &end, (int)base);
            if (*end == 0) {
                if (errno == ERANGE) {
                    /* Python's integer would be exact; ours cannot hold it. */
                    jj_fail(c, TS_ERR_RANGE,
                            "int: '%.40s' does not fit the engine's 64-bit integers", buf);
                }
                return jj_int(r);
            }
        }
        double f = strtod(buf, &end);
        if (*end != 0) {
            return dflt;
        }
        return float_to_int(c, f, dflt);
    }
    default:
        return dflt;
    }
}

jj_value jj_filter_float(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"default", NULL};
    jj_args_check(c, a, "float", 1, kw);
    const jj_value *d = jj_arg(a, 0, "default");
    jj_value dflt = d ? *d : jj_float(0.0);
    if (v.type == JJ_UNDEF) {
        jj_undef_fail(c, v);
    }
    if (v.type == JJ_FLOAT) {
        return v;
    }
    if (v.type == JJ_INT || v.type == JJ_BOOL) {
        return jj_float((double)v.i);
    }
    if (v.type == JJ_STR) {
        jj_value t = jj_strip(c, v, jj_none(), true, true);
        char buf[128];
        if (t.s.n == 0 || t.s.n >= sizeof(buf)) {
            return dflt;
        }
        memcpy(buf, t.s.p, t.s.n);
        buf[t.s.n] = 0;
        char *end;
        double f = strtod(buf, &end);
        return *end == 0 ? jj_float(f) : dflt;
    }
    return dflt;
}

jj_value jj_filter_round(jj_ctx *c, jj_value v, const jj_args *a) {
    static const char *const kw[] = {"precision", "method", NULL};
    jj_args_check(c, a, "round", 2, kw);
    int64_t prec = jj_int_arg(c, jj_arg(a, 0, "precision"), 0, "round precision");
    const jj_value *m = jj_arg(a, 1, "method");
    if (v.type != JJ_INT && v.type != JJ_BOOL && v.type != JJ_FLOAT) {
        jj_fail(c, TS_ERR_TYPE, "type %s doesn't define __round__ method", jj_type_name(v));
    }
    if (!m || jj_str_eq(*m, "common")) {
        if (v.type != JJ_FLOAT) {
            return jj_int(v.i); /* round(int, n) stays an int for n >= 0 */
        }
        return jj_float(py_round(v.f, prec));
    }
    double x = v.type == JJ_FLOAT ? v.f : (double)v.i;
    double p = pow(10.0, (double)prec);
    if (jj_str_eq(*m, "ceil")) {
        return jj_float(ceil(x * p) / p);
    }
    if (jj_str_eq(*m, "floor")) {
        return jj_float(floor(x * p) / p);
    }
    jj_fail(c, TS_ERR_RANGE, "method must be common, ceil or floor");
}

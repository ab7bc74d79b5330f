/*
 * gguf_get.c — typed access to GGUF metadata: getters by key and by index, array elements.
 *
 * Values were validated at open, so reading them here only decodes little-endian bytes.
 * Type mismatches are reported, never coerced silently, except by the documented lenient
 * getters (ts_gguf_get_int / ts_gguf_get_float) and the array number accessors.
 *
 * The getters are public: each accepts a NULL ts_error and substitutes a local one, so the
 * helpers below always have a buffer to write into.
 */
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

ts_status ts_gguf_find_key(const ts_gguf *g, const char *key, uint64_t *index) {
    return gguf_names_find(&g->kv_names, key, index) ? TS_OK : TS_ERR_NOT_FOUND;
}

uint64_t ts_gguf_kv_count(const ts_gguf *g) {
    return g->n_kv;
}

const char *ts_gguf_kv_key(const ts_gguf *g, uint64_t i) {
    return i < g->n_kv ? g->kv[i].key : NULL;
}

ts_gguf_type ts_gguf_kv_type(const ts_gguf *g, uint64_t i) {
    return i < g->n_kv ? (ts_gguf_type)g->kv[i].type : TS_GGUF_TYPE_COUNT;
}

static ts_status lookup(const ts_gguf *g, const char *key, const gguf_kv **kv, ts_error *err) {
    uint64_t i;
    if (key == NULL || !gguf_names_find(&g->kv_names, key, &i)) {
        return ts_error_set(err, TS_ERR_NOT_FOUND, "gguf: key '%s' not found",
                            key != NULL ? key : "(null)");
    }
    *kv = &g->kv[i];
    return TS_OK;
}

static ts_status lookup_typed(const ts_gguf *g, const char *key, ts_gguf_type type,
                              const gguf_kv **kv, ts_error *err) {
    ts_status st = lookup(g, key, kv, err);
    if (st == TS_OK && (*kv)->type != (uint32_t)type) {
        return ts_error_set(err, TS_ERR_TYPE, "gguf: key '%s' is %s, not %s", key,
                            ts_gguf_type_name((*kv)->type), ts_gguf_type_name(type));
    }
    return st;
}

/* Copies a scalar of `type` stored under key into out (sizeof matches by construction). */
static ts_status get_scalar(const ts_gguf *g, const char *key, ts_gguf_type type, void *out,
                            ts_error *err) {
    const gguf_kv *kv = NULL;
    ts_status st = lookup_typed(g, key, type, &kv, err);
    if (st == TS_OK) {
        memcpy(out, kv->value, gguf_scalar_size(type));
    }
    return st;
}

ts_status ts_gguf_get_u8(const ts_gguf *g, const char *key, uint8_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_UINT8, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_i8(const ts_gguf *g, const char *key, int8_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_INT8, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_u16(const ts_gguf *g, const char *key, uint16_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_UINT16, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_i16(const ts_gguf *g, const char *key, int16_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_INT16, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_u32(const ts_gguf *g, const char *key, uint32_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_UINT32, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_i32(const ts_gguf *g, const char *key, int32_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_INT32, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_u64(const ts_gguf *g, const char *key, uint64_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_UINT64, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_i64(const ts_gguf *g, const char *key, int64_t *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_INT64, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_f32(const ts_gguf *g, const char *key, float *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_FLOAT32, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_f64(const ts_gguf *g, const char *key, double *out, ts_error *err) {
    ts_error local = {0};
    return get_scalar(g, key, TS_GGUF_FLOAT64, out, err != NULL ? err : &local);
}

ts_status ts_gguf_get_bool(const ts_gguf *g, const char *key, bool *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = lookup_typed(g, key, TS_GGUF_BOOL, &kv, err);
    if (st == TS_OK) {
        *out = kv->value[0] != 0;
    }
    return st;
}

static void str_at(const uint8_t *p, ts_gguf_str *out) {
    out->len = gguf_rd64(p);
    out->ptr = (const char *)p + 8;
}

static void arr_out(const gguf_arr *a, ts_gguf_array *out) {
    out->type = (ts_gguf_type)a->type;
    out->n = a->n;
    out->data = a->data;
    out->index = a;
}

ts_status ts_gguf_get_str(const ts_gguf *g, const char *key, ts_gguf_str *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = lookup_typed(g, key, TS_GGUF_STRING, &kv, err);
    if (st == TS_OK) {
        str_at(kv->value, out);
    }
    return st;
}

ts_status ts_gguf_get_array(const ts_gguf *g, const char *key, ts_gguf_array *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = lookup_typed(g, key, TS_GGUF_ARRAY, &kv, err);
    if (st == TS_OK) {
        arr_out(kv->arr, out);
    }
    return st;
}

/* Decodes one integer of `type` at p. Returns false when type is not an integer type; sets
 * *big when a uint64 does not fit int64. */
static bool decode_int(uint32_t type, const uint8_t *p, int64_t *out, bool *big) {
    *big = false;
    switch (type) {
    case TS_GGUF_UINT8:
        *out = p[0];
        return true;
    case TS_GGUF_INT8:
        *out = (int8_t)p[0];
        return true;
    case TS_GGUF_BOOL:
        *out = p[0] != 0;
        return true;
    case TS_GGUF_UINT16:
        *out = (uint16_t)(p[0] | p[1] << 8);
        return true;
    case TS_GGUF_INT16:
        *out = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        return true;
    case TS_GGUF_UINT32:
        *out = gguf_rd32(p);
        return true;
    case TS_GGUF_INT32:
        *out = (int32_t)gguf_rd32(p);
        return true;
    case TS_GGUF_INT64:
        *out = (int64_t)gguf_rd64(p);
        return true;
    case TS_GGUF_UINT64: {
        uint64_t v = gguf_rd64(p);
        *big = v > (uint64_t)INT64_MAX;
        *out = (int64_t)(v & (uint64_t)INT64_MAX);
        return true;
    }
    default:
        return false;
    }
}

static bool decode_float(uint32_t type, const uint8_t *p, double *out) {
    if (type == TS_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return true;
    }
    if (type == TS_GGUF_FLOAT64) {
        memcpy(out, p, 8);
        return true;
    }
    return false;
}

ts_status ts_gguf_get_int(const ts_gguf *g, const char *key, int64_t *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = lookup(g, key, &kv, err);
    if (st != TS_OK) {
        return st;
    }
    bool big;
    if (kv->type == TS_GGUF_BOOL || !decode_int(kv->type, kv->value, out, &big)) {
        return ts_error_set(err, TS_ERR_TYPE, "gguf: key '%s' is %s, not an integer", key,
                            ts_gguf_type_name(kv->type));
    }
    if (big) {
        return ts_error_set(err, TS_ERR_RANGE, "gguf: key '%s' = %" PRIu64 " does not fit int64",
                            key, gguf_rd64(kv->value));
    }
    return TS_OK;
}

ts_status ts_gguf_get_float(const ts_gguf *g, const char *key, double *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = lookup(g, key, &kv, err);
    if (st == TS_OK && !decode_float(kv->type, kv->value, out)) {
        return ts_error_set(err, TS_ERR_TYPE, "gguf: key '%s' is %s, not float32 or float64", key,
                            ts_gguf_type_name(kv->type));
    }
    return st;
}

static ts_status entry(const ts_gguf *g, uint64_t i, ts_gguf_type want, const gguf_kv **kv,
                       ts_error *err) {
    if (i >= g->n_kv) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "gguf: kv index %" PRIu64 " out of range (%" PRIu64 " entries)", i,
                            g->n_kv);
    }
    *kv = &g->kv[i];
    if ((*kv)->type != (uint32_t)want) {
        return ts_error_set(err, TS_ERR_TYPE, "gguf: kv %" PRIu64 " '%s' is %s, not %s", i,
                            (*kv)->key, ts_gguf_type_name((*kv)->type), ts_gguf_type_name(want));
    }
    return TS_OK;
}

ts_status ts_gguf_kv_str(const ts_gguf *g, uint64_t i, ts_gguf_str *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = entry(g, i, TS_GGUF_STRING, &kv, err);
    if (st == TS_OK) {
        str_at(kv->value, out);
    }
    return st;
}

ts_status ts_gguf_kv_array(const ts_gguf *g, uint64_t i, ts_gguf_array *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    const gguf_kv *kv = NULL;
    ts_status st = entry(g, i, TS_GGUF_ARRAY, &kv, err);
    if (st == TS_OK) {
        arr_out(kv->arr, out);
    }
    return st;
}

ts_status ts_gguf_kv_scalar(const ts_gguf *g, uint64_t i, const void **bytes, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (i >= g->n_kv) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "gguf: kv index %" PRIu64 " out of range (%" PRIu64 " entries)", i,
                            g->n_kv);
    }
    const gguf_kv *kv = &g->kv[i];
    if (gguf_scalar_size(kv->type) == 0) {
        return ts_error_set(err, TS_ERR_TYPE, "gguf: kv %" PRIu64 " '%s' is %s, not a scalar", i,
                            kv->key, ts_gguf_type_name(kv->type));
    }
    *bytes = kv->value;
    return TS_OK;
}

/* ---- array elements ---------------------------------------------------------------------- */

static ts_status check_elem(const ts_gguf_array *a, uint64_t i, ts_error *err) {
    if (a == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf: NULL array");
    }
    if (i >= a->n) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "gguf: array index %" PRIu64 " out of range (%" PRIu64 " elements)", i,
                            a->n);
    }
    return TS_OK;
}

static ts_status wrong_elem(const ts_gguf_array *a, const char *want, ts_error *err) {
    return ts_error_set(err, TS_ERR_TYPE, "gguf: array of %s elements, not %s",
                        ts_gguf_type_name(a->type), want);
}

ts_status ts_gguf_array_str(const ts_gguf_array *a, uint64_t i, ts_gguf_str *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    ts_status st = check_elem(a, i, err);
    if (st != TS_OK) {
        return st;
    }
    if (a->type != TS_GGUF_STRING) {
        return wrong_elem(a, "string", err);
    }
    const gguf_arr *d = a->index;
    if (d == NULL || d->elems == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf: array was not produced by the reader");
    }
    str_at(d->elems[i], out);
    return TS_OK;
}

ts_status ts_gguf_array_arr(const ts_gguf_array *a, uint64_t i, ts_gguf_array *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    ts_status st = check_elem(a, i, err);
    if (st != TS_OK) {
        return st;
    }
    if (a->type != TS_GGUF_ARRAY) {
        return wrong_elem(a, "array", err);
    }
    const gguf_arr *d = a->index;
    if (d == NULL || d->kids == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf: array was not produced by the reader");
    }
    arr_out(&d->kids[i], out);
    return TS_OK;
}

ts_status ts_gguf_array_int(const ts_gguf_array *a, uint64_t i, int64_t *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    ts_status st = check_elem(a, i, err);
    if (st != TS_OK) {
        return st;
    }
    size_t sz = gguf_scalar_size(a->type);
    bool big;
    if (sz == 0 || !decode_int(a->type, (const uint8_t *)a->data + i * sz, out, &big)) {
        return wrong_elem(a, "integer or bool", err);
    }
    if (big) {
        return ts_error_set(err, TS_ERR_RANGE,
                            "gguf: array element %" PRIu64 " (uint64) does not fit int64", i);
    }
    return TS_OK;
}

ts_status ts_gguf_array_float(const ts_gguf_array *a, uint64_t i, double *out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    ts_status st = check_elem(a, i, err);
    if (st != TS_OK) {
        return st;
    }
    size_t sz = gguf_scalar_size(a->type);
    if (sz == 0) {
        return wrong_elem(a, "numeric", err);
    }
    const uint8_t *p = (const uint8_t *)a->data + i * sz;
    if (decode_float(a->type, p, out)) {
        return TS_OK;
    }
    if (a->type == TS_GGUF_UINT64) {
        *out = (double)gguf_rd64(p);
        return TS_OK;
    }
    int64_t v;
    bool big;
    decode_int(a->type, p, &v, &big);
    *out = (double)v;
    return TS_OK;
}

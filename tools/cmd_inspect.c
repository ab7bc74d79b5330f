/*
 * cmd_inspect.c — `tessera inspect FILE [--tensors] [--json]`: what a GGUF file holds.
 *
 * Prints the header facts, every metadata entry (long arrays abbreviated to their first
 * elements and a count, long strings cut with their length), totals (parameters, bytes per
 * tensor type), whether the file loads as a model and which of its tensors the architecture
 * does not use (a feature tessera would silently ignore), and, with --tensors, the tensor
 * table. --json prints the same as one JSON
 * object. Text from the file is escaped before printing (control bytes and invalid UTF-8
 * become \xNN; in JSON, U+FFFD), so a hostile file cannot drive the terminal.
 * Exit status: 0 success, 1 the file could not be read (the reader's message on stderr),
 * 2 usage error.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "tessera.h"

#define ARRAY_SHOW    8    /* elements of an array shown before "... (N total)" */
#define STR_SHOW      64   /* bytes of a scalar string shown */
#define ELEM_STR_SHOW 32   /* bytes of a string inside an array shown */
#define JSON_STR_MAX  4096 /* bytes of a string kept in JSON output */

typedef struct type_total {
    uint64_t tensors;
    uint64_t params;
    uint64_t bytes;
} type_total;

static void usage(FILE *f) {
    fprintf(f, "usage: tessera inspect FILE [--tensors] [--json]\n\n"
               "Shows a GGUF file's header, metadata and totals, and whether it loads as a\n"
               "model (with the tensors its architecture does not use).\n"
               "  --tensors  also list every tensor (name, type, shape, bytes, offset)\n"
               "  --json     print one JSON object instead of text\n"
               "Exit status: 0 when the file loads (or holds no tensors), 1 when it cannot be\n"
               "read, 2 on a usage error, 3 when it holds tensors that do not load as a model.\n");
}

/* Length of the valid UTF-8 sequence starting at p (at most n bytes), or 0 if invalid. */
static size_t utf8_seq(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (p[i] & 0x3f);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

/* Prints at most `max` bytes of s escaped (and in quotes when `quoted`), noting the length if
 * cut. */
static void print_str(FILE *f, const char *ptr, uint64_t len, size_t max, bool quoted) {
    const uint8_t *p = (const uint8_t *)ptr;
    size_t shown = len < max ? (size_t)len : max;
    if (quoted) {
        fputc('"', f);
    }
    size_t i = 0;
    while (i < shown) {
        uint8_t c = p[i];
        size_t seq = c >= 0x80 ? utf8_seq(p + i, shown - i) : 1;
        if ((c == '"' && quoted) || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f || seq == 0) {
            fprintf(f, "\\x%02x", c);
            seq = 1;
        } else {
            fwrite(p + i, 1, seq, f);
        }
        i += seq;
    }
    if (quoted) {
        fputc('"', f);
    }
    if (shown < len) {
        fprintf(f, "... (%" PRIu64 " bytes)", len);
    }
}

static void print_scalar(FILE *f, ts_gguf_type type, const uint8_t *p) {
    switch (type) {
    case TS_GGUF_UINT8:
        fprintf(f, "%u", p[0]);
        break;
    case TS_GGUF_INT8:
        fprintf(f, "%d", (int8_t)p[0]);
        break;
    case TS_GGUF_BOOL:
        fputs(p[0] ? "true" : "false", f);
        break;
    case TS_GGUF_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        fprintf(f, "%u", v);
        break;
    }
    case TS_GGUF_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        fprintf(f, "%d", v);
        break;
    }
    case TS_GGUF_UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        fprintf(f, "%" PRIu32, v);
        break;
    }
    case TS_GGUF_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        fprintf(f, "%" PRId32, v);
        break;
    }
    case TS_GGUF_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        fprintf(f, "%" PRIu64, v);
        break;
    }
    case TS_GGUF_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        fprintf(f, "%" PRId64, v);
        break;
    }
    case TS_GGUF_FLOAT32: {
        float v;
        memcpy(&v, p, 4);
        fprintf(f, "%.9g", v);
        break;
    }
    case TS_GGUF_FLOAT64: {
        double v;
        memcpy(&v, p, 8);
        fprintf(f, "%.17g", v);
        break;
    }
    default:
        fputs("?", f);
        break;
    }
}

/* Bytes of one fixed-size element (the reader validated the type). */
static size_t elem_size(ts_gguf_type t) {
    switch (t) {
    case TS_GGUF_UINT8:
    case TS_GGUF_INT8:
    case TS_GGUF_BOOL:
        return 1;
    case TS_GGUF_UINT16:
    case TS_GGUF_INT16:
        return 2;
    case TS_GGUF_UINT32:
    case TS_GGUF_INT32:
    case TS_GGUF_FLOAT32:
        return 4;
    case TS_GGUF_UINT64:
    case TS_GGUF_INT64:
    case TS_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static void print_array(FILE *f, const ts_gguf_array *a) {
    fputc('[', f);
    uint64_t shown = a->n < ARRAY_SHOW ? a->n : ARRAY_SHOW;
    for (uint64_t i = 0; i < shown; i++) {
        if (i != 0) {
            fputs(", ", f);
        }
        if (a->type == TS_GGUF_STRING) {
            ts_gguf_str s;
            if (ts_gguf_array_str(a, i, &s, NULL) == TS_OK) {
                print_str(f, s.ptr, s.len, ELEM_STR_SHOW, true);
            }
        } else if (a->type == TS_GGUF_ARRAY) {
            ts_gguf_array in;
            if (ts_gguf_array_arr(a, i, &in, NULL) == TS_OK) {
                print_array(f, &in);
            }
        } else {
            print_scalar(f, a->type, (const uint8_t *)a->data + i * elem_size(a->type));
        }
    }
    if (shown < a->n) {
        fprintf(f, ", ... (%" PRIu64 " total)", a->n);
    }
    fputc(']', f);
}

static void type_label(char *buf, size_t size, const ts_gguf *g, uint64_t i) {
    ts_gguf_type t = ts_gguf_kv_type(g, i);
    ts_gguf_array a;
    if (t == TS_GGUF_ARRAY && ts_gguf_kv_array(g, i, &a, NULL) == TS_OK) {
        snprintf(buf, size, "%s[%" PRIu64 "]", ts_gguf_type_name(a.type), a.n);
    } else {
        snprintf(buf, size, "%s", ts_gguf_type_name(t));
    }
}

static void human_bytes(char *buf, size_t size, double b) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024, u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

static void shape_str(char *buf, size_t size, const ts_gguf_tensor *t) {
    size_t o = (size_t)snprintf(buf, size, "[");
    for (uint32_t d = 0; d < t->n_dims && o < size; d++) {
        o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    }
    if (o < size) {
        snprintf(buf + o, size - o, "]");
    }
}

static void totals(const ts_gguf *g, type_total *by_type, type_total *all) {
    memset(by_type, 0, sizeof(type_total) * TS_TYPE_COUNT);
    *all = (type_total){0};
    for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
        const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
        type_total *tt = &by_type[t->type];
        tt->tensors++, all->tensors++;
        tt->params += t->n_elements, all->params += t->n_elements;
        tt->bytes += t->nbytes, all->bytes += t->nbytes;
    }
}

/* The file opened as a model (when it has tensors): whether it loads, and the tensors its
 * architecture does not use. *llm is NULL and err says why when it does not load. */
static void open_model(const char *path, const ts_gguf *g, ts_llm **llm, ts_error *err) {
    *llm = NULL;
    if (ts_gguf_tensor_count(g) > 0) {
        ts_llm_open(path, NULL, llm, err);
    }
}

/* Returns false when the file holds tensors but does not load as a model. */
static bool print_model_text(FILE *f, const char *path, const ts_gguf *g) {
    ts_llm *llm = NULL;
    ts_error err = {0};
    open_model(path, g, &llm, &err);
    if (ts_gguf_tensor_count(g) == 0) {
        return true;
    }
    fprintf(f, "\nmodel:\n");
    if (llm == NULL) {
        fprintf(f, "  does not load: ");
        print_str(f, err.msg, strlen(err.msg), TS_ERROR_MSG_MAX, false);
        fputc('\n', f);
        return false;
    }
    ts_llm_info in;
    ts_llm_get_info(llm, &in);
    fprintf(f, "  loads as   %s\n", in.arch);
    fprintf(f, "  unused     %" PRId64 " tensors", in.n_unused_tensors);
    if (in.n_unused_tensors > 0) {
        fputs(" (not used by the architecture): ", f);
        print_str(f, in.unused_tensors, strlen(in.unused_tensors), SIZE_MAX, false);
    }
    fputc('\n', f);
    ts_llm_close(llm);
    return true;
}

/* Returns false when the file holds tensors but does not load as a model. */
static bool print_text(FILE *f, const char *path, const ts_gguf *g, bool tensors) {
    char hb[32], label[64];
    human_bytes(hb, sizeof hb, (double)ts_gguf_file_size(g));
    fprintf(f, "file       %s\n", path);
    fprintf(f, "size       %zu bytes (%s)\n", ts_gguf_file_size(g), hb);
    fprintf(f, "version    %" PRIu32 "\n", ts_gguf_version(g));
    fprintf(f, "alignment  %zu\n", ts_gguf_alignment(g));
    fprintf(f, "data at    0x%zx\n", ts_gguf_data_offset(g));
    fprintf(f, "metadata   %" PRIu64 " entries\n", ts_gguf_kv_count(g));
    fprintf(f, "tensors    %" PRIu64 "\n\nmetadata:\n", ts_gguf_tensor_count(g));
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        const char *key = ts_gguf_kv_key(g, i);
        type_label(label, sizeof label, g, i);
        fputs("  ", f);
        print_str(f, key, strlen(key), STR_SHOW, false);
        fprintf(f, "%*s %-16s ", (int)(strlen(key) < 40 ? 40 - strlen(key) : 0), "", label);
        ts_gguf_type t = ts_gguf_kv_type(g, i);
        ts_gguf_str s;
        ts_gguf_array a;
        const void *raw;
        if (t == TS_GGUF_STRING && ts_gguf_kv_str(g, i, &s, NULL) == TS_OK) {
            print_str(f, s.ptr, s.len, STR_SHOW, true);
        } else if (t == TS_GGUF_ARRAY && ts_gguf_kv_array(g, i, &a, NULL) == TS_OK) {
            print_array(f, &a);
        } else if (ts_gguf_kv_scalar(g, i, &raw, NULL) == TS_OK) {
            print_scalar(f, t, raw);
        }
        fputc('\n', f);
    }
    if (tensors && ts_gguf_tensor_count(g) > 0) {
        fprintf(f, "\ntensors:\n  %5s  %-36s %-8s %-24s %12s  %s\n", "#", "name", "type", "shape",
                "bytes", "offset");
        for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
            const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
            char shape[96];
            shape_str(shape, sizeof shape, t);
            fprintf(f, "  %5" PRIu64 "  ", i);
            print_str(f, t->name, strlen(t->name), STR_SHOW, false);
            size_t nl = strlen(t->name);
            fprintf(f, "%*s %-8s %-24s %12zu  0x%" PRIx64 "\n", (int)(nl < 36 ? 36 - nl : 0), "",
                    ts_type_name(t->type), shape, t->nbytes, t->offset);
        }
    }
    type_total by_type[TS_TYPE_COUNT], all;
    totals(g, by_type, &all);
    human_bytes(hb, sizeof hb, (double)all.bytes);
    fprintf(f,
            "\ntotals:\n  parameters %" PRIu64 " (%.2f M)\n  tensor data %" PRIu64 " bytes (%s)\n",
            all.params, (double)all.params / 1e6, all.bytes, hb);
    for (uint32_t id = 0; id < TS_TYPE_COUNT; id++) {
        if (by_type[id].tensors != 0) {
            human_bytes(hb, sizeof hb, (double)by_type[id].bytes);
            fprintf(
                f, "    %-8s %5" PRIu64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes (%s)\n",
                ts_type_name(id), by_type[id].tensors, by_type[id].params, by_type[id].bytes, hb);
        }
    }
    return print_model_text(f, path, g);
}

/* ---- JSON -------------------------------------------------------------------------------- */

/* A JSON string from file bytes: invalid UTF-8 and NUL become U+FFFD; cut at `max` bytes. */
static cJSON *json_str(const char *ptr, uint64_t len, size_t max) {
    const uint8_t *p = (const uint8_t *)ptr;
    size_t n = len < max ? (size_t)len : max;
    char *buf = malloc(3 * n + 1);
    if (buf == NULL) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t seq = utf8_seq(p + i, n - i);
        if (seq == 0 || p[i] == 0) {
            memcpy(buf + o, "\xef\xbf\xbd", 3), o += 3, i++;
        } else {
            memcpy(buf + o, p + i, seq), o += seq, i += seq;
        }
    }
    buf[o] = '\0';
    cJSON *s = cJSON_CreateString(buf);
    free(buf);
    return s;
}

/* Integers beyond 2^53 do not survive a JSON double; they become decimal strings. */
static cJSON *json_u64(uint64_t v) {
    if (v <= (UINT64_C(1) << 53)) {
        return cJSON_CreateNumber((double)v);
    }
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return cJSON_CreateString(b);
}

static cJSON *json_i64(int64_t v) {
    if (v >= -(INT64_C(1) << 53) && v <= (INT64_C(1) << 53)) {
        return cJSON_CreateNumber((double)v);
    }
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    return cJSON_CreateString(b);
}

static cJSON *json_scalar(ts_gguf_type type, const uint8_t *p) {
    union {
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    memcpy(&v, p, elem_size(type));
    switch (type) {
    case TS_GGUF_UINT8:
        return cJSON_CreateNumber(p[0]);
    case TS_GGUF_INT8:
        return cJSON_CreateNumber((int8_t)p[0]);
    case TS_GGUF_BOOL:
        return cJSON_CreateBool(p[0] != 0);
    case TS_GGUF_UINT16:
        return cJSON_CreateNumber(v.u16);
    case TS_GGUF_INT16:
        return cJSON_CreateNumber(v.i16);
    case TS_GGUF_UINT32:
        return cJSON_CreateNumber(v.u32);
    case TS_GGUF_INT32:
        return cJSON_CreateNumber(v.i32);
    case TS_GGUF_UINT64:
        return json_u64(v.u64);
    case TS_GGUF_INT64:
        return json_i64(v.i64);
    case TS_GGUF_FLOAT32:
        return cJSON_CreateNumber(v.f32);
    case TS_GGUF_FLOAT64:
        return cJSON_CreateNumber(v.f64);
    default:
        return cJSON_CreateNull();
    }
}

static cJSON *json_array(const ts_gguf_array *a) {
    cJSON *arr = cJSON_CreateArray();
    uint64_t shown = a->n < ARRAY_SHOW ? a->n : ARRAY_SHOW;
    for (uint64_t i = 0; i < shown && arr != NULL; i++) {
        cJSON *e = NULL;
        ts_gguf_str s;
        ts_gguf_array in;
        if (a->type == TS_GGUF_STRING && ts_gguf_array_str(a, i, &s, NULL) == TS_OK) {
            e = json_str(s.ptr, s.len, JSON_STR_MAX);
        } else if (a->type == TS_GGUF_ARRAY && ts_gguf_array_arr(a, i, &in, NULL) == TS_OK) {
            e = json_array(&in);
        } else {
            e = json_scalar(a->type, (const uint8_t *)a->data + i * elem_size(a->type));
        }
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

static cJSON *json_kv(const ts_gguf *g, uint64_t i) {
    cJSON *o = cJSON_CreateObject();
    const char *key = ts_gguf_kv_key(g, i);
    ts_gguf_type t = ts_gguf_kv_type(g, i);
    cJSON_AddItemToObject(o, "key", json_str(key, strlen(key), JSON_STR_MAX));
    cJSON_AddStringToObject(o, "type", ts_gguf_type_name(t));
    ts_gguf_str s;
    ts_gguf_array a;
    const void *raw;
    if (t == TS_GGUF_STRING && ts_gguf_kv_str(g, i, &s, NULL) == TS_OK) {
        cJSON_AddItemToObject(o, "value", json_str(s.ptr, s.len, JSON_STR_MAX));
        if (s.len > JSON_STR_MAX) {
            cJSON_AddItemToObject(o, "length", json_u64(s.len));
            cJSON_AddBoolToObject(o, "truncated", true);
        }
    } else if (t == TS_GGUF_ARRAY && ts_gguf_kv_array(g, i, &a, NULL) == TS_OK) {
        cJSON_AddStringToObject(o, "element_type", ts_gguf_type_name(a.type));
        cJSON_AddItemToObject(o, "count", json_u64(a.n));
        cJSON_AddItemToObject(o, "value", json_array(&a));
        if (a.n > ARRAY_SHOW) {
            cJSON_AddBoolToObject(o, "truncated", true);
        }
    } else if (ts_gguf_kv_scalar(g, i, &raw, NULL) == TS_OK) {
        cJSON_AddItemToObject(o, "value", json_scalar(t, raw));
    }
    return o;
}

static cJSON *json_tensor(const ts_gguf_tensor *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "name", json_str(t->name, strlen(t->name), JSON_STR_MAX));
    cJSON_AddStringToObject(o, "type", ts_type_name(t->type));
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (uint32_t d = 0; d < t->n_dims; d++) {
        cJSON_AddItemToArray(shape, json_i64(t->ne[d]));
    }
    cJSON_AddItemToObject(o, "elements", json_u64(t->n_elements));
    cJSON_AddItemToObject(o, "bytes", json_u64(t->nbytes));
    cJSON_AddItemToObject(o, "offset", json_u64(t->offset));
    return o;
}

static cJSON *json_totals(const ts_gguf *g) {
    type_total by_type[TS_TYPE_COUNT], all;
    totals(g, by_type, &all);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "tensors", json_u64(all.tensors));
    cJSON_AddItemToObject(o, "parameters", json_u64(all.params));
    cJSON_AddItemToObject(o, "bytes", json_u64(all.bytes));
    cJSON *types = cJSON_AddArrayToObject(o, "by_type");
    for (uint32_t id = 0; id < TS_TYPE_COUNT; id++) {
        if (by_type[id].tensors != 0) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", ts_type_name(id));
            cJSON_AddItemToObject(e, "tensors", json_u64(by_type[id].tensors));
            cJSON_AddItemToObject(e, "parameters", json_u64(by_type[id].params));
            cJSON_AddItemToObject(e, "bytes", json_u64(by_type[id].bytes));
            cJSON_AddItemToArray(types, e);
        }
    }
    return o;
}

/* Returns 0, 1 when the output could not be built, 3 when the file holds tensors but does not
 * load as a model (the JSON says why). */
static int print_json(FILE *f, const char *path, const ts_gguf *g, bool tensors) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "file", json_str(path, strlen(path), SIZE_MAX));
    cJSON_AddItemToObject(root, "size", json_u64(ts_gguf_file_size(g)));
    cJSON_AddNumberToObject(root, "version", ts_gguf_version(g));
    cJSON_AddItemToObject(root, "alignment", json_u64(ts_gguf_alignment(g)));
    cJSON_AddItemToObject(root, "data_offset", json_u64(ts_gguf_data_offset(g)));
    cJSON *md = cJSON_AddArrayToObject(root, "metadata");
    for (uint64_t i = 0; i < ts_gguf_kv_count(g); i++) {
        cJSON_AddItemToArray(md, json_kv(g, i));
    }
    if (tensors) {
        cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
        for (uint64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
            cJSON_AddItemToArray(ts, json_tensor(ts_gguf_tensor_at(g, i)));
        }
    }
    cJSON_AddItemToObject(root, "totals", json_totals(g));
    ts_llm *llm = NULL;
    ts_error err = {0};
    open_model(path, g, &llm, &err);
    bool loads = ts_gguf_tensor_count(g) == 0 || llm != NULL;
    if (ts_gguf_tensor_count(g) > 0) {
        cJSON *model = cJSON_AddObjectToObject(root, "model");
        cJSON_AddBoolToObject(model, "loads", llm != NULL);
        if (llm == NULL) {
            cJSON_AddItemToObject(model, "error", json_str(err.msg, strlen(err.msg), SIZE_MAX));
        } else {
            ts_llm_info in;
            ts_llm_get_info(llm, &in);
            cJSON_AddStringToObject(model, "architecture", in.arch);
            cJSON_AddItemToObject(model, "unused_tensors", json_i64(in.n_unused_tensors));
            cJSON_AddItemToObject(model, "unused_tensor_names",
                                  json_str(in.unused_tensors, strlen(in.unused_tensors), SIZE_MAX));
            ts_llm_close(llm);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (text == NULL) {
        fprintf(stderr, "tessera inspect: out of memory building JSON\n");
        return 1;
    }
    fputs(text, f);
    fputc('\n', f);
    cJSON_free(text);
    return loads ? 0 : 3;
}

int ts_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = false, json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--tensors") == 0) {
            tensors = true;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tessera inspect: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (path != NULL) {
            fprintf(stderr, "tessera inspect: more than one file given ('%s', '%s')\n", path, a);
            usage(stderr);
            return 2;
        } else {
            path = a;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "tessera inspect: no file given\n");
        usage(stderr);
        return 2;
    }
    ts_error err = {0};
    ts_gguf *g = NULL;
    if (ts_gguf_open(path, &g, &err) != TS_OK) {
        fprintf(stderr, "tessera inspect: %s: %s\n", path, err.msg);
        return 1;
    }
    int rc = 0;
    if (json) {
        rc = print_json(stdout, path, g, tensors);
    } else if (!print_text(stdout, path, g, tensors)) {
        rc = 3;
    }
    ts_gguf_close(g);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tessera inspect: writing output failed\n");
        return 1;
    }
    return rc;
}

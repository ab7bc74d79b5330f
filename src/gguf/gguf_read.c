/*
 * gguf_read.c — opening a GGUF file: header, metadata and tensor-info sections.
 *
 * The file is untrusted. Parsing runs twice over the same code: the counting pass validates
 * the structure and totals what the reader must store (entries, descriptors, name bytes),
 * then one block is allocated and the filling pass stores it and checks what needs the stored
 * names (duplicates, general.alignment, tensor shapes and placement). Counts in the header are
 * compared with the bytes that follow before either pass starts, so nothing is sized from a
 * number the file cannot back with its own bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

#define WHAT_MAX (GGUF_SHOW_BUF + 48)

/* What the counting pass learns and the filling pass needs. */
typedef struct sizes {
    size_t arena; /* bytes of NUL-terminated key and tensor-name copies */
    size_t n_arrs;
    size_t n_elems;
    size_t end; /* file offset just past the tensor infos */
} sizes;

/* State of one pass. In the counting pass g->kv, g->tensors and arena are NULL. */
typedef struct pass {
    ts_gguf *g;
    gguf_scan scan;
    char *arena;
    size_t arena_used;
    char what[WHAT_MAX];
    ts_error *err;
} pass;

static ts_status header(ts_gguf *g, ts_error *err) {
    const uint8_t *b = g->base;
    if (g->size < GGUF_MAGIC_LEN) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: file is %zu bytes, too short to hold the 4-byte magic", g->size);
    }
    if (memcmp(b, "GGUF", GGUF_MAGIC_LEN) != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: bad magic %02x %02x %02x %02x at offset 0x0 (expected \"GGUF\")",
                            b[0], b[1], b[2], b[3]);
    }
    if (g->size < 8) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: file is %zu bytes, too short to hold the version at offset 0x4",
                            g->size);
    }
    uint32_t v = gguf_rd32(b + 4);
    if (v != 2 && v != 3) {
        bool swapped = (v & 0xffffu) == 0 && ((v >> 24) == 2 || (v >> 24) == 3);
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "gguf: version %" PRIu32 " at offset 0x4 is not supported "
                            "(only versions 2 and 3)%s",
                            v, swapped ? "; the file looks big-endian" : "");
    }
    g->version = v;
    if (g->size < GGUF_HEADER_BYTES) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: file is %zu bytes, too short to hold the %d-byte header",
                            g->size, GGUF_HEADER_BYTES);
    }
    g->n_tensors = gguf_rd64(b + 8);
    g->n_kv = gguf_rd64(b + 16);
    size_t rem = g->size - GGUF_HEADER_BYTES;
    if (g->n_kv > rem / GGUF_MIN_KV_BYTES) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: header at offset 0x10 claims %" PRIu64
                            " metadata entries but only %zu bytes follow (each needs at least %d)",
                            g->n_kv, rem, GGUF_MIN_KV_BYTES);
    }
    size_t kv_min = (size_t)g->n_kv * GGUF_MIN_KV_BYTES;
    if (g->n_tensors > (rem - kv_min) / GGUF_MIN_TENSOR_BYTES) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: header at offset 0x8 claims %" PRIu64
                            " tensors but only %zu bytes follow the header and metadata minimum "
                            "(each tensor info needs at least %d)",
                            g->n_tensors, rem - kv_min, GGUF_MIN_TENSOR_BYTES);
    }
    return TS_OK;
}

/* Checks a key or tensor name and, in the filling pass, copies it into the arena. */
static ts_status take_name(pass *p, const char *kind, size_t at, const uint8_t *s, uint64_t len,
                           const char **out) {
    char shown[GGUF_SHOW_BUF];
    if (len == 0) {
        return ts_error_set(p->err, TS_ERR_FORMAT, "gguf: %s at offset 0x%zx: empty %s", p->what,
                            at, kind);
    }
    if (memchr(s, 0, (size_t)len) != NULL) {
        gguf_show_name(shown, s, len);
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s at offset 0x%zx: %s '%s' contains a NUL byte", p->what, at,
                            kind, shown);
    }
    if (p->arena != NULL) {
        char *dst = p->arena + p->arena_used;
        memcpy(dst, s, (size_t)len);
        dst[len] = '\0';
        *out = dst;
    }
    p->arena_used += (size_t)len + 1; /* len <= file size, and the sum is bounded by it too */
    gguf_show_name(shown, s, len);
    snprintf(p->what + strlen(p->what), WHAT_MAX - strlen(p->what), " '%s'", shown);
    return TS_OK;
}

static ts_status read_kv(pass *p, uint64_t i, size_t *pos) {
    ts_gguf *g = p->g;
    size_t at = *pos;
    snprintf(p->what, sizeof p->what, "kv %" PRIu64, i);
    const uint8_t *k;
    uint64_t klen;
    const char *key = NULL;
    ts_status st = gguf_scan_string(&p->scan, pos, "key", UINT64_MAX, &k, &klen);
    if (st == TS_OK) {
        st = take_name(p, "key", at, k, klen, &key);
    }
    if (st != TS_OK) {
        return st;
    }
    if (g->size - *pos < 4) {
        return ts_error_set(
            p->err, TS_ERR_FORMAT,
            "gguf: %s: value type at offset 0x%zx runs past end of file (%zu bytes)", p->what, *pos,
            g->size);
    }
    uint32_t type = gguf_rd32(g->base + *pos);
    if (type >= TS_GGUF_TYPE_COUNT) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s: unknown value type %" PRIu32 " at offset 0x%zx", p->what,
                            type, *pos);
    }
    *pos += 4;
    size_t vstart = *pos;
    gguf_arr *arr = NULL;
    st = gguf_scan_value(&p->scan, pos, type, &arr);
    if (st != TS_OK || g->kv == NULL) {
        return st;
    }
    g->kv[i] = (gguf_kv){key, at, type, g->base + vstart, *pos - vstart, arr};
    uint64_t first;
    if (gguf_names_insert(&g->kv_names, key, i, &first) != TS_OK) {
        return ts_error_set(p->err, TS_ERR_NOMEM, "gguf: out of memory indexing metadata keys");
    }
    if (first != UINT64_MAX) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s at offset 0x%zx: duplicate key (first defined by kv %" PRIu64
                            ")",
                            p->what, at, first);
    }
    return TS_OK;
}

static ts_status read_tensor_info(pass *p, uint64_t i, size_t *pos) {
    ts_gguf *g = p->g;
    gguf_tensor_info info = {.index = i, .offset = *pos};
    snprintf(p->what, sizeof p->what, "tensor %" PRIu64, i);
    const uint8_t *s;
    uint64_t len;
    ts_status st = gguf_scan_string(&p->scan, pos, "name", UINT64_MAX, &s, &len);
    if (st == TS_OK) {
        st = take_name(p, "tensor name", info.offset, s, len, &info.name);
    }
    if (st != TS_OK) {
        return st;
    }
    if (g->size - *pos < 4) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s: n_dims at offset 0x%zx runs past end of file (%zu bytes)",
                            p->what, *pos, g->size);
    }
    info.n_dims = gguf_rd32(g->base + *pos);
    if (info.n_dims < 1 || info.n_dims > TS_GGUF_MAX_DIMS) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s: n_dims %" PRIu32 " at offset 0x%zx is outside 1..%d",
                            p->what, info.n_dims, *pos, TS_GGUF_MAX_DIMS);
    }
    *pos += 4;
    size_t need = 8 * (size_t)info.n_dims + 4 + 8;
    if (g->size - *pos < need) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s: dims, type and offset at 0x%zx (%zu bytes) run past end of "
                            "file (%zu bytes)",
                            p->what, *pos, need, g->size);
    }
    for (uint32_t d = 0; d < info.n_dims; d++) {
        info.dims[d] = gguf_rd64(g->base + *pos + 8 * d);
    }
    *pos += 8 * (size_t)info.n_dims;
    info.type = gguf_rd32(g->base + *pos);
    info.data_off = gguf_rd64(g->base + *pos + 4);
    *pos += 12;
    if (g->tensors == NULL) {
        return TS_OK;
    }
    uint64_t first;
    if (gguf_names_insert(&g->tensor_names, info.name, i, &first) != TS_OK) {
        return ts_error_set(p->err, TS_ERR_NOMEM, "gguf: out of memory indexing tensor names");
    }
    if (first != UINT64_MAX) {
        return ts_error_set(p->err, TS_ERR_FORMAT,
                            "gguf: %s at offset 0x%zx: duplicate tensor name (first used by "
                            "tensor %" PRIu64 ")",
                            p->what, info.offset, first);
    }
    return gguf_tensor_init(g, &info, &g->tensors[i], p->err);
}

/* Reads general.alignment (when present) into g->alignment. */
static ts_status read_alignment(ts_gguf *g, ts_error *err) {
    g->alignment = TS_GGUF_DEFAULT_ALIGNMENT;
    uint64_t i;
    if (!gguf_names_find(&g->kv_names, "general.alignment", &i)) {
        return TS_OK;
    }
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != TS_GGUF_UINT32) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: kv %" PRIu64 " 'general.alignment' at offset 0x%zx: must be "
                            "uint32, found %s",
                            i, kv->offset, ts_gguf_type_name(kv->type));
    }
    uint32_t a = gguf_rd32(kv->value);
    if (a == 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: kv %" PRIu64 " 'general.alignment' at offset 0x%zx: alignment "
                            "is 0, must be a nonzero power of two",
                            i, kv->offset);
    }
    if ((a & (a - 1)) != 0) {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "gguf: kv %" PRIu64 " 'general.alignment' at offset 0x%zx: alignment "
                            "%" PRIu32 " is not a power of two",
                            i, kv->offset, a);
    }
    g->alignment = a;
    return TS_OK;
}

static ts_status run_pass(pass *p, sizes *sz) {
    ts_gguf *g = p->g;
    size_t pos = GGUF_HEADER_BYTES;
    ts_status st = TS_OK;
    for (uint64_t i = 0; i < g->n_kv && st == TS_OK; i++) {
        st = read_kv(p, i, &pos);
    }
    if (st == TS_OK && g->kv != NULL) {
        st = read_alignment(g, p->err);
        if (st == TS_OK) {
            size_t a = g->alignment;
            if (sz->end > SIZE_MAX - (a - 1)) {
                return ts_error_set(p->err, TS_ERR_OVERFLOW,
                                    "gguf: data section offset overflows size_t");
            }
            g->data_offset = (sz->end + a - 1) & ~(a - 1);
            if (g->n_tensors > 0 && g->data_offset > g->size) {
                return ts_error_set(p->err, TS_ERR_FORMAT,
                                    "gguf: data section starts at offset 0x%zx (tensor infos end "
                                    "at 0x%zx, padded to alignment %zu) but the file ends at 0x%zx",
                                    g->data_offset, sz->end, a, g->size);
            }
        }
    }
    for (uint64_t i = 0; i < g->n_tensors && st == TS_OK; i++) {
        st = read_tensor_info(p, i, &pos);
    }
    if (st == TS_OK && g->kv == NULL) {
        sz->arena = p->arena_used;
        sz->n_arrs = p->scan.n_arrs;
        sz->n_elems = p->scan.n_elems;
        sz->end = pos;
    }
    return st;
}

/* Adds room for n items of `size` bytes, aligned for any type, to *total. */
static bool add_part(size_t *total, size_t *at, size_t n, size_t size) {
    const size_t al = _Alignof(max_align_t);
    size_t start = (*total + al - 1) & ~(al - 1);
    if (start < *total || (size != 0 && n > (SIZE_MAX - start) / size)) {
        return false;
    }
    *at = start;
    *total = start + n * size;
    return true;
}

static ts_status parse(ts_gguf *g, ts_error *err) {
    ts_status st = header(g, err);
    if (st != TS_OK) {
        return st;
    }
    sizes sz = {0};
    pass count = {.g = g, .err = err, .scan = {.base = g->base, .size = g->size, .err = err}};
    count.scan.what = count.what;
    st = run_pass(&count, &sz);
    if (st != TS_OK) {
        return st;
    }
    size_t total = 0, o_kv, o_t, o_arr, o_el, o_arena;
    if (!add_part(&total, &o_kv, (size_t)g->n_kv, sizeof(gguf_kv)) ||
        !add_part(&total, &o_t, (size_t)g->n_tensors, sizeof(ts_gguf_tensor)) ||
        !add_part(&total, &o_arr, sz.n_arrs, sizeof(gguf_arr)) ||
        !add_part(&total, &o_el, sz.n_elems, sizeof(const uint8_t *)) ||
        !add_part(&total, &o_arena, sz.arena, 1)) {
        return ts_error_set(err, TS_ERR_OVERFLOW, "gguf: reader tables would overflow size_t");
    }
    g->block = malloc(total != 0 ? total : 1);
    if (g->block == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf: out of memory (%zu bytes of tables)", total);
    }
    char *b = g->block;
    g->kv = (gguf_kv *)(void *)(b + o_kv);
    g->tensors = (ts_gguf_tensor *)(void *)(b + o_t);
    if (gguf_names_reserve(&g->kv_names, g->n_kv) != TS_OK ||
        gguf_names_reserve(&g->tensor_names, g->n_tensors) != TS_OK) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf: out of memory for name tables");
    }
    pass fill = {.g = g, .err = err, .arena = b + o_arena};
    fill.scan = (gguf_scan){.base = g->base,
                            .size = g->size,
                            .err = err,
                            .what = fill.what,
                            .arrs = (gguf_arr *)(void *)(b + o_arr),
                            .elems = (const uint8_t **)(void *)(b + o_el)};
    st = run_pass(&fill, &sz);
    if (st != TS_OK) {
        return st;
    }
    return gguf_check_overlaps(g, err);
}

ts_status ts_gguf_open_memory(const void *data, size_t size, ts_gguf **out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (out == NULL || (data == NULL && size != 0)) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf: open_memory: NULL argument");
    }
    *out = NULL;
    ts_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return ts_error_set(err, TS_ERR_NOMEM, "gguf: out of memory");
    }
    g->base = data;
    g->size = size;
    ts_status st = parse(g, err);
    if (st != TS_OK) {
        ts_gguf_close(g);
        return st;
    }
    *out = g;
    return TS_OK;
}

ts_status ts_gguf_open(const char *path, ts_gguf **out, ts_error *err) {
    ts_error local = {0};
    err = err != NULL ? err : &local;
    if (path == NULL || out == NULL) {
        return ts_error_set(err, TS_ERR_INVALID_ARG, "gguf: open: NULL argument");
    }
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return ts_error_set(err, TS_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    }
    struct stat stb;
    if (fstat(fd, &stb) != 0) {
        int e = errno;
        close(fd);
        return ts_error_set(err, TS_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(stb.st_mode)) {
        close(fd);
        return ts_error_set(err, TS_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (stb.st_size == 0) {
        close(fd);
        return ts_error_set(err, TS_ERR_FORMAT, "gguf: '%s' is empty (0 bytes)", path);
    }
    if ((uintmax_t)stb.st_size > SIZE_MAX) {
        close(fd);
        return ts_error_set(err, TS_ERR_OVERFLOW, "gguf: '%s' is too large to map", path);
    }
    size_t size = (size_t)stb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) {
        return ts_error_set(err, TS_ERR_IO, "gguf: cannot map '%s' (%zu bytes): %s", path, size,
                            strerror(e));
    }
    ts_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) {
        munmap(map, size);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf: out of memory");
    }
    g->base = map;
    g->size = size;
    g->mapped = true;
    ts_status st = parse(g, err);
    if (st != TS_OK) {
        ts_gguf_close(g);
        return st;
    }
    *out = g;
    return TS_OK;
}

void ts_gguf_close(ts_gguf *g) {
    if (g == NULL) {
        return;
    }
    if (g->mapped) {
        munmap((void *)g->base, g->size);
    }
    gguf_names_free(&g->kv_names);
    gguf_names_free(&g->tensor_names);
    free(g->block);
    free(g);
}

uint32_t ts_gguf_version(const ts_gguf *g) {
    return g->version;
}

size_t ts_gguf_alignment(const ts_gguf *g) {
    return g->alignment;
}

size_t ts_gguf_file_size(const ts_gguf *g) {
    return g->size;
}

size_t ts_gguf_data_offset(const ts_gguf *g) {
    /* A file without tensors may end before the padding that would precede data; its (empty)
     * data section then starts at the end of the file. */
    return g->data_offset < g->size ? g->data_offset : g->size;
}

const void *ts_gguf_base(const ts_gguf *g) {
    return g->base;
}

bool ts_gguf_mapped(const ts_gguf *g) {
    return g->mapped;
}

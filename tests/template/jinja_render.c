/* jinja_render.c — renders one template file with one variables file and prints the result
 * (or "ERROR <status> <message>" and exit 1). A helper for scripts/reference/jinja_diff.py,
 * which compares it with Python's jinja2 on random templates; not a test by itself.
 *
 *     template_jinja_render TEMPLATE VARS.json [NOW]
 */
#include <stdio.h>
#include <stdlib.h>

#include "template/jinja.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TEMPLATE VARS.json [NOW]\n", argv[0]);
        return 2;
    }
    size_t tn, vn;
    char *src = slurp(argv[1], &tn), *vars = slurp(argv[2], &vn);
    if (!src || !vars) {
        fprintf(stderr, "cannot read %s\n", !src ? argv[1] : argv[2]);
        free(src);
        free(vars);
        return 2;
    }
    ts_tpl_options o = {.now = argc > 3 ? strtoll(argv[3], NULL, 10) : 1700000000};
    ts_error err = {0};
    ts_tpl *t = NULL;
    char *out = NULL;
    size_t n = 0;
    ts_status st = ts_tpl_compile(src, tn, &t, &err);
    if (st == TS_OK)
        st = ts_tpl_render(t, vars, vn, &o, &out, &n, &err);
    if (st == TS_OK)
        fwrite(out, 1, n, stdout);
    else
        printf("ERROR %s %s\n", ts_status_str(st), err.msg);
    free(out);
    ts_tpl_free(t);
    free(src);
    free(vars);
    return st == TS_OK ? 0 : 1;
}

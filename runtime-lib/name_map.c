/* name_map.c - --name-map FILE: the names a model's tensors have in safetensors files written
 * elsewhere (a PyTorch state_dict), one `cannl_name = pytorch.key` per line, `#` comments and
 * blank lines ignored. A param's mapping carries over to its optimiser state
 * ("w1.exp_avg" -> "fc1.weight.exp_avg" when w1 = fc1.weight; a repeat block's "w_q_0.exp_avg"
 * -> "q.weight.exp_avg" when w_q.0 = q.weight). `cannl_name = key [d0, d1, ...]`
 * also gives the shape the files hold the tensor (and its state) under, of as many elements as
 * the model's (contract v2 §6: written so; a mapped tensor is read from any such shape).
 *
 * A map is checked whole before anything is read or trained (errors "FILE:LINE: ..."): each
 * line's names are UTF-8 text without control characters, at most CANNL__NAME_MAP_MAX bytes;
 * no name is mapped twice or onto the same name as another; nothing is mapped onto
 * `__metadata__` or onto an optimiser-state name (`X.exp_avg`, `X.exp_avg_sq`,
 * `X.momentum_buffer`: the name a param X's state has in a checkpoint) unless it is that
 * state itself; and, against the model (cannl__name_map_check_names), every name mapped is a
 * tensor of the model, none is mapped onto another tensor's name, and no two tensors end up
 * with one name in the files. Otherwise the save at the end of a run fails (two tensors of
 * one name) or writes a header that is not valid JSON. */
#define _POSIX_C_SOURCE 200809L

#include "json_min.h"
#include "rt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct cannl__name_map {
    size_t n;
    char **from, **to;
    int *line; /* the line of the file each mapping is on */
    /* The shape a mapping's tensor has in the files (`w_q.0 = q.weight [128, 128]`, contract v2
       §6: written so, read from any shape of as many elements); ndims -1: the model's. */
    int32_t *ndims;
    int64_t *shape; /* CANNL_MAX_DIMS per mapping */
};

/* The suffixes of a param's optimiser state in checkpoints (generator/autodiff/optimizer.cpp:
   "<param>.<suffix>", PyTorch's names). */
static const char *const STATE_SUFFIXES[] = {"exp_avg", "exp_avg_sq", "momentum_buffer"};

/* The optimiser-state suffix name ends with (".exp_avg"), or NULL. */
static const char *state_suffix(const char *name) {
    const size_t len = strlen(name);
    for (size_t i = 0; i < sizeof STATE_SUFFIXES / sizeof STATE_SUFFIXES[0]; i++) {
        const size_t k = strlen(STATE_SUFFIXES[i]);
        if (len > k + 1 && name[len - k - 1] == '.' && strcmp(name + len - k, STATE_SUFFIXES[i]) == 0)
            return STATE_SUFFIXES[i];
    }
    return NULL;
}

/* The bytes of s's longest prefix of at most max bytes that ends between two characters (s is
   UTF-8): the quote of a name or a line in a message, cut where a character begins. */
static int utf8_prefix(const char *s, int max) {
    int n = 0;
    while (s[n] && n < max) n++;
    if (s[n]) /* cut: not inside a sequence (before a continuation byte 10xxxxxx) */
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    return n;
}

/* An error "PATH:LINE: message". */
static cannl_status line_fail(cannl_error *err, cannl_status st, const char *path, int line, const char *fmt, ...)
    CANNL__PRINTF(5, 6);
static cannl_status line_fail(cannl_error *err, cannl_status st, const char *path, int line, const char *fmt, ...) {
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cannl__fail(err, st, NULL, "%s:%d: %s", path, line, msg);
}

/* The first control character of s[0..n) (C0 but tab, DEL, or C1: U+0080 to U+009F, which
   UTF-8 writes C2 80 to C2 9F) as its code point, or -1. s is well-formed UTF-8. */
static long control_char(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n; i++) {
        if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7F) return p[i];
        if (p[i] == 0xC2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) return p[i + 1];
    }
    return -1;
}

void cannl__name_map_free(cannl__name_map *map) {
    if (!map) return;
    for (size_t i = 0; i < map->n; i++) {
        free(map->from[i]);
        free(map->to[i]);
    }
    free(map->from);
    free(map->to);
    free(map->line);
    free(map->ndims);
    free(map->shape);
    free(map);
}

int cannl__name_map_entry(const cannl__name_map *map, size_t i, const char **from, const char **to, int *line) {
    if (!map || i >= map->n) return 0;
    *from = map->from[i];
    *to = map->to[i];
    *line = map->line[i];
    return 1;
}

/* s[0..n) without the spaces around it, as a new string; NULL when out of memory. */
static char *trimmed(const char *s, size_t n) {
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

/* "[d0, d1, ...]" (positive whole numbers, at most CANNL_MAX_DIMS): 0 and the shape, else 1. */
static int parse_shape(const char *s, int32_t *ndims, int64_t *shape) {
    *ndims = 0;
    if (*s++ != '[') return 1;
    while (*s == ' ' || *s == '\t') s++;
    while (*s != ']') {
        if (*ndims == CANNL_MAX_DIMS || *s < '0' || *s > '9') return 1;
        errno = 0;
        char *end;
        const long long v = strtoll(s, &end, 10);
        if (errno || v <= 0) return 1;
        shape[(*ndims)++] = (int64_t)v;
        s = end;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == ',') {
            s++;
            while (*s == ' ' || *s == '\t') s++;
            if (*s == ']') return 1;
        } else if (*s != ']') {
            return 1;
        }
    }
    return s[1] != '\0' || *ndims == 0;
}

static int valid_name(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s == ' ' || *s == '\t' || *s == '=' || *s == '"' || (unsigned char)*s < 0x20) return 0;
    return 1;
}

cannl_status cannl__name_map_load(const char *path, cannl__name_map **out, cannl_error *err) {
    *out = NULL;
    char eb[128];
    FILE *f = fopen(path, "r");
    if (!f) return cannl__fail(err, CANNL_E_IO, path, "cannot open the name map: %s", cannl__strerror(errno, eb, sizeof eb));
    cannl__name_map *map = calloc(1, sizeof *map);
    cannl_status st = map ? CANNL_OK : cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    size_t cap = 0, line_cap = 0;
    char *line = NULL;
    ssize_t got;
    for (int lineno = 1; st == CANNL_OK && (got = getline(&line, &line_cap, f)) >= 0; lineno++) {
        size_t len = (size_t)got;
        if (len > 4096) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "the line is longer than 4096 bytes");
            break;
        }
        if (memchr(line, '\0', len)) { /* which would end the line early */
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "control character U+0000 in the line (names are "
                           "printable text)");
            break;
        }
        if (lineno == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 byte-order mark (a Windows editor's) */
            memmove(line, line + 3, len - 2);
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        len = strcspn(line, "\n");
        while (len > 0 && line[len - 1] == '\r') len--; /* CRLF */
        line[len] = '\0';
        if (strspn(line, " \t") == len) continue;
        /* Checked before the line is parsed or shown in a message: names go into JSON headers
           (UTF-8) and into messages on a terminal. */
        const size_t bad = cannl__utf8_invalid_at(line, len);
        const long ctrl = bad == len ? control_char(line, len) : -1;
        if (bad < len) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "byte %zu (0x%02X) is not valid UTF-8 (names are UTF-8 text)",
                           bad + 1, (unsigned char)line[bad]);
            break;
        }
        if (ctrl >= 0) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "control character U+%04lX in the line (names are printable text)",
                           (unsigned long)ctrl);
            break;
        }
        char *eq = strchr(line, '=');
        char *from = eq ? trimmed(line, (size_t)(eq - line)) : NULL, *to = eq ? trimmed(eq + 1, strlen(eq + 1)) : NULL;
        /* `KEY [d0, d1, ...]`: the shape in the files (keys hold no spaces) */
        int32_t nd = -1;
        int64_t shape[CANNL_MAX_DIMS] = {0};
        char *gap = to ? strpbrk(to, " \t") : NULL;
        int bad_shape = 0;
        if (gap) {
            *gap = '\0';
            char *rest = gap + 1;
            while (*rest == ' ' || *rest == '\t') rest++;
            bad_shape = *rest == '[' && parse_shape(rest, &nd, shape);
            if (*rest != '[') *gap = ' '; /* not a shape: the line is reported whole below */
        }
        const char *suffix = to ? state_suffix(to) : NULL, *from_suffix = from ? state_suffix(from) : NULL;
        if (eq && (!from || !to)) {
            st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        } else if (bad_shape) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "expected a shape like [128, 128] after '%s' (at most "
                           "%d positive sizes), got '%.*s'", to, CANNL_MAX_DIMS, utf8_prefix(gap + 1, 60), gap + 1);
        } else if (!eq || !valid_name(from) || !valid_name(to)) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "expected 'cannl_name = file.key', got '%.*s'",
                           utf8_prefix(line, 60), line);
        } else if (strlen(from) > CANNL__NAME_MAP_MAX || strlen(to) > CANNL__NAME_MAP_MAX) {
            const char *name = strlen(from) > CANNL__NAME_MAP_MAX ? from : to;
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "'%.*s...' is longer than %d bytes",
                           utf8_prefix(name, 40), name, CANNL__NAME_MAP_MAX);
        } else if (strcmp(to, "__metadata__") == 0) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "'%s' is mapped onto '__metadata__', the name of a "
                           "safetensors file's metadata, which no tensor can have", from);
        } else if (suffix && (!from_suffix || strcmp(suffix, from_suffix) != 0)) {
            st = line_fail(err, CANNL_E_FORMAT, path, lineno, "'%s' is mapped onto '%s', the name a checkpoint gives "
                           "the %s of a param '%.*s' (optimiser state follows its param's mapping)",
                           from, to, suffix, (int)(strlen(to) - strlen(suffix) - 1), to);
        } else {
            for (size_t i = 0; i < map->n && st == CANNL_OK; i++) {
                if (strcmp(map->from[i], from) == 0)
                    st = line_fail(err, CANNL_E_FORMAT, path, lineno, "'%s' is mapped twice (line %d too)", from,
                                   map->line[i]);
                else if (strcmp(map->to[i], to) == 0)
                    st = line_fail(err, CANNL_E_FORMAT, path, lineno, "'%s' and '%s' both map to '%s' (line %d)",
                                   map->from[i], from, to, map->line[i]);
            }
        }
        if (st == CANNL_OK && map->n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nf = realloc(map->from, cap * sizeof *nf);
            if (nf) map->from = nf;
            char **nt = nf ? realloc(map->to, cap * sizeof *nt) : NULL;
            if (nt) map->to = nt;
            int *nl = nt ? realloc(map->line, cap * sizeof *nl) : NULL;
            if (nl) map->line = nl;
            int32_t *nd2 = nl ? realloc(map->ndims, cap * sizeof *nd2) : NULL;
            if (nd2) map->ndims = nd2;
            int64_t *ns = nd2 ? realloc(map->shape, cap * CANNL_MAX_DIMS * sizeof *ns) : NULL;
            if (ns) map->shape = ns;
            if (!nf || !nt || !nl || !nd2 || !ns) st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        }
        if (st == CANNL_OK) {
            map->from[map->n] = from;
            map->line[map->n] = lineno;
            map->ndims[map->n] = nd;
            memcpy(map->shape + map->n * CANNL_MAX_DIMS, shape, sizeof shape);
            map->to[map->n++] = to;
        } else {
            free(from);
            free(to);
        }
    }
    if (st == CANNL_OK && ferror(f)) st = cannl__fail(err, CANNL_E_IO, path, "read error");
    free(line);
    fclose(f);
    if (st != CANNL_OK) {
        cannl__name_map_free(map);
        return st;
    }
    *out = map;
    return CANNL_OK;
}

/* The name `name` has in files (see cannl__name_map_apply); *entry: the mapping that gave it, or -1. */
static const char *apply(const cannl__name_map *map, const char *name, char *buf, size_t cap, long *entry) {
    *entry = -1;
    if (!map) return name;
    size_t best = 0, best_len = 0;
    int found = 0;
    for (size_t i = 0; i < map->n; i++) {
        const size_t k = strlen(map->from[i]);
        if (strcmp(map->from[i], name) == 0) {
            *entry = (long)i;
            return map->to[i];
        }
        /* "<from>.<suffix>": the longest such prefix */
        if (strncmp(map->from[i], name, k) == 0 && name[k] == '.' && k > best_len) {
            best = i;
            best_len = k;
            found = 1;
        }
    }
    if (found) {
        *entry = (long)best;
        snprintf(buf, cap, "%s%s", map->to[best], name + best_len);
        return buf;
    }
    /* The state of a repeat block's param `w.3` is `w_3.exp_avg` in checkpoints (its C name, as
       checkpoints have named it since contract v1): the mapping of `w.3` carries over to it. */
    const char *suffix = state_suffix(name);
    if (!suffix) return name;
    const size_t base = strlen(name) - strlen(suffix) - 1;
    for (size_t i = 0; i < map->n; i++) {
        const char *from = map->from[i];
        if (!strchr(from, '.') || strlen(from) != base) continue;
        size_t j = 0;
        while (j < base && (from[j] == name[j] || (from[j] == '.' && name[j] == '_'))) j++;
        if (j < base) continue;
        *entry = (long)i;
        snprintf(buf, cap, "%s.%s", map->to[i], suffix);
        return buf;
    }
    return name;
}

const char *cannl__name_map_apply(const cannl__name_map *map, const char *name, char *buf, size_t cap) {
    long entry;
    return apply(map, name, buf, cap, &entry);
}

int cannl__name_map_shape(const cannl__name_map *map, const char *name, int32_t *ndims, int64_t *shape, int *line) {
    char buf[2 * CANNL__NAME_MAP_MAX + 64];
    long entry;
    apply(map, name, buf, sizeof buf, &entry);
    if (entry < 0 || map->ndims[entry] < 0) return 0;
    *ndims = map->ndims[entry];
    memcpy(shape, map->shape + entry * CANNL_MAX_DIMS, CANNL_MAX_DIMS * sizeof *shape);
    *line = map->line[entry];
    return 1;
}

cannl_status cannl__name_map_check_names(const cannl__name_map *map, const char *path, const char *model,
                                         const char *const *names, size_t n, const char *params, cannl_error *err) {
    if (!map) return CANNL_OK;
    for (size_t i = 0; i < map->n; i++) {
        int known = 0;
        for (size_t j = 0; j < n && !known; j++) known = strcmp(map->from[i], names[j]) == 0;
        if (!known)
            return line_fail(err, CANNL_E_NOTFOUND, path, map->line[i], "'%s' is no tensor of model '%s' (its params: %s)",
                             map->from[i], model, params);
        for (size_t j = 0; j < n; j++)
            if (strcmp(map->to[i], names[j]) == 0 && strcmp(map->from[i], names[j]) != 0)
                return line_fail(err, CANNL_E_FORMAT, path, map->line[i], "'%s' is mapped onto '%s', the name of another "
                                 "tensor of model '%s' (a file cannot hold two tensors of one name)",
                                 map->from[i], names[j], model);
    }
    /* Whatever the rules above let through, no two tensors may share a name in the files. */
    char **file = calloc(n + 1, sizeof *file);
    long *entry = calloc(n + 1, sizeof *entry);
    cannl_status st = file && entry ? CANNL_OK : cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    for (size_t i = 0; i < n && st == CANNL_OK; i++) {
        char buf[2 * CANNL__NAME_MAP_MAX + 64];
        const char *to = apply(map, names[i], buf, sizeof buf, &entry[i]);
        if (!(file[i] = malloc(strlen(to) + 1))) st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        else memcpy(file[i], to, strlen(to) + 1);
    }
    for (size_t i = 0; i < n && st == CANNL_OK; i++)
        for (size_t j = 0; j < i && st == CANNL_OK; j++)
            if (strcmp(file[i], file[j]) == 0) {
                /* the later line of the two mappings (one at least maps: the model's names differ) */
                const int li = entry[i] >= 0 ? map->line[entry[i]] : 0, lj = entry[j] >= 0 ? map->line[entry[j]] : 0;
                st = line_fail(err, CANNL_E_FORMAT, path, li > lj ? li : lj, "'%s' and '%s' would both be "
                               "named '%s' in the files", names[j], names[i], file[i]);
            }
    for (size_t i = 0; file && i < n; i++) free(file[i]);
    free(file);
    free(entry);
    return st;
}

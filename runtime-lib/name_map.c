/* name_map.c - --name-map FILE: the names a model's tensors have in safetensors files written
 * elsewhere (a PyTorch state_dict), one `cannl_name = pytorch.key` per line, `#` comments and
 * blank lines ignored. A param's mapping carries over to its optimiser state
 * ("w1.exp_avg" -> "fc1.weight.exp_avg" when w1 = fc1.weight). */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct cannl__name_map {
    size_t n;
    char **from, **to;
};

void cannl__name_map_free(cannl__name_map *map) {
    if (!map) return;
    for (size_t i = 0; i < map->n; i++) {
        free(map->from[i]);
        free(map->to[i]);
    }
    free(map->from);
    free(map->to);
    free(map);
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
    size_t cap = 0;
    char line[4096];
    for (int lineno = 1; st == CANNL_OK && fgets(line, sizeof line, f); lineno++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "line %d is longer than %zu bytes", lineno, sizeof line - 2);
            break;
        }
        if (lineno == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 byte-order mark (a Windows editor's) */
            memmove(line, line + 3, len - 2);
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        len = strcspn(line, "\n");
        line[len] = '\0';
        if (strspn(line, " \t\r") == len) continue;
        char *eq = strchr(line, '=');
        char *from = eq ? trimmed(line, (size_t)(eq - line)) : NULL, *to = eq ? trimmed(eq + 1, strlen(eq + 1)) : NULL;
        if (eq && (!from || !to)) {
            st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        } else if (!eq || !valid_name(from) || !valid_name(to)) {
            st = cannl__fail(err, CANNL_E_FORMAT, path, "line %d: expected 'cannl_name = file.key', got '%.60s'",
                             lineno, line);
        } else {
            for (size_t i = 0; i < map->n && st == CANNL_OK; i++) {
                if (strcmp(map->from[i], from) == 0)
                    st = cannl__fail(err, CANNL_E_FORMAT, path, "line %d: '%s' is mapped twice", lineno, from);
                else if (strcmp(map->to[i], to) == 0)
                    st = cannl__fail(err, CANNL_E_FORMAT, path, "line %d: '%s' and '%s' both map to '%s'", lineno,
                                     map->from[i], from, to);
            }
        }
        if (st == CANNL_OK && map->n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nf = realloc(map->from, cap * sizeof *nf);
            if (nf) map->from = nf;
            char **nt = nf ? realloc(map->to, cap * sizeof *nt) : NULL;
            if (nt) map->to = nt;
            if (!nf || !nt) st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        }
        if (st == CANNL_OK) {
            map->from[map->n] = from;
            map->to[map->n++] = to;
        } else {
            free(from);
            free(to);
        }
    }
    if (st == CANNL_OK && ferror(f)) st = cannl__fail(err, CANNL_E_IO, path, "read error");
    fclose(f);
    if (st != CANNL_OK) {
        cannl__name_map_free(map);
        return st;
    }
    *out = map;
    return CANNL_OK;
}

const char *cannl__name_map_apply(const cannl__name_map *map, const char *name, char *buf, size_t cap) {
    if (!map) return name;
    size_t best = 0, best_len = 0;
    int found = 0;
    for (size_t i = 0; i < map->n; i++) {
        const size_t k = strlen(map->from[i]);
        if (strcmp(map->from[i], name) == 0) return map->to[i];
        /* "<from>.<suffix>": the longest such prefix */
        if (strncmp(map->from[i], name, k) == 0 && name[k] == '.' && k > best_len) {
            best = i;
            best_len = k;
            found = 1;
        }
    }
    if (!found) return name;
    snprintf(buf, cap, "%s%s", map->to[best], name + best_len);
    return buf;
}

const char *cannl__name_map_unknown(const cannl__name_map *map, const char *const *names, size_t n) {
    for (size_t i = 0; map && i < map->n; i++) {
        int known = 0;
        for (size_t j = 0; j < n && !known; j++) known = strcmp(map->from[i], names[j]) == 0;
        if (!known) return map->from[i];
    }
    return NULL;
}

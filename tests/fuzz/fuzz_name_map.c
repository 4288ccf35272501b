/* fuzz_name_map.c - libFuzzer harness of the name-map reader (name_map.c, --name-map FILE):
 * the input is one map file. A loaded map must hold only what the reader promises (names that
 * are UTF-8 text without control characters, spaces, '=' or '"', at most
 * CANNL__NAME_MAP_MAX bytes; none mapped twice, none onto another's name, onto '__metadata__'
 * or onto an optimiser-state name but its own state's), give each name its mapping, and check
 * against a model of its own names: either refused with a message "FILE:LINE: ..." or with
 * every tensor under a name of its own in the files. A model that lacks a mapped name refuses
 * the map. A refused file says why in one line of UTF-8 text that begins with its name. */
#include "cannl_rt.h"
#include "fuzz_util.h"
#include "json_min.h"
#include "rt_internal.h"

#define MAX_ENTRIES 64 /* the model built from the map: its first names */

static const char *const SUFFIXES[] = {".exp_avg", ".exp_avg_sq", ".momentum_buffer"};

/* A message: one line of UTF-8 that begins with "PATH:" ("PATH: " or "PATH:LINE: "). */
static void check_message(const char *msg, const char *path) {
    fuzz_check_message(msg, path);
    const size_t n = strlen(path);
    FUZZ_ASSERT(strncmp(msg, path, n) == 0 && msg[n] == ':');
    FUZZ_ASSERT(cannl__utf8_invalid_at(msg, strlen(msg)) == strlen(msg));
}

/* A name as the reader keeps it. */
static void check_name(const char *s) {
    const size_t n = strlen(s);
    FUZZ_ASSERT(n >= 1 && n <= CANNL__NAME_MAP_MAX);
    FUZZ_ASSERT(cannl__utf8_invalid_at(s, n) == n);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        FUZZ_ASSERT(c >= 0x20 && c != 0x7F && c != ' ' && c != '=' && c != '"');
        FUZZ_ASSERT(!(c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] <= 0x9F)); /* C1 controls */
    }
}

static const char *state_suffix(const char *s) {
    const size_t n = strlen(s);
    for (size_t k = 0; k < sizeof SUFFIXES / sizeof SUFFIXES[0]; k++) {
        const size_t m = strlen(SUFFIXES[k]);
        if (n > m && strcmp(s + n - m, SUFFIXES[k]) == 0) return SUFFIXES[k];
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write(data, size, ".map");
    cannl__name_map *map = (cannl__name_map *)1;
    cannl_error err;
    err.msg[0] = '\0';
    if (cannl__name_map_load(path, &map, &err) != CANNL_OK) {
        FUZZ_ASSERT(map == NULL);
        check_message(err.msg, path);
        return 0;
    }
    FUZZ_ASSERT(map != NULL);
    const char *from[MAX_ENTRIES], *to[MAX_ENTRIES];
    size_t n = 0;
    const char *f, *t;
    int l, last_line = 0;
    char buf[2 * CANNL__NAME_MAP_MAX + 64];
    for (size_t i = 0; cannl__name_map_entry(map, i, &f, &t, &l); i++) {
        check_name(f);
        check_name(t);
        FUZZ_ASSERT(l > last_line); /* one mapping a line, in file order */
        last_line = l;
        FUZZ_ASSERT(strcmp(t, "__metadata__") != 0);
        const char *ts = state_suffix(t), *fs = state_suffix(f);
        FUZZ_ASSERT(!ts || (fs && strcmp(ts, fs) == 0)); /* onto a state name: its own state's */
        FUZZ_ASSERT(strcmp(cannl__name_map_apply(map, f, buf, sizeof buf), t) == 0);
        if (n < MAX_ENTRIES) {
            for (size_t j = 0; j < n; j++) FUZZ_ASSERT(strcmp(from[j], f) != 0 && strcmp(to[j], t) != 0);
            from[n] = f;
            to[n++] = t;
        }
    }
    /* A name no map can hold (a control character) keeps its own. */
    FUZZ_ASSERT(strcmp(cannl__name_map_apply(map, "\x01", buf, sizeof buf), "\x01") == 0);
    FUZZ_ASSERT(cannl__name_map_apply(NULL, "w", buf, sizeof buf)[0] == 'w');

    /* The model whose tensors are the mapped names: refused for a name clash, or every one of
       them, and their optimiser state, under a name of its own in the files. */
    const char *names[MAX_ENTRIES * 2];
    char state[MAX_ENTRIES][CANNL__NAME_MAP_MAX + 16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) names[k++] = from[i];
    const size_t params = k;
    for (size_t i = 0; i < n && !state_suffix(from[i]); i++) {
        snprintf(state[i], sizeof state[i], "%s.exp_avg", from[i]);
        int taken = 0;
        for (size_t j = 0; j < k; j++) taken = taken || strcmp(names[j], state[i]) == 0;
        if (!taken) names[k++] = state[i];
    }
    cannl_status st = cannl__name_map_check_names(map, path, "m", names, k, "(the map's names)", &err);
    int complete = 1; /* the map holds no more than the model's first MAX_ENTRIES names */
    if (cannl__name_map_entry(map, MAX_ENTRIES, &f, &t, &l)) complete = 0;
    if (st != CANNL_OK) {
        check_message(err.msg, path);
    } else {
        FUZZ_ASSERT(complete);
        char *file[MAX_ENTRIES * 2];
        for (size_t i = 0; i < k; i++) {
            const char *a = cannl__name_map_apply(map, names[i], buf, sizeof buf);
            file[i] = malloc(strlen(a) + 1);
            FUZZ_ASSERT(file[i] != NULL);
            memcpy(file[i], a, strlen(a) + 1);
            for (size_t j = 0; j < i; j++) FUZZ_ASSERT(strcmp(file[i], file[j]) != 0);
        }
        for (size_t i = 0; i < k; i++) free(file[i]);
    }
    /* Without the last mapped name the model refuses the map. */
    if (params > 0 && complete) {
        st = cannl__name_map_check_names(map, path, "m", names, params - 1, "", &err);
        FUZZ_ASSERT(st != CANNL_OK);
        check_message(err.msg, path);
    }
    cannl__name_map_free(map);
    cannl__name_map_free(NULL);
    return 0;
}

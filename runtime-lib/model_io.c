/* model_io.c - saving and loading a generated model's state through its
 * cannl_model_api table.
 *
 * A model checkpoint is a safetensors file holding every state tensor
 * (params, then optimiser state) with metadata "model" and "step". Loading
 * is all-or-nothing: every tensor is read into one scratch block first and
 * copied into the model only when all of them were read successfully and
 * hold finite values only. A partial load (the training program's
 * --init-partial) takes the params the file holds and leaves the others as
 * they are (the spec's init), saying which is which. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cannl_status check_api(const cannl_model_api *api, const void *m, const char *path, const char *fn,
                              cannl_error *err) {
    if (!api || !m || !path)
        return cannl__fail(err, CANNL_E_ARG, fn, "model table, model or path is NULL");
    if (!api->name || !api->state_tensors || !api->get_step || !api->set_step)
        return cannl__fail(err, CANNL_E_ARG, fn, "model table lacks name, state_tensors, get_step or set_step");
    if (api->num_params < 0 || (api->num_params > 0 && !api->params))
        return cannl__fail(err, CANNL_E_ARG, fn, "model '%s': bad params table", api->name);
    return CANNL_OK;
}

/* The model's state tensors in a malloc'd array (*out, *n). The first
 * num_params entries must be the params, in api->params order. */
static cannl_status list_state(const cannl_model_api *api, void *m, const char *path, cannl_tensor **out, size_t *n,
                               cannl_error *err) {
    *out = NULL;
    *n = 0;
    size_t count = api->state_tensors(m, NULL, 0);
    cannl_tensor *t = calloc(count + 1, sizeof *t);
    if (!t) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    if (api->state_tensors(m, t, count) != count) {
        free(t);
        return cannl__fail(err, CANNL_E_ARG, path, "model '%s': state_tensors returned inconsistent counts",
                           api->name);
    }
    if (count < (size_t)api->num_params) {
        free(t);
        return cannl__fail(err, CANNL_E_ARG, path, "model '%s': %zu state tensors but %d params", api->name, count,
                           (int)api->num_params);
    }
    for (int32_t i = 0; i < api->num_params; i++) {
        if (!t[i].name || !api->params[i].name || strcmp(t[i].name, api->params[i].name) != 0) {
            cannl_status st = cannl__fail(err, CANNL_E_ARG, path, "model '%s': state tensor %d is '%s', expected param '%s'",
                                          api->name, (int)i, t[i].name ? t[i].name : "(null)",
                                          api->params[i].name ? api->params[i].name : "(null)");
            free(t);
            return st;
        }
    }
    for (size_t i = 0; i < count; i++)
        if (!t[i].data) { /* a ZeRO-1 shard (shard_opt_state) holds only some params' state */
            cannl_status st = cannl__fail(err, CANNL_E_ARG, path, "model '%s': state tensor '%s' is not held by this "
                                          "state (its optimiser state is sharded)", api->name,
                                          t[i].name ? t[i].name : "(null)");
            free(t);
            return st;
        }
    *out = t;
    *n = count;
    return CANNL_OK;
}

/* The names of t[0..n) in files (map NULL: their own): *names, malloc'd, n strings each
 * malloc'd (NULL entries: the tensor's own name). */
static cannl_status map_names(const cannl__name_map *map, const cannl_tensor *t, size_t n, char ***names,
                              const char *path, cannl_error *err) {
    *names = calloc(n + 1, sizeof **names);
    if (!*names) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    for (size_t i = 0; map && i < n; i++) {
        char buf[512];
        const char *to = cannl__name_map_apply(map, t[i].name, buf, sizeof buf);
        if (to != t[i].name && !((*names)[i] = strdup(to))) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    }
    return CANNL_OK;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* "a, b, c" (the tensor names of the file, as many as fit). */
static void file_names(const cannl_checkpoint *ck, char *buf, size_t cap) {
    size_t k = 0, count = 0;
    cannl_tensor x;
    buf[0] = '\0';
    for (size_t i = 0; cannl__checkpoint_tensor(ck, i, &x); i++) count++;
    for (size_t i = 0; cannl__checkpoint_tensor(ck, i, &x) && k < cap; i++) {
        const size_t len = strlen(x.name);
        if (k + len + 16 > cap) {
            snprintf(buf + k, cap - k, "%s... (%zu in all)", i ? ", " : "", count);
            return;
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", x.name);
    }
    if (count == 0) snprintf(buf, cap, "no tensors");
}

cannl_status cannl__name_map_check(const cannl_model_api *api, void *m, const cannl__name_map *map, const char *map_path,
                                   cannl_error *err) {
    cannl_tensor *t;
    size_t n;
    cannl_status st = list_state(api, m, map_path, &t, &n, err);
    if (st != CANNL_OK) return st;
    const char **names = calloc(n + 1, sizeof *names);
    if (!names) {
        free(t);
        return cannl__fail(err, CANNL_E_NOMEM, map_path, "out of memory");
    }
    for (size_t i = 0; i < n; i++) names[i] = t[i].name;
    char list[320];
    size_t k = 0;
    list[0] = '\0';
    for (int32_t i = 0; i < api->num_params && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", api->params[i].name);
    st = cannl__name_map_check_names(map, map_path, api->name, names, n, list, err);
    for (size_t i = 0; i < n && st == CANNL_OK; i++) { /* a shape in the files: as many elements */
        int32_t nd;
        int64_t shape[CANNL_MAX_DIMS];
        int line;
        if (!cannl__name_map_shape(map, t[i].name, &nd, shape, &line)) continue;
        int64_t a = 1, b = 1;
        for (int32_t d = 0; d < t[i].ndims; d++) a *= t[i].shape[d];
        for (int32_t d = 0; d < nd; d++) b = cannl__mul_i64(b, shape[d], &b) ? -1 : b;
        if (a != b) {
            char have[160], want[160];
            cannl__format_shape(have, sizeof have, t[i].ndims, t[i].shape);
            cannl__format_shape(want, sizeof want, nd, shape);
            st = cannl__fail(err, CANNL_E_FORMAT, NULL, "%s:%d: '%s' is %s (%" PRId64 " elements): the shape %s given "
                             "for the files has %" PRId64, map_path, line, t[i].name, have, a, want, b);
        }
    }
    free(names);
    free(t);
    return st;
}

cannl_status cannl_model_save(const cannl_model_api *api, void *m, const char *path, const cannl_meta *extra,
                              size_t nextra, cannl_error *err) {
    return cannl__model_save_named(api, m, path, extra, nextra, NULL, err);
}

cannl_status cannl__model_save_named(const cannl_model_api *api, void *m, const char *path, const cannl_meta *extra,
                                     size_t nextra, const cannl__name_map *map, cannl_error *err) {
    cannl_status st = check_api(api, m, path, "cannl_model_save", err);
    if (st != CANNL_OK) return st;
    if (nextra > 0 && !extra) return cannl__fail(err, CANNL_E_ARG, path, "extra metadata list is NULL");
    cannl_tensor *t;
    size_t n;
    st = list_state(api, m, path, &t, &n, err);
    if (st != CANNL_OK) return st;
    char **names = NULL;
    st = map_names(map, t, n, &names, path, err);
    if (st != CANNL_OK) {
        free_names(names, n);
        free(t);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t nd;
        int64_t shape[CANNL_MAX_DIMS];
        int line;
        /* written under the shape its mapping gives (checked against the model by cannl__name_map_check) */
        if (names[i] && cannl__name_map_shape(map, t[i].name, &nd, shape, &line)) {
            t[i].ndims = nd;
            memcpy(t[i].shape, shape, sizeof shape);
        }
        if (names[i]) t[i].name = names[i];
    }
    cannl_meta *meta = calloc(nextra + 2, sizeof *meta);
    if (!meta) {
        free_names(names, n);
        free(t);
        return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    }
    char step[32];
    snprintf(step, sizeof step, "%" PRId64, api->get_step(m));
    meta[0].key = CANNL_META_MODEL;
    meta[0].value = api->name;
    meta[1].key = CANNL_META_STEP;
    meta[1].value = step;
    for (size_t i = 0; i < nextra; i++) meta[2 + i] = extra[i];
    st = cannl_checkpoint_save(path, t, n, meta, nextra + 2, err);
    free(meta);
    free_names(names, n);
    free(t);
    return st;
}

/* Bytes of tensor t in its dtype; 1 on a bad or overflowing shape. */
static int tensor_bytes(const cannl_tensor *t, size_t *out) {
    int64_t count = 1;
    if (t->ndims < 0 || t->ndims > CANNL_MAX_DIMS) return 1;
    for (int32_t d = 0; d < t->ndims; d++)
        if (cannl__mul_i64(count, t->shape[d], &count)) return 1;
    size_t bytes;
    if ((uint64_t)count > SIZE_MAX || cannl__mul_size((size_t)count, cannl_dtype_size(t->dtype), &bytes) ||
        bytes > SIZE_MAX / 2)
        return 1;
    *out = bytes;
    return 0;
}

/* Parse a metadata integer ("1200"); 0 on success. */
static int parse_i64(const char *s, int64_t *out) {
    if (!s || *s < '0' || *s > '9') return 1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return 1;
    *out = (int64_t)v;
    return 0;
}

/* Open path and check its "model" (required for ALL, optional for PARAMS) and,
 * for ALL, read the step count. */
static cannl_status open_checked(const cannl_model_api *api, const char *path, cannl_load_what what,
                                 cannl_checkpoint **ck, int64_t *step, cannl_error *err) {
    cannl_status st = cannl_checkpoint_open(path, NULL, ck, err);
    if (st != CANNL_OK) return st;
    const char *model = cannl_checkpoint_meta(*ck, CANNL_META_MODEL);
    if (model && strcmp(model, api->name) != 0)
        st = cannl__fail(err, CANNL_E_MISMATCH, path, "checkpoint of model '%s', but this is '%s'", model, api->name);
    else if (what == CANNL_LOAD_ALL && !model)
        st = cannl__fail(err, CANNL_E_MISMATCH, path,
                         "not a checkpoint of model '%s' (no \"model\" in its metadata; a params-only file can "
                         "only initialise the params)",
                         api->name);
    else if (what == CANNL_LOAD_ALL) {
        const char *s = cannl_checkpoint_meta(*ck, CANNL_META_STEP);
        if (!s)
            st = cannl__fail(err, CANNL_E_FORMAT, path, "no \"step\" in the checkpoint's metadata");
        else if (parse_i64(s, step))
            st = cannl__fail(err, CANNL_E_FORMAT, path, "metadata \"step\" is '%s', not a non-negative integer", s);
    }
    if (st != CANNL_OK) {
        cannl_checkpoint_close(*ck);
        *ck = NULL;
    }
    return st;
}

cannl_status cannl_model_load(const cannl_model_api *api, void *m, const char *path, cannl_load_what what,
                              cannl_checkpoint **keep_open_or_null, cannl_error *err) {
    return cannl__model_load_named(api, m, path, what, NULL, keep_open_or_null, err);
}

static cannl_status load(const cannl_model_api *api, void *m, const char *path, cannl_load_what what,
                         const cannl__name_map *map, unsigned char *loaded, cannl_checkpoint **keep_open_or_null,
                         cannl_error *err);

cannl_status cannl__model_load_named(const cannl_model_api *api, void *m, const char *path, cannl_load_what what,
                                     const cannl__name_map *map, cannl_checkpoint **keep_open_or_null,
                                     cannl_error *err) {
    return load(api, m, path, what, map, NULL, keep_open_or_null, err);
}

cannl_status cannl__model_load_partial(const cannl_model_api *api, void *m, const char *path,
                                       const cannl__name_map *map, unsigned char *loaded, cannl_error *err) {
    if (!loaded) return cannl__fail(err, CANNL_E_ARG, "cannl__model_load_partial", "loaded is NULL");
    return load(api, m, path, CANNL_LOAD_PARAMS, map, loaded, NULL, err);
}

/* The load; loaded (num_params entries), or NULL: every param required. */
static cannl_status load(const cannl_model_api *api, void *m, const char *path, cannl_load_what what,
                         const cannl__name_map *map, unsigned char *loaded, cannl_checkpoint **keep_open_or_null,
                         cannl_error *err) {
    if (keep_open_or_null) *keep_open_or_null = NULL;
    cannl_status st = check_api(api, m, path, "cannl_model_load", err);
    if (st != CANNL_OK) return st;
    if (what != CANNL_LOAD_PARAMS && what != CANNL_LOAD_ALL)
        return cannl__fail(err, CANNL_E_ARG, path, "invalid load mode %d", (int)what);

    cannl_checkpoint *ck = NULL;
    int64_t step = 0;
    st = open_checked(api, path, what, &ck, &step, err);
    if (st != CANNL_OK) return st;

    cannl_tensor *t = NULL;
    size_t n = 0, nall = 0;
    char **names = NULL;
    size_t *off = NULL, *len = NULL;
    unsigned char *scratch = NULL;
    st = list_state(api, m, path, &t, &n, err);
    if (st != CANNL_OK) goto done;
    nall = n;
    st = map_names(map, t, nall, &names, path, err);
    if (st != CANNL_OK) goto done;
    if (what == CANNL_LOAD_PARAMS) n = (size_t)api->num_params;

    /* One scratch block with a 64-byte aligned slot per tensor. */
    off = calloc(n + 1, sizeof *off);
    len = calloc(n + 1, sizeof *len);
    if (!off || !len) {
        st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
        goto done;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tensor_bytes(&t[i], &len[i]) || total > SIZE_MAX - len[i] - 64) {
            st = cannl__fail(err, CANNL_E_ARG, path, "model '%s': tensor '%s' has a bad shape", api->name, t[i].name);
            goto done;
        }
        off[i] = total;
        total += (len[i] + 63) / 64 * 64;
    }
    scratch = cannl_alloc(total);
    if (!scratch) {
        st = cannl__fail(err, CANNL_E_NOMEM, path, "out of memory for %zu bytes of scratch", total);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        cannl_tensor want = t[i];
        want.data = scratch + off[i];
        if (names[i]) want.name = names[i];
        /* A tensor read through the name map may have another shape of the same elements
           (a PyTorch state_dict's, contract v2 §6). */
        st = names[i] ? cannl_checkpoint_read_reshaped(ck, &want, err) : cannl_checkpoint_read(ck, &want, err);
        if (loaded) loaded[i] = st == CANNL_OK;
        if (loaded && st == CANNL_E_NOTFOUND) { /* a partial init: this param keeps its value */
            st = CANNL_OK;
            len[i] = 0;
            continue;
        }
        if (st == CANNL_E_NOTFOUND) {
            char held[320], how[160] = "";
            file_names(ck, held, sizeof held);
            if (names[i]) snprintf(how, sizeof how, " (%s '%s' through the name map)",
                                   i < (size_t)api->num_params ? "param" : "state tensor", t[i].name);
            st = cannl__fail(err, st, path, "missing tensor '%s'%s; the file holds: %s", want.name, how, held);
        }
        if (st != CANNL_OK) goto done; /* the message names the file, the tensor and both shapes */
    }
    if (loaded) { /* a partial init of nothing is a wrong file (or name map), not an init */
        size_t found = 0;
        for (size_t i = 0; i < n; i++) found += loaded[i];
        if (found == 0 && n > 0) {
            char held[320];
            file_names(ck, held, sizeof held);
            st = cannl__fail(err, CANNL_E_NOTFOUND, path, "holds none of the params of model '%s'%s; the file holds: %s",
                             api->name, map ? " (through the name map)" : "", held);
            goto done;
        }
    }
    /* A nan or inf would spread to every param through the first step: refuse it, as
       `cannl gen --embed` does. */
    for (size_t i = 0; i < n; i++) {
        const int64_t bad = cannl__first_nonfinite(scratch + off[i], len[i] / cannl_dtype_size(t[i].dtype), t[i].dtype);
        if (bad >= 0) {
            const double v = t[i].dtype == CANNL_F32 ? (double)((const float *)(scratch + off[i]))[bad]
                                                     : ((const double *)(scratch + off[i]))[bad];
            st = cannl__fail(err, CANNL_E_FORMAT, path, "%s '%s' holds a non-finite value (%s) at element %" PRId64,
                             i < (size_t)api->num_params ? "param" : "state tensor", t[i].name,
                             cannl__nonfinite_name(v), bad);
            goto done;
        }
    }
    /* Everything was read and is finite: commit. */
    for (size_t i = 0; i < n; i++)
        if (len[i] > 0) memcpy(t[i].data, scratch + off[i], len[i]);
    if (what == CANNL_LOAD_ALL) api->set_step(m, step);

done:
    cannl_free(scratch);
    free_names(names, nall);
    free(len);
    free(off);
    free(t);
    if (st == CANNL_OK && keep_open_or_null)
        *keep_open_or_null = ck;
    else
        cannl_checkpoint_close(ck);
    return st;
}

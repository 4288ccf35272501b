/* train_data.c - binding data files to a model's inputs (--data/--test
 * NAME=PATH): name checks, loading, one-hot encoding of class indices, the ids
 * of integer inputs (int32, each checked against its range), equal example
 * counts, and gathering one batch of every input. */
#include "rt_internal.h"
#include "train_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int usage(char *msg, size_t cap, const char *fmt, ...) CANNL__PRINTF(3, 4);

static int usage(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return CANNL__EXIT_USAGE;
}

/* Index of the input called name[0..len), or -1. */
static int find_input(const cannl_model_api *api, const char *name, size_t len) {
    for (int32_t i = 0; i < api->num_inputs; i++)
        if (strlen(api->inputs[i].name) == len && strncmp(api->inputs[i].name, name, len) == 0) return (int)i;
    return -1;
}

/* "image, label" */
static void input_list(const cannl_model_api *api, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < api->num_inputs && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", api->inputs[i].name);
}

int cannl__bind_check(const cannl_model_api *api, const cannl__binding *b, int n, const char *flag, char *msg,
                      size_t cap) {
    for (int k = 0; k < n; k++) {
        int i = find_input(api, b[k].name, b[k].name_len);
        if (i < 0 && api->num_inputs == 0)
            return usage(msg, cap, "%s %.*s=...: model '%s' has no inputs", flag, (int)b[k].name_len, b[k].name,
                         api->name);
        if (i < 0) {
            char list[256];
            input_list(api, list, sizeof list);
            return usage(msg, cap, "%s %.*s=...: model '%s' has no input '%.*s' (its inputs: %s)", flag,
                         (int)b[k].name_len, b[k].name, api->name, (int)b[k].name_len, b[k].name, list);
        }
        for (int j = 0; j < k; j++)
            if (find_input(api, b[j].name, b[j].name_len) == i)
                return usage(msg, cap, "%s %s given twice (%s and %s)", flag, api->inputs[i].name, b[j].path,
                             b[k].path);
    }
    for (int32_t i = 0; i < api->num_inputs; i++) {
        int found = 0;
        for (int k = 0; k < n && !found; k++) found = find_input(api, b[k].name, b[k].name_len) == (int)i;
        if (!found)
            return usage(msg, cap, "no %sdata for input '%s': pass %s %s=PATH", strcmp(flag, "--test") == 0 ? "test " : "",
                         api->inputs[i].name, flag, api->inputs[i].name);
    }
    return CANNL__EXIT_OK;
}

/* An integer input's ids: int32 values, ids->elems of them per example, each in [0, in->ids).
   The first id out of range is an error naming the input, the example and the position. */
static cannl_status check_ids(const cannl_tensor_info *in, const char *path, const cannl_dataset *ds,
                              cannl_error *err) {
    const int32_t *v = ds->data;
    const int64_t total = ds->count * ds->elems;
    for (int64_t k = 0; k < total; k++)
        if (v[k] < 0 || v[k] >= in->ids)
            return cannl__fail(err, CANNL_E_RANGE, path,
                               "input '%s', example %" PRId64 ", position %" PRId64 ": id %" PRId32
                               " is out of range [0, %" PRId64 ")",
                               in->name, k / ds->elems, k % ds->elems, v[k], in->ids);
    return CANNL_OK;
}

/* Load the file bound to the integer input in: int32 ids, in->size per example, in range. */
static cannl_status load_ids(const cannl_tensor_info *in, const char *path, cannl_dataset *ds, cannl_error *err) {
    cannl_status st = cannl__dataset_load_bound(ds, path, CANNL_I32, err);
    if ((st == CANNL_E_MISMATCH || st == CANNL_E_RANGE) && err) { /* real values, or past int32 */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return cannl__fail(err, st, NULL, "%s (input '%s' takes int32 ids: an int32 or int64 .npy, or a CSV of integers)",
                           msg, in->name);
    }
    if (st != CANNL_OK) return st;
    if (ds->count == 0) st = cannl__fail(err, CANNL_E_FORMAT, path, "no examples");
    else if (ds->elems != in->size)
        st = cannl__fail(err, CANNL_E_MISMATCH, path,
                         "%" PRId64 " ids per example, but integer input '%s' takes %" PRId64 " (an array [N, %" PRId64
                         "])", ds->elems, in->name, in->size, in->size);
    else
        st = check_ids(in, path, ds, err);
    if (st != CANNL_OK) cannl_dataset_free(ds);
    return st;
}

/* Load the file for input i into *ds and make its examples fit the input. A file with one
   value per example is taken as class indices and one-hot encoded when one_hot allows it
   (a [C] target); otherwise, or when its values are not integers, it does not fit. */
static cannl_status load_one(const cannl_model_api *api, int32_t i, const char *path, int one_hot,
                             cannl_dataset *ds, cannl_error *err) {
    const cannl_tensor_info *in = &api->inputs[i];
    if (in->ids > 0) return load_ids(in, path, ds, err);
    cannl_status st = cannl__dataset_load_bound(ds, path, api->dtype, err);
    if (st != CANNL_OK) return st;
    if (ds->count == 0) {
        cannl_dataset_free(ds);
        return cannl__fail(err, CANNL_E_FORMAT, path, "no examples");
    }
    if (ds->elems == in->size) return CANNL_OK;
    int64_t got = ds->elems;
    if (got == 1 && in->size > 1 && in->size <= INT32_MAX && one_hot) {
        /* Class indices for a one-hot input, unless a value is no class index at all. */
        int64_t bad = -1;
        for (int64_t e = 0; e < ds->count && bad < 0; e++) {
            double v = ds->dtype == CANNL_F32 ? (double)((const float *)ds->data)[e] : ((const double *)ds->data)[e];
            if (!(v == floor(v))) bad = e;
        }
        if (bad < 0) {
            st = cannl_dataset_one_hot(ds, (int32_t)in->size, err);
            if (st != CANNL_OK) cannl_dataset_free(ds);
            return st;
        }
        double v = ds->dtype == CANNL_F32 ? (double)((const float *)ds->data)[bad] : ((const double *)ds->data)[bad];
        cannl_dataset_free(ds);
        return cannl__fail(err, CANNL_E_MISMATCH, path,
                           "1 value per example, but input '%s' needs %" PRId64 " (example %" PRId64
                           " is %g, not a class index; a file of class indices is one-hot encoded only for a [C] "
                           "target input)",
                           in->name, in->size, bad, v);
    }
    cannl_dataset_free(ds);
    if (got == 1 && in->size > 1)
        return cannl__fail(err, CANNL_E_MISMATCH, path,
                           "1 value per example, but input '%s' takes %" PRId64
                           " (the forward pass reads it; a file of class indices is one-hot encoded only for a "
                           "target input, which forward does not read)",
                           in->name, in->size);
    return cannl__fail(err, CANNL_E_MISMATCH, path, "%" PRId64 " values per example, but input '%s' takes %" PRId64,
                       got, in->name, in->size);
}

cannl_status cannl__bind_load(const cannl_model_api *api, const cannl__binding *b, int n,
                              const unsigned char *one_hot, cannl_dataset *ds, int64_t *count, cannl_error *err) {
    cannl_status st = CANNL_OK;
    const char *first = NULL;
    *count = 0;
    for (int32_t i = 0; i < api->num_inputs; i++) memset(&ds[i], 0, sizeof ds[i]);
    for (int32_t i = 0; i < api->num_inputs && st == CANNL_OK; i++) {
        const char *path = NULL;
        for (int k = 0; k < n && !path; k++)
            if (find_input(api, b[k].name, b[k].name_len) == (int)i) path = b[k].path;
        if (!path) {
            st = cannl__fail(err, CANNL_E_ARG, NULL, "no file for input '%s'", api->inputs[i].name);
            break;
        }
        st = load_one(api, i, path, one_hot ? one_hot[i] : 1, &ds[i], err);
        if (st != CANNL_OK) break;
        if (!first) {
            first = path;
            *count = ds[i].count;
        } else if (ds[i].count != *count) {
            st = cannl__fail(err, CANNL_E_MISMATCH, NULL,
                             "%s has %" PRId64 " examples but %s has %" PRId64 " (every input needs the same count)",
                             path, ds[i].count, first, *count);
        }
    }
    if (st != CANNL_OK) {
        for (int32_t i = 0; i < api->num_inputs; i++) cannl_dataset_free(&ds[i]);
        *count = 0;
    }
    return st;
}

cannl_status cannl__bind_gather(const cannl_model_api *api, const cannl_dataset *ds, const int64_t *idx, int64_t n,
                                void *const *bufs, cannl_error *err) {
    for (int32_t i = 0; i < api->num_inputs; i++) {
        cannl_status st = cannl_dataset_gather(&ds[i], idx, n, bufs[i], err);
        if (st != CANNL_OK) return st;
    }
    return CANNL_OK;
}

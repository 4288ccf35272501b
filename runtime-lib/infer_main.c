/* infer_main.c - cannl_infer_main, the inference program: params from
 * --weights or compiled in, the --input files through the training program's
 * readers, forward in batches into the --output files (.npy, or CSV for a
 * .csv path; written all or none), and --metric, which evaluates the loss and
 * the metrics exactly as the training program's test evaluation does (same
 * batches, same weighting, same printing). --generate samples text from a language
 * model (infer_generate.c). */
#define _POSIX_C_SOURCE 200809L

#include "infer_internal.h"
#include "rt_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct runner {
    const cannl_infer_model *model;
    const cannl_model_api *api;
    cannl__infer_opts o;
    void *m;
    /* The inputs that are read (forward's, or all with --metric), as a model table of
       their own so that the training program's binding code loads them. */
    cannl_model_api sub;
    cannl_tensor_info *sub_inputs;
    int32_t *sub_index;            /* sub input j is model input sub_index[j] */
    cannl_dataset *ds;             /* sub.num_inputs */
    int64_t count;
    void **bufs;                   /* sub.num_inputs batch buffers */
    const void **in;               /* api->num_inputs pointers (NULL: not read) */
    void **out_all;                /* per output: count examples, or NULL when not written */
    void **out_batch;              /* per output: where this batch's examples go */
    int64_t *idx;
    double *metrics;
} runner;

static int report(const runner *r, int code, const char *fmt, ...) CANNL__PRINTF(3, 4);

static int report(const runner *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(r->o.prog, "error", fmt, ap);
    va_end(ap);
    return code;
}

/* Copy the compiled-in params into the state. */
static int use_embedded(runner *r) {
    const cannl_model_api *api = r->api;
    size_t n = api->state_tensors(r->m, NULL, 0);
    cannl_tensor *t = calloc(n + 1, sizeof *t);
    if (!t) return report(r, CANNL__EXIT_FAIL, "out of memory");
    api->state_tensors(r->m, t, n);
    size_t es = cannl_dtype_size(api->dtype);
    for (int32_t i = 0; i < api->num_params && (size_t)i < n; i++)
        memcpy(t[i].data, r->model->embedded[i], (size_t)api->params[i].size * es);
    free(t);
    return CANNL__EXIT_OK;
}

/* Create the model and give it its params (--weights, or the compiled-in ones). */
static int load_params(runner *r) {
    const cannl_model_api *api = r->api;
    cannl_error err;
    /* the state sized for the batches it runs: --batch, or --generate's sequences at once */
    const int64_t cap = r->o.generate_set ? cannl__generate_rows(r->model, &r->o) : r->o.batch;
    const int in_place = !r->o.weights && r->model->create_embedded; /* the compiled-in params, not copied */
    r->m = in_place ? r->model->create_embedded(cap) : api->create_batch ? api->create_batch(0, cap) : api->create(0);
    if (!r->m) return report(r, CANNL__EXIT_FAIL, "out of memory (creating the model)");
    if (r->o.weights) {
        cannl__name_map *names = NULL;
        cannl_status st = CANNL_OK;
        if (r->o.name_map && (st = cannl__name_map_load(r->o.name_map, &names, &err)) == CANNL_OK)
            st = cannl__name_map_check(api, r->m, names, r->o.name_map, &err);
        if (st == CANNL_OK) st = cannl__model_load_named(api, r->m, r->o.weights, CANNL_LOAD_PARAMS, names, NULL, &err);
        cannl__name_map_free(names);
        if (st != CANNL_OK) return report(r, CANNL__EXIT_FAIL, "%s", err.msg);
    } else if (!in_place) {
        int rc = use_embedded(r);
        if (rc) return rc;
    }
    if (r->o.threads > 0 && api->set_threads) api->set_threads(r->o.threads);
    return CANNL__EXIT_OK;
}

static int setup(runner *r) {
    const cannl_model_api *api = r->api;
    cannl_error err;
    size_t es = cannl_dtype_size(api->dtype);
    int rc = load_params(r);
    if (rc) return rc;

    int32_t n_in = api->num_inputs;
    r->sub_inputs = calloc((size_t)n_in + 1, sizeof *r->sub_inputs);
    r->sub_index = calloc((size_t)n_in + 1, sizeof *r->sub_index);
    r->ds = calloc((size_t)n_in + 1, sizeof *r->ds);
    r->bufs = calloc((size_t)n_in + 1, sizeof *r->bufs);
    r->in = calloc((size_t)n_in + 1, sizeof *r->in);
    r->out_all = calloc((size_t)api->num_outputs + 1, sizeof *r->out_all);
    r->out_batch = calloc((size_t)api->num_outputs + 1, sizeof *r->out_batch);
    r->idx = calloc((size_t)r->o.batch, sizeof *r->idx);
    r->metrics = calloc((size_t)api->num_metrics + 1, sizeof *r->metrics);
    if (!r->sub_inputs || !r->sub_index || !r->ds || !r->bufs || !r->in || !r->out_all || !r->out_batch || !r->idx ||
        !r->metrics)
        return report(r, CANNL__EXIT_FAIL, "out of memory");
    r->sub = *api;
    r->sub.num_inputs = 0;
    r->sub.inputs = r->sub_inputs;
    for (int32_t i = 0; i < n_in; i++)
        if (r->o.metric || r->model->forward_reads[i]) {
            r->sub_index[r->sub.num_inputs] = i;
            r->sub_inputs[r->sub.num_inputs++] = api->inputs[i];
        }
    if (r->sub.num_inputs > 0) {
        /* Class indices are one-hot encoded only for the targets (inputs forward does not
           read): a forward input given one value per example is a wrong file, not labels. */
        unsigned char *one_hot = calloc((size_t)r->sub.num_inputs, 1);
        if (!one_hot) return report(r, CANNL__EXIT_FAIL, "out of memory");
        for (int32_t j = 0; j < r->sub.num_inputs; j++) one_hot[j] = !r->model->forward_reads[r->sub_index[j]];
        cannl_status st = cannl__bind_load(&r->sub, r->o.inputs, r->o.ninputs, one_hot, r->ds, &r->count, &err);
        free(one_hot);
        if (st != CANNL_OK) return report(r, CANNL__EXIT_FAIL, "%s", err.msg);
    } else {
        r->count = 1; /* a model whose outputs read no input: one example */
    }
    for (int32_t j = 0; j < r->sub.num_inputs; j++) {
        r->bufs[j] = cannl_alloc((size_t)r->o.batch * (size_t)r->sub_inputs[j].size * cannl__input_elem_size(&r->sub, j));
        if (!r->bufs[j]) return report(r, CANNL__EXIT_FAIL, "out of memory");
        r->in[r->sub_index[j]] = r->bufs[j];
    }
    for (int32_t k = 0; k < api->num_outputs; k++) {
        /* forward fills every output: outputs not written go to a batch-sized scratch */
        size_t per = (size_t)api->outputs[k].size * es;
        size_t rows = (size_t)(r->o.out_paths[k] ? r->count : r->o.batch);
        size_t bytes;
        if (cannl__mul_size(rows, per, &bytes)) return report(r, CANNL__EXIT_FAIL, "out of memory");
        r->out_all[k] = cannl_alloc(bytes);
        if (!r->out_all[k]) return report(r, CANNL__EXIT_FAIL, "out of memory (%zu bytes for output '%s')", bytes,
                                          api->outputs[k].name);
    }
    return CANNL__EXIT_OK;
}

/* Write every output named by --output (CSV for a .csv path, else .npy), all or none: each
   goes to a temporary next to its target first, and the temporaries are renamed over the
   targets only once all of them are complete. */
static cannl_status write_outputs(runner *r) {
    const cannl_model_api *api = r->api;
    cannl_error err;
    cannl_status st = CANNL_OK;
    char **tmp = calloc((size_t)api->num_outputs + 1, sizeof *tmp);
    if (!tmp) {
        report(r, CANNL__EXIT_FAIL, "out of memory");
        return CANNL_E_NOMEM;
    }
    /* Temporaries a killed earlier run left beside the targets go first. */
    for (int32_t k = 0; k < api->num_outputs; k++)
        if (r->o.out_paths[k]) cannl__tmp_clean_stale(r->o.out_paths[k]);
    /* What is not replaced (a directory, a FIFO, a link ...: checked at start, but it may have
       appeared since) would only fail at its rename, after others were renamed. */
    for (int32_t k = 0; k < api->num_outputs && st == CANNL_OK; k++) {
        char why[64];
        if (r->o.out_paths[k] && !cannl__tmp_replaceable(r->o.out_paths[k], why, sizeof why))
            st = cannl__fail(&err, CANNL_E_IO, r->o.out_paths[k], "cannot write: it %s", why);
    }
    for (int32_t k = 0; k < api->num_outputs && st == CANNL_OK; k++) {
        const char *path = r->o.out_paths[k];
        if (!path) continue;
        int64_t shape[CANNL_MAX_DIMS + 1];
        shape[0] = r->count;
        for (int32_t d = 0; d < api->outputs[k].ndims; d++) shape[1 + d] = api->outputs[k].dims[d];
        st = cannl__array_write_tmp(path, cannl__out_format_of(path), api->dtype, api->outputs[k].ndims + 1, shape,
                                    r->out_all[k], &tmp[k], &err);
    }
    for (int32_t k = 0; k < api->num_outputs; k++) {
        if (!tmp[k]) continue;
        if (st == CANNL_OK) {
            st = cannl__tmp_commit(tmp[k], r->o.out_paths[k], &err);
        } else {
            remove(tmp[k]);
            free(tmp[k]);
        }
    }
    free(tmp);
    if (st != CANNL_OK) report(r, CANNL__EXIT_FAIL, "%s", err.msg);
    return st;
}

static int run(runner *r) {
    const cannl_model_api *api = r->api;
    cannl_error err;
    size_t es = cannl_dtype_size(api->dtype);
    int writes = 0;
    for (int32_t k = 0; k < api->num_outputs; k++) writes |= r->o.out_paths[k] != NULL;
    double loss_sum = 0;
    double *sum = calloc((size_t)api->num_metrics + 1, sizeof *sum);
    if (!sum) return report(r, CANNL__EXIT_FAIL, "out of memory");
    for (int64_t start = 0; start < r->count; start += r->o.batch) {
        int64_t n = r->count - start < r->o.batch ? r->count - start : r->o.batch;
        for (int64_t j = 0; j < n; j++) r->idx[j] = start + j;
        if (r->sub.num_inputs > 0 && cannl__bind_gather(&r->sub, r->ds, r->idx, n, r->bufs, &err) != CANNL_OK) {
            free(sum);
            return report(r, CANNL__EXIT_FAIL, "%s", err.msg);
        }
        if (writes) {
            for (int32_t k = 0; k < api->num_outputs; k++) {
                size_t per = (size_t)api->outputs[k].size * es;
                r->out_batch[k] = (char *)r->out_all[k] + (r->o.out_paths[k] ? (size_t)start * per : 0);
            }
            api->forward(r->m, (const void *const *)r->in, n, r->out_batch);
        }
        if (r->o.metric) {
            double loss = 0;
            api->eval(r->m, (const void *const *)r->in, n, &loss, r->metrics);
            loss_sum += loss * (double)n;
            for (int32_t k = 0; k < api->num_metrics; k++) sum[k] += r->metrics[k] * (double)n;
        }
    }
    if (writes && write_outputs(r) != CANNL_OK) {
        free(sum);
        return CANNL__EXIT_FAIL;
    }
    if (r->o.metric) {
        printf("test loss: %.4f\n", loss_sum / (double)r->count);
        for (int32_t k = 0; k < api->num_metrics; k++)
            printf("test %s: %.4f\n", api->metric_names[k], sum[k] / (double)r->count);
    }
    free(sum);
    return CANNL__EXIT_OK;
}

static void cleanup(runner *r) {
    const cannl_model_api *api = r->api;
    if (r->m) api->destroy(r->m);
    for (int32_t j = 0; r->ds && j < r->sub.num_inputs; j++) cannl_dataset_free(&r->ds[j]);
    for (int32_t j = 0; r->bufs && j < api->num_inputs; j++) cannl_free(r->bufs[j]);
    for (int32_t k = 0; r->out_all && k < api->num_outputs; k++) cannl_free(r->out_all[k]);
    free(r->sub_inputs);
    free(r->sub_index);
    free(r->ds);
    free(r->bufs);
    free((void *)r->in);
    free(r->out_all);
    free(r->out_batch);
    free(r->idx);
    free(r->metrics);
    cannl__infer_opts_free(&r->o);
}

int cannl_infer_main(const cannl_infer_model *model, int argc, char **argv) {
    if (!model || !model->api || !model->forward_reads || !model->api->create || !model->api->forward) {
        fprintf(stderr, "cannl_infer_main: no model table\n");
        return CANNL__EXIT_USAGE;
    }
#ifdef SIGXFSZ
    signal(SIGXFSZ, SIG_IGN); /* past ulimit -f: an error line and no output, not a kill */
#endif
    runner r;
    memset(&r, 0, sizeof r);
    r.model = model;
    r.api = model->api;
    char msg[512];
    int rc = cannl__infer_parse(model, argc, argv, &r.o, msg, sizeof msg);
    if (rc == CANNL__EXIT_OK && r.o.help) {
        cannl__infer_usage(model, r.o.prog, stdout);
        cannl__infer_opts_free(&r.o);
        return CANNL__EXIT_OK;
    }
    if (rc == CANNL__EXIT_OK && !r.o.weights && !model->embedded && !model->create_embedded) {
        snprintf(msg, sizeof msg, "no weights: pass --weights PATH.safetensors (none are compiled into %s)", r.o.prog);
        rc = CANNL__EXIT_USAGE;
    }
    cannl_isa isa;
    cannl_error isa_err;
    if (rc == CANNL__EXIT_OK && cannl_isa_select(&isa, &isa_err) != CANNL_OK) { /* a bad CANNL_ISA */
        snprintf(msg, sizeof msg, "%s", isa_err.msg);
        rc = CANNL__EXIT_USAGE;
    }
    if (rc != CANNL__EXIT_OK) {
        fprintf(stderr, "%s: error: %s\n", r.o.prog, msg);
        cannl__infer_opts_free(&r.o);
        return rc;
    }
    if (r.o.generate_set) {
        rc = load_params(&r);
        if (!rc) rc = cannl__infer_generate(model, r.m, &r.o);
    } else {
        rc = setup(&r);
        if (!rc) rc = run(&r);
    }
    cleanup(&r);
    return rc;
}

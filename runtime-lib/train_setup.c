/* train_setup.c - a run set up before its first step: the model table checked, the model
 * created (then --resume or --init, --lr, --threads, the schedule), the data loaded (files or
 * token streams), the steps per epoch and the step to stop at, the batch buffers, and the
 * metrics log (cut back to a resumed checkpoint's step; for a run resumed at its end, whether it
 * holds the final evaluation's record already). */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int cannl__train_check_api(const cannl__trainer *t) {
    const cannl_model_api *a = t->api;
    const char *missing = !a->create ? "create" : !a->destroy ? "destroy" : !a->train_step ? "train_step"
                        : !a->state_tensors ? "state_tensors" : !a->get_step ? "get_step" : !a->set_step ? "set_step"
                        : NULL;
    if (!a->name || (a->dtype != CANNL_F32 && a->dtype != CANNL_F64) || a->max_batch < 1 || a->num_inputs < 0 ||
        a->num_metrics < 0 || (a->num_inputs > 0 && !a->inputs) || (a->num_metrics > 0 && !a->metric_names))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "the model table is malformed");
    if (missing)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "model '%s': the model table has no %s function", a->name,
                                   missing);
    return CANNL__EXIT_OK;
}

/* --init FILE --init-partial: the params FILE holds from it, the others as create() made them
   (the spec's init from the seed), one line each saying which (unless --quiet; rank 0 only). */
static int init_partial(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    unsigned char *loaded = calloc((size_t)api->num_params + 1, 1);
    if (!loaded) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    cannl_error err;
    if (cannl__model_load_partial(api, t->m, t->o.init, t->names, loaded, &err) != CANNL_OK) {
        free(loaded);
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    }
    int32_t from_file = 0;
    for (int32_t i = 0; i < api->num_params; i++) from_file += loaded[i];
    if (!t->o.quiet) {
        printf("--init-partial: %d of %d params from %s, %d from the spec's init (seed %" PRIu64 "):\n", (int)from_file,
               (int)api->num_params, t->o.init, (int)(api->num_params - from_file), t->seed);
        for (int32_t i = 0; i < api->num_params; i++) {
            char buf[512];
            const char *name = api->params[i].name, *key = cannl__name_map_apply(t->names, name, buf, sizeof buf);
            if (loaded[i] && key != name)
                printf("  %s  from %s ('%s')\n", name, t->o.init, key);
            else if (loaded[i])
                printf("  %s  from %s\n", name, t->o.init);
            else
                printf("  %s  from the spec's init (%s has no '%s')\n", name, t->o.init, key);
        }
        fflush(stdout);
    }
    free(loaded);
    return CANNL__EXIT_OK;
}

/* Create the model, then --resume or --init. */
int cannl__train_setup_model(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->o.resume) cannl__train_resume_seed(t);
    /* the state sized for the run's batch (its evaluations use the same), not the model's maximum */
    t->m = api->create_batch ? api->create_batch(t->seed, t->batch) : api->create(t->seed);
    if (!t->m)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "cannot create model '%s' (out of memory%s)", api->name,
                                   t->ext ? ", or its device failed: see above" : "");
    cannl_error err;
    if (t->o.name_map && (cannl__name_map_load(t->o.name_map, &t->names, &err) != CANNL_OK ||
                          cannl__name_map_check(api, t->m, t->names, t->o.name_map, &err) != CANNL_OK))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    if (t->o.resume) {
        cannl_checkpoint *ck = NULL;
        if (cannl__model_load_named(api, t->m, t->o.resume, CANNL_LOAD_ALL, t->names, &ck, &err) != CANNL_OK)
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        int rc = cannl__train_resume_settings(t, ck);
        cannl_checkpoint_close(ck);
        if (rc) return rc;
        t->step = t->resumed_step = api->get_step(t->m);
    } else if (t->o.init_partial) {
        int rc = init_partial(t);
        if (rc) return rc;
    } else if (t->o.init) {
        if (cannl__model_load_named(api, t->m, t->o.init, CANNL_LOAD_PARAMS, t->names, NULL, &err) != CANNL_OK)
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    }
    if (t->o.lr_set) {
        if (!api->set_lr)
            return cannl__train_report(t, CANNL__EXIT_FAIL, "--lr: model '%s' cannot change its learning rate",
                                       api->name);
        api->set_lr(t->m, t->o.lr);
    }
    if (t->o.threads > 0 && api->set_threads) api->set_threads(t->o.threads);
    t->base_lr = api->get_lr ? api->get_lr(t->m) : api->lr;
    if (t->cosine && !api->set_lr)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "--lr-schedule: model '%s' cannot change its learning rate",
                                   api->name);
    if (t->override && api->schedule && api->set_schedule) api->set_schedule(t->m, 0);
    return CANNL__EXIT_OK;
}

/* Load --data and --test, check a resumed run's example count. */
int cannl__train_setup_data(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (!t->has_inputs) return CANNL__EXIT_OK;
    cannl_error err;
    if (t->streamed) {
        if (cannl__stream_open(&t->stream, &err) != CANNL_OK || (t->val.path && cannl__stream_open(&t->val, &err) != CANNL_OK))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        return CANNL__EXIT_OK;
    }
    /* One-hot encoding of class-index files only into targets (inputs forward does not read). */
    unsigned char *one_hot = NULL;
    if (api->forward_reads) {
        one_hot = calloc((size_t)api->num_inputs + 1, 1);
        if (!one_hot) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
        for (int32_t i = 0; i < api->num_inputs; i++) one_hot[i] = !api->forward_reads[i];
    }
    cannl_status st = cannl__bind_load(api, t->o.data, t->o.ndata, one_hot, t->train, &t->ntrain, &err);
    if (st == CANNL_OK && t->o.ntest > 0)
        st = cannl__bind_load(api, t->o.test, t->o.ntest, one_hot, t->test, &t->ntest, &err);
    free(one_hot);
    if (st != CANNL_OK)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    if (t->ck_examples > 0 && t->ck_examples != t->ntrain)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: checkpoint was trained on %" PRId64
                                   " examples, but the training data has %" PRId64, t->o.resume, t->ck_examples,
                                   t->ntrain);
    return CANNL__EXIT_OK;
}

/* Steps per epoch, the step to stop at, buffers. */
int cannl__train_setup_run(cannl__trainer *t) {
    const cannl_model_api *api = t->api;
    if (t->streamed) {
        t->spe = INT64_MAX; /* one endless epoch of random windows */
        t->target = t->horizon = t->o.steps;
        t->epochs_total = 1;
    } else if (t->has_inputs) {
        t->spe = (t->ntrain + t->batch - 1) / t->batch;
        int64_t by_epochs = INT64_MAX;
        if ((t->o.epochs_set || !t->o.steps_set) && cannl__mul_i64(t->o.epochs, t->spe, &by_epochs)) by_epochs = INT64_MAX;
        t->target = t->o.steps_set && t->o.steps < by_epochs ? t->o.steps : by_epochs;
        t->horizon = by_epochs != INT64_MAX ? by_epochs : t->target;
        t->epochs_total = t->target / t->spe + (t->target % t->spe != 0);
    } else {
        t->batch = 1;
        t->spe = INT64_MAX; /* one endless epoch */
        t->target = t->o.steps;
        t->horizon = t->target;
        t->epochs_total = 1;
    }
    const int32_t nin = api->num_inputs;
    t->bufs = calloc((size_t)nin + 1, sizeof *t->bufs);
    t->idx = malloc((size_t)t->batch * sizeof *t->idx);
    t->perm = malloc(((size_t)t->ntrain + 1) * sizeof *t->perm);
    t->metrics = calloc((size_t)api->num_metrics + 1, sizeof *t->metrics);
    t->record = calloc((size_t)api->num_metrics * 2 + 8, sizeof *t->record);
    t->val_metrics = calloc((size_t)api->num_metrics + 1, sizeof *t->val_metrics);
    t->offsets = malloc((size_t)t->batch * sizeof *t->offsets);
    /* (not on data-parallel ranks: they gather their slice of each step, not the batch) */
    const int prefetching = t->ext && t->ext->prefetch && !t->dist;
    if (prefetching) t->next = calloc((size_t)nin + 1, sizeof *t->next);
    int oom = !t->bufs || !t->idx || !t->perm || !t->metrics || !t->record || !t->val_metrics || !t->offsets ||
              (prefetching && !t->next);
    for (int32_t i = 0; i < nin && !oom; i++) {
        size_t bytes = (size_t)t->batch * (size_t)api->inputs[i].size * cannl__input_elem_size(api, i);
        oom = !(t->bufs[i] = cannl_alloc(bytes)) || (t->next && !(t->next[i] = cannl_alloc(bytes)));
    }
    if (oom) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory allocating batch buffers");
    t->nstate = api->state_tensors(t->m, NULL, 0);
    if (!(t->state = calloc(t->nstate + 1, sizeof *t->state)))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    if (t->o.metrics) {
        cannl_error err;
        /* A resumed run continues the log: first the records an earlier run wrote after the
           checkpoint (before it crashed or diverged) go, so that every step appears once. */
        int64_t removed = 0;
        if (t->o.resume && cannl__metrics_trim(t->o.metrics, t->step, t->has_inputs && !t->streamed ? t->spe : 0, &removed, &err))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        if (removed > 0 && !t->o.quiet)
            printf("%s: removed %" PRId64 " record%s after step %" PRId64 " (the checkpoint's) from %s\n", t->o.prog,
                   removed, removed == 1 ? "" : "s", t->step, t->o.metrics);
        /* A run resumed at its end writes its final validation's or test's record only if the
           log lacks it (each restart would add one more). */
        if (t->o.resume && t->step >= t->target &&
            ((t->val.path && cannl__metrics_has(t->o.metrics, t->step, "val_loss", &t->val_logged, &err)) ||
             (t->o.ntest > 0 && cannl__metrics_has(t->o.metrics, t->step, "test_loss", &t->test_logged, &err))))
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
        if (cannl_metrics_open(t->o.metrics, t->o.resume != NULL, &t->log, &err) != CANNL_OK)
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    }
    return CANNL__EXIT_OK;
}

/* train_resume.c - what a resumed run takes from its checkpoint's metadata (seed, batch,
 * shuffle, lr and its schedule, the example count, a mid-epoch's loss sums), each value read
 * as strictly as the flag it stands for (also the lr of its last step and, for --keep-last, the
 * step files the run kept), and checked against the flags given again and the step (a
 * different --batch is an error, a different --seed or --no-shuffle a warning). */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Metadata value as an integer / real; 0 ok, 1 absent, -1 malformed. */
static int meta_u64(const cannl_checkpoint *ck, const char *key, uint64_t *out) {
    const char *s = cannl_checkpoint_meta(ck, key);
    if (!s) return 1;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* A learning rate, read as --lr reads it: a non-negative decimal number. */
static int meta_lr(const cannl_checkpoint *ck, const char *key, double *out) {
    const char *s = cannl_checkpoint_meta(ck, key);
    if (!s) return 1;
    double v;
    if (cannl__parse_decimal(s, &v) != CANNL__NUM_OK || v < 0) return -1;
    *out = v;
    return 0;
}

/* Whether the run resumes from its own --checkpoint: PATH itself, or its step file of the
   resumed step, PATH.stepN. */
static int resumes_own(const cannl__trainer *t, int64_t step) {
    if (!t->o.checkpoint) return 0;
    if (cannl__same_file(t->o.resume, t->o.checkpoint)) return 1;
    const size_t cap = strlen(t->o.checkpoint) + 32;
    char *name = malloc(cap);
    if (!name) return 0;
    snprintf(name, cap, "%s.step%" PRId64, t->o.checkpoint, step);
    const int own = cannl__same_file(t->o.resume, name);
    free(name);
    return own;
}

/* --keep-last: the step files the run wrote before (metadata "step_files", "300,400,500"), when
   it resumes from its own checkpoint; the oldest of them go as new ones are saved. */
static int resume_step_files(cannl__trainer *t, const cannl_checkpoint *ck) {
    const char *s = cannl_checkpoint_meta(ck, "step_files");
    const int64_t step = t->api->get_step(t->m);
    if (!s || t->o.keep_last <= 0 || !resumes_own(t, step)) return CANNL__EXIT_OK;
    size_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    if (!(t->kept = calloc(n, sizeof *t->kept))) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        char *end = (char *)p;
        errno = 0;
        const unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
        if (end == p || errno || v > (unsigned long long)step || *end != (i + 1 < n ? ',' : '\0'))
            return cannl__train_report(t, CANNL__EXIT_FAIL,
                                       "%s: metadata \"step_files\" is '%s', not a list of steps up to the checkpoint's "
                                       "%" PRId64 " (\"300,400,500\")", t->o.resume, s, step);
        t->kept[i] = (int64_t)v;
        p = end + 1;
    }
    t->nkept = n;
    return CANNL__EXIT_OK;
}

/* The state is created with the run's seed, the checkpoint's: dropout's masks follow from it
   and the step, so the resumed run draws the masks the first one would have. (Any problem
   with the file is reported by the load that follows.) */
void cannl__train_resume_seed(cannl__trainer *t) {
    cannl_checkpoint *ck = NULL;
    cannl_error err;
    uint64_t v;
    if (cannl_checkpoint_open(t->o.resume, NULL, &ck, &err) == CANNL_OK) {
        if (!t->o.seed_set && meta_u64(ck, "seed", &v) == 0) t->seed = v;
        /* the state is created for the run's batch: the checkpoint's, which resume_settings
           checks again once it is loaded */
        if (!t->o.batch_set && t->has_inputs && meta_u64(ck, "batch", &v) == 0 && v >= 1 &&
            v <= (uint64_t)t->api->max_batch)
            t->batch = (int64_t)v;
        cannl_checkpoint_close(ck);
    }
}

/* Settings a resumed run takes from its checkpoint (unless given again). */
int cannl__train_resume_settings(cannl__trainer *t, const cannl_checkpoint *ck) {
    const char *path = t->o.resume;
    uint64_t v;
    double lr;
    int r = meta_u64(ck, "batch", &v);
    if (r < 0) return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"batch\" is not an integer", path);
    if (r == 0 && t->has_inputs) {
        if (t->o.batch_set && (uint64_t)t->o.batch != v)
            return cannl__train_report(t, CANNL__EXIT_USAGE,
                                       "--batch %" PRId64 " differs from the batch %" PRIu64 " of checkpoint %s (a "
                                       "resumed run keeps its batch size)",
                                       t->o.batch, v, path);
        if (v < 1 || v > (uint64_t)t->api->max_batch)
            return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: checkpoint was trained with batch %" PRIu64
                                       ", but the model's maximum batch is %" PRId64, path, v, t->api->max_batch);
        t->batch = (int64_t)v;
    }
    r = meta_u64(ck, "seed", &v);
    if (r < 0) return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"seed\" is not an integer", path);
    if (r == 0 && !t->o.seed_set) t->seed = v;
    if (r == 0 && t->o.seed_set && t->o.seed != v)
        cannl__train_warn(t, "--seed %" PRIu64 " differs from the checkpoint's seed %" PRIu64 "; %s with %" PRIu64,
                          t->o.seed, v, t->o.stream ? "drawing the stream's windows" : "shuffling", t->o.seed);
    r = meta_u64(ck, "shuffle", &v);
    if (r < 0 || (r == 0 && v > 1))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"shuffle\" is not 0 or 1", path);
    if (r == 0 && !t->o.no_shuffle) t->shuffle = (int)v;
    if (r == 0 && t->o.no_shuffle && v == 1 && t->has_inputs)
        cannl__train_warn(t, "--no-shuffle: the checkpoint's run shuffled; continuing without shuffling");
    r = meta_lr(ck, "lr", &lr);
    if (r < 0)
        return cannl__train_report(t, CANNL__EXIT_FAIL,
                                   "%s: metadata \"lr\" is '%s', not a non-negative number (as --lr takes)", path,
                                   cannl_checkpoint_meta(ck, "lr"));
    if (r == 0 && !t->o.lr_set && t->api->set_lr) t->api->set_lr(t->m, lr);
    const char *sched = cannl_checkpoint_meta(ck, "lr_schedule");
    if (sched && strcmp(sched, "spec") != 0 && strcmp(sched, "constant") != 0 && strcmp(sched, "cosine") != 0)
        return cannl__train_report(t, CANNL__EXIT_FAIL,
                                   "%s: metadata \"lr_schedule\" is '%s', not spec, constant or cosine", path, sched);
    if (sched && !t->o.schedule_set) {
        t->cosine = strcmp(sched, "cosine") == 0;
        t->override = strcmp(sched, "spec") != 0;
    }
    r = meta_lr(ck, "last_lr", &t->last_lr);
    if (r < 0)
        return cannl__train_report(t, CANNL__EXIT_FAIL,
                                   "%s: metadata \"last_lr\" is '%s', not a non-negative number (as --lr takes)", path,
                                   cannl_checkpoint_meta(ck, "last_lr"));
    if ((r = resume_step_files(t, ck))) return r;
    r = meta_u64(ck, "examples", &v);
    if (r < 0 || (r == 0 && (v < 1 || v > INT64_MAX || !t->has_inputs || t->streamed)))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"examples\" is '%s', %s", path,
                                   cannl_checkpoint_meta(ck, "examples"),
                                   !t->has_inputs ? "but a model without inputs has no examples"
                                   : t->streamed  ? "but a --stream run has no examples (the checkpoint is of a --data "
                                                    "run)"
                                                  : "not a positive integer");
    if (r == 0) t->ck_examples = (int64_t)v;
    /* The sums of a checkpoint saved mid-epoch (absent: the epoch's train_loss covers the
       steps this run takes). */
    const char *el = cannl_checkpoint_meta(ck, "epoch_loss_sum");
    r = meta_u64(ck, "epoch_loss_examples", &v);
    if ((el != NULL) != (r == 0) || r < 0 || (el && (cannl__parse_decimal(el, &lr) != CANNL__NUM_OK || v > INT64_MAX)))
        return cannl__train_report(t, CANNL__EXIT_FAIL,
                                   "%s: metadata \"epoch_loss_sum\" '%s' and \"epoch_loss_examples\" '%s' are "
                                   "not a number and a count", path, el ? el : "(none)",
                                   cannl_checkpoint_meta(ck, "epoch_loss_examples")
                                       ? cannl_checkpoint_meta(ck, "epoch_loss_examples")
                                       : "(none)");
    if (el) {
        t->ep_loss = lr;
        t->ep_examples = (int64_t)v;
    }
    /* "epoch" counts the completed epochs: step / steps per epoch (0 without inputs). */
    uint64_t epoch;
    r = meta_u64(ck, "epoch", &epoch);
    const int64_t step = t->api->get_step(t->m);
    int64_t spe = 0, want = 0;
    if (t->has_inputs && t->ck_examples > 0) {
        spe = (t->ck_examples + t->batch - 1) / t->batch;
        want = step / spe;
    }
    if (r < 0)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch\" is '%s', not a non-negative integer",
                                   path, cannl_checkpoint_meta(ck, "epoch"));
    if (r == 0 && (!t->has_inputs || t->streamed) && epoch != 0)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch\" is %" PRIu64
                                   ", not 0 (%s runs one endless epoch)", path, epoch,
                                   t->streamed ? "a --stream run" : "a model without inputs");
    if (r == 0 && spe > 0 && epoch != (uint64_t)want)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: metadata \"epoch\" is %" PRIu64 ", but its step %" PRId64
                                   " at %" PRId64 " steps per epoch makes %" PRId64
                                   " completed epochs (a corrupt or edited checkpoint)", path, epoch, step, spe, want);
    return CANNL__EXIT_OK;
}

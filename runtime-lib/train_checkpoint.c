/* train_checkpoint.c - checkpoints, and the divergence checks that keep a bad state out of
 * them. A --checkpoint that cannot be written is reported before training. The loss of every
 * step is checked (it is returned anyway), and every state tensor (params and optimiser state)
 * at each --log-every step and before every save: a nan or inf stops the run with exit status
 * 1 before anything is saved, so the last checkpoint stays good.
 *
 * When: after every epoch, at the end (or a stop signal), and periodically, every
 * --checkpoint-every steps or --checkpoint-minutes of training since the last save, whichever
 * comes first (1000 steps or 10 minutes by default), so a run killed outright (kill -9, the
 * OOM killer, a lost node) loses at most that much. With --keep-last K each save is also kept
 * as PATH.stepN (a hard link to PATH, else a copy) and the step files beyond the K newest that
 * this run wrote (listed in the checkpoint's metadata "step_files", carried over by a --resume
 * of PATH or of one of its step files) are deleted. */
#define _POSIX_C_SOURCE 200809L

#include "trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A checkpoint that cannot be written is reported before training, not after an epoch; the
   temporary files of saves a killed run left behind are removed. */
int cannl__train_check_checkpoint_dir(const cannl__trainer *t) {
    const char *p = t->o.checkpoint;
    if (!p) return CANNL__EXIT_OK;
    struct stat sb;
    if (stat(p, &sb) == 0 && !S_ISREG(sb.st_mode))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: cannot write the checkpoint: %s", p,
                                   S_ISDIR(sb.st_mode) ? "it is a directory (--checkpoint names a file)"
                                                       : "not a regular file");
    const char *slash = strrchr(p, '/');
    char dir[1024];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    if (access(dir, W_OK) != 0) {
        char eb[128];
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s: cannot write the checkpoint in %s: %s", p, dir,
                                   cannl__strerror(errno, eb, sizeof eb));
    }
    const int stale = cannl__tmp_clean_stale(p);
    if (stale > 0)
        cannl__train_warn(t, "removed %d temporary file%s of %s left by an interrupted save (%s.tmp.<pid>)", stale,
                          stale == 1 ? "" : "s", p, p);
    const int stale_steps = t->o.keep_last > 0 ? cannl__tmp_clean_stale_steps(p) : 0;
    if (stale_steps > 0)
        cannl__train_warn(t, "removed %d temporary file%s of %s's step files left by an interrupted save "
                          "(%s.stepN.tmp.<pid>)", stale_steps, stale_steps == 1 ? "" : "s", p, p);
    return CANNL__EXIT_OK;
}

int cannl__train_clock_due(const cannl__trainer *t) {
    return t->checkpointing && t->o.checkpoint_minutes > 0 &&
           cannl__train_now() - t->saved_at >= t->o.checkpoint_minutes * 60.0;
}

int cannl__train_checkpoint_due(const cannl__trainer *t) {
    if (!t->checkpointing) return 0;
    if (t->o.checkpoint_every > 0 && t->step % t->o.checkpoint_every == 0) return 1;
    /* Data-parallel: rank 0's clock, agreed on through the step's sums (the ZeRO-1 save is
       collective, so every rank must decide alike). */
    return t->dist ? t->time_due : cannl__train_clock_due(t);
}

/* Stop a diverged run: one line naming the step and the value, and what became of the
   checkpoint (nothing is saved after this). */
static int diverged(const cannl__trainer *t, const char *what) {
    char ck[1200] = "";
    if (t->o.checkpoint && t->saved_step >= 0)
        snprintf(ck, sizeof ck, "; %s keeps step %" PRId64, t->o.checkpoint, t->saved_step);
    else if (t->o.checkpoint && t->resumed_step >= 0 && strcmp(t->o.checkpoint, t->o.resume) == 0)
        snprintf(ck, sizeof ck, "; %s keeps step %" PRId64, t->o.checkpoint, t->resumed_step);
    else if (t->o.checkpoint)
        snprintf(ck, sizeof ck, "; %s was not written", t->o.checkpoint);
    return cannl__train_report(t, CANNL__EXIT_FAIL, "training diverged at step %" PRId64 ": %s (try a lower --lr)%s",
                               t->step, what, ck);
}

/* A loss (`which`: "loss", "test loss", "validation loss") that is nan or inf: the run
   diverged (params so large that the forward pass overflows, or a step's nan). */
int cannl__train_check_loss(const cannl__trainer *t, const char *which, double loss) {
    if (isfinite(loss)) return CANNL__EXIT_OK;
    char what[64];
    snprintf(what, sizeof what, "the %s is %s", which, cannl__nonfinite_name(loss));
    return diverged(t, what);
}

/* Every state tensor (params, then optimiser state) must be finite. */
int cannl__train_check_state(cannl__trainer *t) {
    if (t->api->state_tensors(t->m, t->state, t->nstate) != t->nstate)
        return cannl__train_report(t, CANNL__EXIT_FAIL, "model '%s': state_tensors returned inconsistent counts",
                                   t->api->name);
    if (t->ext && t->ext->error && t->ext->error(t->m))
        return cannl__train_report(t, CANNL__EXIT_FAIL, "%s", t->ext->error(t->m));
    for (size_t i = 0; i < t->nstate; i++) {
        const cannl_tensor *x = &t->state[i];
        if (!x->data) continue; /* ZeRO-1: optimiser state another rank holds */
        int64_t count = 1;
        for (int32_t d = 0; d < x->ndims; d++) count *= x->shape[d];
        const int64_t bad = cannl__first_nonfinite(x->data, (size_t)count, x->dtype);
        if (bad >= 0) {
            const double v = x->dtype == CANNL_F32 ? (double)((const float *)x->data)[bad] : ((const double *)x->data)[bad];
            char what[256];
            snprintf(what, sizeof what, "%s '%s' holds %s at element %" PRId64,
                     i < (size_t)t->api->num_params ? "param" : "state tensor", x->name, cannl__nonfinite_name(v), bad);
            return diverged(t, what);
        }
    }
    return CANNL__EXIT_OK;
}

/* Checkpoint metadata "lr_schedule": "spec" while the spec's schedule drives the lr, else
   what --lr-schedule chose ("constant" also for a model without a schedule). */
static const char *lr_schedule_name(const cannl__trainer *t) {
    if (t->cosine) return "cosine";
    return t->api->schedule && !t->override ? "spec" : "constant";
}

/* Save now (every rank calls it): with ZeRO-1 the optimiser state is gathered first. */
int cannl__train_save(cannl__trainer *t) {
    const int rc = t->dist && t->o.zero && t->checkpointing ? cannl__train_zero_save(t) : cannl__train_save_now(t);
    if (!rc) t->saved_at = cannl__train_now();
    return rc;
}

/* PATH.stepN, malloc'd (NULL: out of memory). */
static char *step_path(const char *path, int64_t step) {
    const size_t cap = strlen(path) + 32;
    char *s = malloc(cap);
    if (s) snprintf(s, cap, "%s.step%" PRId64, path, step);
    return s;
}

/* --keep-last K: the step files kept after a save at `step` (the kept ones but `step`, then
   `step`) into *next (malloc'd, *n entries, oldest first); those beyond the K newest are
   deleted now (only regular files of this user's: a step file replaced by something else is
   left, with a warning). The list goes into the checkpoint's metadata. */
static int keep_steps(cannl__trainer *t, int64_t **next, size_t *n) {
    int64_t *list = malloc((t->nkept + 1) * sizeof *list);
    if (!list) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < t->nkept; i++)
        if (t->kept[i] != t->step) list[k++] = t->kept[i];
    list[k++] = t->step;
    const size_t drop = k > (size_t)t->o.keep_last ? k - (size_t)t->o.keep_last : 0;
    for (size_t i = 0; i < drop; i++) {
        char *old = step_path(t->o.checkpoint, list[i]), why[64], eb[128];
        if (!old) {
            free(list);
            return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
        }
        if (!cannl__tmp_replaceable(old, why, sizeof why))
            cannl__train_warn(t, "--keep-last: %s not deleted: it %s (cannl deletes only regular files you own)", old, why);
        else if (unlink(old) != 0 && errno != ENOENT)
            cannl__train_warn(t, "--keep-last: cannot delete %s: %s", old, cannl__strerror(errno, eb, sizeof eb));
        free(old);
    }
    memmove(list, list + drop, (k - drop) * sizeof *list);
    *next = list;
    *n = k - drop;
    return CANNL__EXIT_OK;
}

/* "300,400,500", malloc'd (NULL: out of memory). */
static char *join_steps(const int64_t *v, size_t n) {
    char *s = malloc(n * 22 + 1);
    if (!s) return NULL;
    size_t k = 0;
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(s + k, "%s%" PRId64, i ? "," : "", v[i]);
    return s;
}

/* PATH.stepN beside the checkpoint just saved: a hard link to it (no second write), else (a
   file system without links) a copy; atomically either way. */
static int write_step_file(cannl__trainer *t, const cannl_meta *meta, size_t nmeta) {
    char *path = step_path(t->o.checkpoint, t->step);
    if (!path) return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
    cannl_error err;
    int no_link = 0;
    cannl_status st = cannl__tmp_link(t->o.checkpoint, path, &no_link, &err);
    if (st != CANNL_OK && no_link) /* no hard links here: a copy */
        st = cannl__model_save_named(t->api, t->m, path, meta, nmeta, t->names, &err);
    free(path);
    return st == CANNL_OK ? CANNL__EXIT_OK : cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
}

/* The save itself: the state checked, then the checkpoint with the run's metadata. */
int cannl__train_save_now(cannl__trainer *t) {
    if (!t->o.checkpoint) return CANNL__EXIT_OK;
    int rc = cannl__train_check_state(t); /* a diverged state never replaces the last good checkpoint */
    if (rc) return rc;
    char seed[32], batch[32], epoch[32], lr[40], examples[32], ep_loss[40], ep_examples[32], last_lr[40];
    snprintf(seed, sizeof seed, "%" PRIu64, t->seed);
    snprintf(batch, sizeof batch, "%" PRId64, t->batch);
    snprintf(epoch, sizeof epoch, "%" PRId64, t->has_inputs && !t->streamed ? t->step / t->spe : 0);
    snprintf(lr, sizeof lr, "%.17g", t->base_lr);
    snprintf(examples, sizeof examples, "%" PRId64, t->ntrain);
    snprintf(ep_loss, sizeof ep_loss, "%.17g", t->ep_loss);
    snprintf(ep_examples, sizeof ep_examples, "%" PRId64, t->ep_examples);
    cannl_meta meta[11] = {{"seed", seed}, {"batch", batch}, {"epoch", epoch}, {"shuffle", t->shuffle ? "1" : "0"},
                           {"lr", lr}, {"lr_schedule", lr_schedule_name(t)}};
    size_t nmeta = 6;
    /* The lr the last step used (the schedule applied, in the model's precision), so that a
       record a resumed run writes before its first step says what the run's own did. */
    const double used = t->api->get_last_lr && t->steps_run > 0 ? t->api->get_last_lr(t->m) : t->last_lr;
    snprintf(last_lr, sizeof last_lr, "%.17g", used);
    if (t->api->get_last_lr && t->step > 0 && isfinite(used) && used >= 0) meta[nmeta++] = (cannl_meta){"last_lr", last_lr};
    if (t->has_inputs && !t->streamed) meta[nmeta++] = (cannl_meta){"examples", examples};
    /* Mid-epoch (a stream run: between records), the sums behind the next record's train_loss,
       so that a resumed run logs the same. */
    if (t->has_inputs && (t->streamed ? t->ep_examples > 0 : t->step % t->spe != 0)) {
        meta[nmeta++] = (cannl_meta){"epoch_loss_sum", ep_loss};
        meta[nmeta++] = (cannl_meta){"epoch_loss_examples", ep_examples};
    }
    int64_t *kept = NULL;
    size_t nkept = 0;
    char *steps = NULL;
    if (t->o.keep_last > 0) {
        if ((rc = keep_steps(t, &kept, &nkept))) return rc;
        if (!(steps = join_steps(kept, nkept))) {
            free(kept);
            return cannl__train_report(t, CANNL__EXIT_FAIL, "out of memory");
        }
        meta[nmeta++] = (cannl_meta){"step_files", steps};
    }
    cannl_error err;
    if (cannl__model_save_named(t->api, t->m, t->o.checkpoint, meta, nmeta, t->names, &err) != CANNL_OK)
        rc = cannl__train_report(t, CANNL__EXIT_FAIL, "%s", err.msg);
    else
        t->saved_step = t->step;
    if (!rc && t->o.keep_last > 0) {
        free(t->kept);
        t->kept = kept;
        t->nkept = nkept;
        kept = NULL;
        rc = write_step_file(t, meta, nmeta);
    }
    free(kept);
    free(steps);
    return rc;
}

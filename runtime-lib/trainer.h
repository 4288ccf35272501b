/* trainer.h - the state of one training run (cannl__trainer) and the functions of the files
 * that make up cannl_train_main, each on that state (train_main.c lists them in the order a run
 * uses them). Every function that can fail prints its one-line error (cannl__train_report) and
 * returns the exit status (CANNL__EXIT_OK, _FAIL or _USAGE). Not installed. */
#ifndef CANNL_TRAINER_H
#define CANNL_TRAINER_H

#include "cannl_rt.h"
#include "rt_internal.h"
#include "train_dist.h"
#include "train_internal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cannl__trainer {
    const cannl_model_api *api;
    cannl__dist *dist;             /* data-parallel ranks (train_dist.h), or NULL: one process */
    char prog[96];                 /* a rank's name in messages: "<prog> (rank r)" */
    cannl__train_opts o;
    void *m;
    int has_inputs;
    int streamed;                  /* --stream: batches of token windows, one endless epoch */
    cannl__stream stream, val;     /* --stream, --val-stream (val.path NULL: none) */
    int64_t *offsets;              /* a stream batch's window offsets (batch) */
    cannl__name_map *names;        /* --name-map, or NULL */
    int64_t validated_step;        /* step of the last validation, -1: none */
    double val_loss;               /* its loss (metrics in ->val_metrics) */
    double *val_metrics;           /* num_metrics */
    cannl_dataset *train, *test;   /* num_inputs each */
    int64_t ntrain, ntest;
    int64_t ck_examples;           /* a resumed run's example count, 0: unknown */
    void **bufs;                   /* one batch buffer per input */
    const cannl_model_ext *ext;    /* the model's extras, or NULL */
    void **next;                   /* with ext->prefetch: the next batch, gathered ahead */
    int staged;                    /* next holds the batch of the coming step */
    int64_t *perm, *idx;           /* epoch order (ntrain), eval indices (batch) */
    double *metrics;               /* num_metrics */
    cannl_metric *record;          /* a JSONL record: epoch, step, loss, metrics */
    cannl_metrics_log *log;
    cannl_tensor *state;           /* every state tensor (params first), for the finiteness scan */
    size_t nstate;

    uint64_t seed;
    int shuffle;
    int64_t batch, spe, target, epochs_total;
    int64_t horizon;               /* steps of the whole run (--epochs), for the lr schedule */
    int64_t step;                  /* global step count */
    double base_lr;                /* the learning rate before any schedule */
    int cosine;                    /* cosine decay of the lr over the run's target steps */
    int override;                  /* --lr-schedule (or the resumed run's) replaces the spec's */
    int64_t saved_step;            /* step of the last checkpoint, -1: none */
    double saved_at;               /* when the last save ended (or training began), for --checkpoint-minutes */
    int time_due;                  /* data-parallel: --checkpoint-minutes passed on rank 0's clock (agreed) */
    int64_t *kept;                 /* --keep-last: the steps of the PATH.stepN files this run keeps, oldest first */
    size_t nkept;
    double last_lr;                /* the lr the checkpoint's last step used (metadata "last_lr"), NAN: unknown */
    int val_logged, test_logged;   /* a run resumed at its end: the log has the final validation's / test's record */
    int64_t resumed_step;          /* step of the --resume checkpoint, -1: none */
    int64_t tested_step;           /* step of the last test evaluation, -1: none */
    double test_loss;              /* results of that evaluation (metrics in ->metrics) */
    double ep_loss;                /* the current epoch's sum of loss * examples so far (a stream run's: */
    int64_t ep_examples;           /* since its last record), resumed runs too (checkpoint metadata), */
                                   /* and its examples: the train_loss of its record */

    double t_start, last_print;
    int64_t steps_run, examples_run;
    int tty, line_open;
    int stop;                      /* data-parallel: the signal some rank got, agreed at the last step */
    /* ZeRO-1 (--zero 1 under mpirun): rank r updates params [shard[r], shard[r + 1]), whose
       gradients are the grad block's elements [shard_start[r], shard_start[r + 1]) */
    int32_t *shard;
    int64_t *shard_start;
    int checkpointing;             /* --checkpoint given (every rank: rank 0 writes, with ZeRO-1 all gather) */
    double *opt_bytes;             /* data-parallel: the optimiser-state bytes each rank holds (P) */
} cannl__trainer;

/* train_main.c: the signal that asked this process to stop (SIGINT, SIGTERM, SIGHUP), or 0. */
int cannl__train_interrupted(void);

/* The signal that stops the run, or 0: this process's, or with ranks the one they agreed on
   (every rank stops after the same step). */
static inline int cannl__train_stopping(const cannl__trainer *t) {
    return t->dist ? t->stop : cannl__train_interrupted();
}

/* train_output.c ------------------------------------------------------- */

/* Seconds on the monotonic clock. */
double cannl__train_now(void);
/* Print "<prog>: error: <message>" and return the exit status `code`; "<prog>: warning: ...". */
int cannl__train_report(const cannl__trainer *t, int code, const char *fmt, ...) CANNL__PRINTF(3, 4);
void cannl__train_warn(const cannl__trainer *t, const char *fmt, ...) CANNL__PRINTF(2, 3);
/* The record of step t->step of epoch `epoch` (0-based): its loss. */
int cannl__train_log_step(cannl__trainer *t, int64_t epoch, double loss);
/* The record of an epoch's end (epoch 1-based; train_loss NaN: left out, the final test
   evaluation of a run that stopped mid-epoch), with the test results when `tested`. */
int cannl__train_log_epoch(cannl__trainer *t, int64_t epoch, double train_loss, int tested);
/* A stream run's record at this step (with the validation's results when `validated`). */
int cannl__train_stream_record(cannl__trainer *t, int validated);
/* End the progress line on a terminal; the progress line after a step. */
void cannl__train_end_line(cannl__trainer *t);
void cannl__train_progress(cannl__trainer *t, int64_t epoch, int64_t step_in_epoch, double loss);
/* The line after epoch `epoch` (0-based) of `seen` examples, begun at t_epoch; a validation's. */
void cannl__train_print_epoch(cannl__trainer *t, int64_t epoch, double train_loss, int64_t seen, double t_epoch);
void cannl__train_print_validation(cannl__trainer *t);
/* The final validation and test evaluation (unless current) and the summary. */
int cannl__train_finish(cannl__trainer *t);

/* train_setup.c -------------------------------------------------------- */

/* The model table has what training needs. */
int cannl__train_check_api(const cannl__trainer *t);
/* Create the model, then --resume or --init, --lr, --threads, the lr schedule. */
int cannl__train_setup_model(cannl__trainer *t);
/* Load --data and --test (or open the streams), check a resumed run's example count. */
int cannl__train_setup_data(cannl__trainer *t);
/* Steps per epoch, the step to stop at, buffers, the metrics log. */
int cannl__train_setup_run(cannl__trainer *t);

/* train_resume.c ------------------------------------------------------- */

/* A --resume run's seed and batch, the checkpoint's unless --seed or --batch is given, for
   creating the model (sized for the batch; any problem with the file is left to the load that
   follows). */
void cannl__train_resume_seed(cannl__trainer *t);
/* The settings a resumed run takes from its checkpoint ck (unless given again), checked. */
int cannl__train_resume_settings(cannl__trainer *t, const cannl_checkpoint *ck);

/* train_checkpoint.c --------------------------------------------------- */

/* --checkpoint can be written (before training); stale temporaries of killed saves removed. */
int cannl__train_check_checkpoint_dir(const cannl__trainer *t);
/* A loss (`which`: "loss", "test loss", "validation loss") and every state tensor must be
   finite, else the run diverged: its error, exit status 1. */
int cannl__train_check_loss(const cannl__trainer *t, const char *which, double loss);
int cannl__train_check_state(cannl__trainer *t);
/* Save --checkpoint (if given) now: with ZeRO-1 through train_zero.c (every rank calls it);
   train_save_now is the save itself (the state checked first; with --keep-last the step file
   PATH.stepN beside it, and older step files of the run's deleted). */
int cannl__train_save(cannl__trainer *t);
int cannl__train_save_now(cannl__trainer *t);
/* Whether --checkpoint-minutes have passed since the last save, on this process's clock. */
int cannl__train_clock_due(const cannl__trainer *t);
/* Whether a periodic save is due after this step (--checkpoint-every, --checkpoint-minutes; every
   rank decides alike). */
int cannl__train_checkpoint_due(const cannl__trainer *t);

/* train_eval.c --------------------------------------------------------- */

/* The test set's loss and metrics into t->test_loss, t->metrics; the validation stream's into
   t->val_loss, t->val_metrics. */
int cannl__train_evaluate(cannl__trainer *t);
int cannl__train_validate(cannl__trainer *t);

/* train_loop.c --------------------------------------------------------- */

/* Train from t->step to t->target, or until a stop signal. */
int cannl__train_loop(cannl__trainer *t);

/* train_parallel.c ----------------------------------------------------- */

/* A rank's setup: the model can train data-parallel; ranks other than 0 quiet. */
int cannl__train_setup_rank(cannl__trainer *t);
/* The optimiser-state bytes each rank holds (t->opt_bytes), for the summary. */
int cannl__train_count_opt_bytes(cannl__trainer *t);
/* One data-parallel step on this rank's slice [lo, lo + count) of a global batch of n: the
   batch's mean loss into *loss. */
int cannl__train_dist_step(cannl__trainer *t, int64_t lo, int64_t count, int64_t n, double *loss);

/* train_zero.c --------------------------------------------------------- */

/* ZeRO-1: the shards, and this rank's optimiser state cut to its own. */
int cannl__train_setup_zero(cannl__trainer *t);
/* A save with the whole optimiser state gathered on rank 0 (every rank calls it). */
int cannl__train_zero_save(cannl__trainer *t);
/* A ZeRO-1 step (as cannl__train_dist_step). */
int cannl__train_zero_step(cannl__trainer *t, int64_t first, int64_t count, int64_t n, double *loss);

#endif /* CANNL_TRAINER_H */

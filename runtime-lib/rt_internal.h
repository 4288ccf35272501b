/* rt_internal.h - helpers shared by the runtime's .c files; not installed.
 * Internal names use the prefix cannl__ (double underscore). */
#ifndef CANNL_RT_INTERNAL_H
#define CANNL_RT_INTERNAL_H

#include "cannl_rt.h"

#include <stdio.h>

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define CANNL__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CANNL__PRINTF(f, a)
#endif

/* error.c ------------------------------------------------------------- */

/* Fill err (if not NULL) with "<path>: <message>" (path may be NULL) and
 * return `st`. */
cannl_status cannl__fail(cannl_error *err, cannl_status st, const char *path, const char *fmt, ...)
    CANNL__PRINTF(4, 5);

/* Thread-safe strerror into buf. */
const char *cannl__strerror(int errnum, char *buf, size_t cap);

/* Overflow-checked arithmetic on non-negative values: 0 on success, 1 on overflow. */
static inline int cannl__mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 1;
    if (b != 0 && a > INT64_MAX / b) return 1;
    *out = a * b;
    return 0;
}
static inline int cannl__mul_size(size_t a, size_t b, size_t *out) {
    if (b != 0 && a > SIZE_MAX / b) return 1;
    *out = a * b;
    return 0;
}

/* number.c ------------------------------------------------------------ */

typedef enum cannl__num { CANNL__NUM_OK = 0, CANNL__NUM_SYNTAX, CANNL__NUM_RANGE } cannl__num;

/* A whole NUL-terminated string as a decimal number: [+-]? digits [. digits] [e [+-] digits]
 * (digits on at least one side of the point). No spaces, hexadecimal floats, nan or inf.
 * CANNL__NUM_RANGE: the syntax is fine but the value overflows a double (1e999). */
cannl__num cannl__parse_decimal(const char *s, double *out);

/* Index of the first inf or nan among n values of dtype at p, or -1. */
int64_t cannl__first_nonfinite(const void *p, size_t n, cannl_dtype dtype);

/* "nan", "inf" or "-inf" for a non-finite v. */
const char *cannl__nonfinite_name(double v);

/* Byte order helpers (independent of the host's byte order). */
static inline int cannl__host_le(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}
static inline uint64_t cannl__load_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint32_t cannl__load_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline void cannl__store_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* attention_decode.c ------------------------------------------------- */

/* The instruction set (a cannl_isa) of the attention kernels (attention.c, attention_decode.c):
 * cannl_isa_select's, asked once. On x86-64 only. */
int cannl__attn_isa(void);

/* amx.c --------------------------------------------------------------- */

/* The AMX tile operations this process may run, CANNL__AMX_INT8 | CANNL__AMX_BF16, or 0
 * (no AMX, an OS that does not grant it, or CANNL_ISA naming an instruction set below amx). */
enum { CANNL__AMX_INT8 = 1, CANNL__AMX_BF16 = 2 };
int cannl__amx_features(void);

/* data.c ------------------------------------------------------------- */

/* cannl_dataset_load for a file bound as PATH[:header][:COLUMNS] (either order): ":header"
 * declares a CSV file's header row (the first row is skipped whatever it holds); ":COLUMNS"
 * takes those columns of a CSV file ("0-5", "6", "0,2,4-7": 0-based, ranges inclusive). A file
 * whose name is the whole spec is read as it is. Messages name the file. */
cannl_status cannl__dataset_load_bound(cannl_dataset *ds, const char *path_spec, cannl_dtype dtype, cannl_error *err);

/* array_write.c -------------------------------------------------------- */

typedef enum cannl__out_format { CANNL__OUT_NPY, CANNL__OUT_CSV } cannl__out_format;

/* CSV when path ends in ".csv" (any case), else .npy. */
cannl__out_format cannl__out_format_of(const char *path);

/* Write the array (row-major, shape[0..ndims)) in format fmt to a new temporary file
 * next to path (PATH.tmp.<pid>...); *tmp receives its malloc'd name. On failure no file
 * is left and *tmp is NULL. Finish with cannl__tmp_commit, or remove(*tmp) + free. */
cannl_status cannl__array_write_tmp(const char *path, cannl__out_format fmt, cannl_dtype dtype, int32_t ndims,
                                    const int64_t *shape, const void *data, char **tmp, cannl_error *err);

/* checkpoint.c -------------------------------------------------------- */

/* The i-th tensor of an open checkpoint (header order): its name, dtype (CANNL_F64 for those
 * that cannot be read), rank (may exceed CANNL_MAX_DIMS: then only the first dims are kept)
 * and shape into *out, data NULL. Returns 0 past the last. (For the fuzzing harness.) */
int cannl__checkpoint_tensor(const cannl_checkpoint *ck, size_t i, cannl_tensor *out);

/* name_map.c ---------------------------------------------------------- */

/* --name-map FILE: `cannl_name = file.key` per line (`#` comments, blank lines); a param's
 * name carries its optimiser state's with it ("w1.exp_avg" -> "fc1.weight.exp_avg"). */
typedef struct cannl__name_map cannl__name_map;
/* The longest name a map may hold, in bytes. */
#define CANNL__NAME_MAP_MAX 255
/* Read FILE: every line checked on its own (UTF-8 without control characters, the syntax,
 * nothing mapped twice, onto '__metadata__' or onto an optimiser-state name; errors
 * "FILE:LINE: ..."). Free with cannl__name_map_free (NULL ignored). */
cannl_status cannl__name_map_load(const char *path, cannl__name_map **out, cannl_error *err);
void cannl__name_map_free(cannl__name_map *map);
/* Mapping i (0-based, in file order): *from, *to and the line it is on. Returns 0 past the last.
 * (For the fuzzing harness.) */
int cannl__name_map_entry(const cannl__name_map *map, size_t i, const char **from, const char **to, int *line);
/* The name the tensor `name` has in files: its mapping, the mapping of the longest mapped
 * prefix "<from>." with the rest appended (written into buf), or name itself (map NULL too). */
const char *cannl__name_map_apply(const cannl__name_map *map, const char *name, char *buf, size_t cap);
/* "[2, 2, 32, 128]" into buf (cut to cap). */
void cannl__format_shape(char *buf, size_t cap, int32_t nd, const int64_t *shape);
/* 1 and the shape tensor `name` (a param or its optimiser state) has in the files when its
   mapping gives one (`w_q.0 = q.weight [128, 128]`), with the mapping's line; else 0. */
int cannl__name_map_shape(const cannl__name_map *map, const char *name, int32_t *ndims, int64_t *shape, int *line);
/* The map against a model whose state tensors are names[0..n): every name mapped is one of
 * them, none is mapped onto another's name, and no two get one name in files. Errors
 * "PATH:LINE: ..." name `model` and list `params` (its param names, for an unknown one). */
cannl_status cannl__name_map_check_names(const cannl__name_map *map, const char *path, const char *model,
                                         const char *const *names, size_t n, const char *params, cannl_error *err);

/* model_io.c ---------------------------------------------------------- */

/* cannl_model_save / cannl_model_load with the tensors under the names map gives them (map
 * NULL: their own). A missing tensor's error lists the names the file holds. */
cannl_status cannl__model_save_named(const cannl_model_api *api, void *m, const char *path, const cannl_meta *extra,
                                     size_t nextra, const cannl__name_map *map, cannl_error *err);
cannl_status cannl__model_load_named(const cannl_model_api *api, void *m, const char *path, cannl_load_what what,
                                     const cannl__name_map *map, cannl_checkpoint **keep_open_or_null,
                                     cannl_error *err);

/* CANNL_LOAD_PARAMS of the params the file holds (under the names map gives them): loaded[i]
 * (num_params entries) says whether param i was read; the others keep their values (the
 * training program's --init-partial: the spec's init). A param the file holds with another
 * shape or a non-finite value is an error as for a full load, and so is a file holding none of
 * them; all-or-nothing likewise. */
cannl_status cannl__model_load_partial(const cannl_model_api *api, void *m, const char *path,
                                       const cannl__name_map *map, unsigned char *loaded, cannl_error *err);

/* cannl__name_map_check_names against the model's state tensors (errors name map_path). */
cannl_status cannl__name_map_check(const cannl_model_api *api, void *m, const cannl__name_map *map, const char *map_path,
                                   cannl_error *err);

/* metrics_log.c ------------------------------------------------------- */

/* Before a run resumed at `step` appends to the metrics log at path: cut off the records the
 * earlier run wrote after that step (it went on past its last checkpoint, then crashed or
 * diverged), so every step appears once. A record's step is its "step", or for a record of an
 * epoch's end (no "step") "epoch" * steps_per_epoch. A last line without its newline goes too.
 * A missing file is fine; a line that is no such record is an error (nothing is cut).
 * *removed: the number of lines cut. */
cannl_status cannl__metrics_trim(const char *path, int64_t step, int64_t steps_per_epoch, int64_t *removed,
                                 cannl_error *err);
/* Whether the log at path holds a record of step `step` (its "step") with the key `key`
 * (*found; a missing file holds none), for a run resumed at its end: its final validation or
 * test record is not written a second time. */
cannl_status cannl__metrics_has(const char *path, int64_t step, const char *key, int *found, cannl_error *err);

/* same_file.c --------------------------------------------------------- */

/* a and b name one file: the same inode when both exist, the same resolved name when neither
 * does (a file the program will create); 0 when only one exists. */
int cannl__same_file(const char *a, const char *b);

/* The data binding PATH[:header][:COLUMNS] reads the file out names. */
int cannl__reads_file(const char *binding, const char *out);

/* tmp_file.c ---------------------------------------------------------- */

/* Whether path may be replaced by a file renamed over it: 1 when nothing is there (or lstat
 * fails otherwise: the write reports it) or it is a regular file this user (euid) owns; else
 * 0 and why ("is a FIFO", "is a symbolic link", ...) in why[0..cap). Links are not followed:
 * as root, a checkpoint or output path naming /dev/null would replace the device. */
int cannl__tmp_replaceable(const char *path, char *why, size_t cap);

/* Create PATH.tmp.<pid> (or .1, .2, ... after it) exclusively for writing: *f the open file,
 * *tmp its malloc'd name (both NULL on failure). Fails when PATH is not replaceable
 * (cannl__tmp_replaceable), as cannl__tmp_commit does. */
cannl_status cannl__tmp_create(const char *path, FILE **f, char **tmp, cannl_error *err);

/* Remove the temporary files of path (PATH.tmp.<pid>[.<n>]) that a killed process left: those
 * whose pid is not running, or is this process's (call it before this process writes path),
 * and only regular files this user owns.
 * Returns how many were removed; best effort, errors are ignored. */
int cannl__tmp_clean_stale(const char *path);

/* Rename tmp over path (removing tmp if that fails), sync the directory, free tmp. */
cannl_status cannl__tmp_commit(char *tmp, const char *path, cannl_error *err);

/* Make path a second name (hard link) of the file `from`, atomically: a link PATH.tmp.<pid>
 * renamed over path (replaceable as for cannl__tmp_create). When the file system makes no
 * hard links, CANNL_E_IO with *no_link set and nothing changed (the caller writes a copy). */
cannl_status cannl__tmp_link(const char *from, const char *path, int *no_link, cannl_error *err);

/* cannl__tmp_clean_stale for the step files of a checkpoint path (PATH.step<N>.tmp.<pid>[.<n>],
 * the training program's --keep-last). */
int cannl__tmp_clean_stale_steps(const char *path);

#endif /* CANNL_RT_INTERNAL_H */

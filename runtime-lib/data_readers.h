/* data_readers.h - the entry points of the three file readers (data_idx.c, data_npy.c,
 * data_csv.c), which data.c dispatches to after detecting a file's format. Each fills *ds (its
 * storage from cannl__dataset_init) or returns an error naming the file. Not installed. */
#ifndef CANNL_DATA_READERS_H
#define CANNL_DATA_READERS_H

#include "cannl_rt.h"

#include <stdint.h>

cannl_status cannl__load_idx(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl_error *err);
cannl_status cannl__load_npy(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl_error *err);
/* CSV: a header row is detected (none of its fields is a number), or declared (PATH:header).
 * cols[0..ncols): the 0-based columns to take, in that order (NULL: all of them). */
typedef enum cannl__csv_header { CANNL__CSV_AUTO_HEADER = 0, CANNL__CSV_HEADER } cannl__csv_header;
cannl_status cannl__load_csv(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl__csv_header header,
                             const int64_t *cols, int64_t ncols, cannl_error *err);

#endif /* CANNL_DATA_READERS_H */

/* tmp_file.c — writing a file atomically: the bytes go to a temporary file beside it, created
 * exclusively, which is renamed over it when complete (checkpoints, the inference program's
 * outputs). A reader sees the old file or the new one, never a part. */
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cannl_status cannl__tmp_create(const char *path, FILE **f_out, char **tmp_out, cannl_error *err) {
    *f_out = NULL;
    *tmp_out = NULL;
    /* PATH.tmp.<pid>, or .1, .2, ... after it when that exists (a stale file, another thread,
       or a second output whose path names the same file differently). */
    const size_t cap = strlen(path) + 64;
    char *tmp = malloc(cap);
    if (!tmp) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    FILE *f = NULL;
    for (int attempt = 0; attempt < 100 && !f; attempt++) {
        if (attempt == 0)
            snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
        else
            snprintf(tmp, cap, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        errno = 0;
        f = fopen(tmp, "wbx");
        if (!f && errno != EEXIST) break;
    }
    if (!f) {
        char eb[128];
        int e = errno;
        cannl_status st = cannl__fail(err, CANNL_E_IO, path, "cannot create temporary file %s: %s", tmp,
                                      cannl__strerror(e, eb, sizeof eb));
        free(tmp);
        return st;
    }
    *f_out = f;
    *tmp_out = tmp;
    return CANNL_OK;
}

/* Best effort: make the rename itself durable. */
static void sync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) {
        dir = malloc(2);
        if (dir) memcpy(dir, ".", 2);
    } else {
        size_t len = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(len + 1);
        if (dir) {
            memcpy(dir, path, len);
            dir[len] = '\0';
        }
    }
    if (!dir) return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

cannl_status cannl__tmp_commit(char *tmp, const char *path, cannl_error *err) {
    cannl_status st = CANNL_OK;
    if (rename(tmp, path) != 0) {
        char eb[128];
        int e = errno;
        remove(tmp);
        st = cannl__fail(err, CANNL_E_IO, path, "cannot rename %s over it: %s", tmp, cannl__strerror(e, eb, sizeof eb));
    } else {
        sync_dir_of(path);
    }
    free(tmp);
    return st;
}

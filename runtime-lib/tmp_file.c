/* tmp_file.c — writing a file atomically: the bytes go to a temporary file beside it, created
 * exclusively, which is renamed over it when complete (checkpoints, the inference program's
 * outputs). A reader sees the old file or the new one, never a part. A process killed while
 * writing leaves its temporary behind; the next program writing the same file removes it
 * (cannl__tmp_clean_stale). Only a regular file of this user's is ever replaced or removed:
 * never a device, a FIFO, a socket, a directory or a symbolic link. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cannl__tmp_replaceable(const char *path, char *why, size_t cap) {
    struct stat sb;
    const char *what = NULL;
    if (lstat(path, &sb) != 0) return 1;
    if (S_ISLNK(sb.st_mode)) what = "is a symbolic link";
    else if (S_ISDIR(sb.st_mode)) what = "is a directory";
    else if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) what = "is a device";
    else if (S_ISFIFO(sb.st_mode)) what = "is a FIFO";
    else if (S_ISSOCK(sb.st_mode)) what = "is a socket";
    else if (!S_ISREG(sb.st_mode)) what = "is not a regular file";
    else if (sb.st_uid != geteuid()) what = "belongs to another user";
    if (!what) return 1;
    snprintf(why, cap, "%s", what);
    return 0;
}

/* An error when path is not replaceable. */
static cannl_status check_replaceable(const char *path, cannl_error *err) {
    char why[64];
    if (cannl__tmp_replaceable(path, why, sizeof why)) return CANNL_OK;
    return cannl__fail(err, CANNL_E_IO, path, "not replaced: it %s (cannl replaces only regular files you own)", why);
}

cannl_status cannl__tmp_create(const char *path, FILE **f_out, char **tmp_out, cannl_error *err) {
    *f_out = NULL;
    *tmp_out = NULL;
    cannl_status st = check_replaceable(path, err);
    if (st != CANNL_OK) return st;
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
    cannl_status st = check_replaceable(path, err); /* again: what appeared meanwhile is not replaced either */
    if (st != CANNL_OK) {
        remove(tmp);
    } else if (rename(tmp, path) != 0) {
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

/* The pid of a temporary file's name "<base>.tmp.<pid>" or "<base>.tmp.<pid>.<n>" (steps: of a
   step file's, "<base>.step<N>.tmp.<pid>[.<n>]"), or 0. */
static long tmp_pid(const char *name, const char *base, size_t base_len, int steps) {
    if (strncmp(name, base, base_len) != 0) return 0;
    name += base_len;
    if (steps) {
        if (strncmp(name, ".step", 5) != 0 || name[5] < '0' || name[5] > '9') return 0;
        for (name += 5; *name >= '0' && *name <= '9'; name++) continue;
    }
    if (strncmp(name, ".tmp.", 5) != 0) return 0;
    const char *p = name + 5;
    long pid = 0;
    if (*p < '1' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (pid > 99999999) return 0; /* no pid is that large */
        pid = pid * 10 + (*p - '0');
    }
    if (*p == '.') {
        if (p[1] < '1' || p[1] > '9') return 0;
        for (p++; *p >= '0' && *p <= '9'; p++) continue;
    }
    return *p ? 0 : pid;
}

static int clean_stale(const char *path, int steps) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const size_t base_len = strlen(base);
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0; /* with its slash */
    if (!base_len) return 0;
    char *dir = malloc(dir_len + 2);
    if (!dir) return 0;
    if (dir_len) memcpy(dir, path, dir_len);
    else dir[dir_len++] = '.';
    dir[dir_len] = '\0';
    DIR *d = opendir(dir);
    int removed = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const long pid = tmp_pid(e->d_name, base, base_len, steps);
        /* Only a dead writer's file (or one named after this process, which has written
           nothing yet: a pid reused in a new container, say). A live process may be
           writing its own. */
        if (!pid || (pid != (long)getpid() && !(kill((pid_t)pid, 0) != 0 && errno == ESRCH))) continue;
        const size_t len = dir_len + strlen(e->d_name) + 2;
        char *full = malloc(len);
        if (!full) break;
        snprintf(full, len, "%s%s%s", dir, slash ? "" : "/", e->d_name);
        struct stat sb;
        if (lstat(full, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() && unlink(full) == 0) removed++;
        free(full);
    }
    if (d) closedir(d);
    free(dir);
    return removed;
}

int cannl__tmp_clean_stale(const char *path) { return clean_stale(path, 0); }

int cannl__tmp_clean_stale_steps(const char *path) { return clean_stale(path, 1); }

cannl_status cannl__tmp_link(const char *from, const char *path, int *no_link, cannl_error *err) {
    *no_link = 0;
    cannl_status st = check_replaceable(path, err);
    if (st != CANNL_OK) return st;
    struct stat a, b;
    if (stat(from, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return CANNL_OK; /* linked already (a rename of one name of a file over another does nothing) */
    const size_t cap = strlen(path) + 64;
    char *tmp = malloc(cap);
    if (!tmp) return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory");
    int e = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt == 0)
            snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
        else
            snprintf(tmp, cap, "%s.tmp.%ld.%d", path, (long)getpid(), attempt);
        e = link(from, tmp) == 0 ? 0 : errno;
        if (e != EEXIST) break;
    }
    if (e) {
        char eb[128];
        *no_link = e != EEXIST;
        st = cannl__fail(err, CANNL_E_IO, path, "cannot link %s to %s: %s", tmp, from, cannl__strerror(e, eb, sizeof eb));
        free(tmp);
        return st;
    }
    return cannl__tmp_commit(tmp, path, err);
}

/* same_file.c - whether an output path names a file the program reads (a
 * checkpoint or log written over the training data, the weights or each other). */
#define _XOPEN_SOURCE 700 /* realpath */

#include "rt_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The canonical name of a path whose file may not exist yet: its directory resolved
   (realpath), then its last component. 0 when the directory cannot be resolved. */
static int canonical(const char *p, char *out, size_t cap) {
    const char *slash = strrchr(p, '/');
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    char *real = realpath(dir, NULL);
    if (!real) return 0;
    snprintf(out, cap, "%s/%s", real, slash ? slash + 1 : p);
    free(real);
    return 1;
}

int cannl__same_file(const char *a, const char *b) {
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return 0;
    char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    if (canonical(a, ca, sizeof ca) && canonical(b, cb, sizeof cb)) return strcmp(ca, cb) == 0;
    return strcmp(a, b) == 0;
}

int cannl__reads_file(const char *binding, const char *out) {
    if (cannl__same_file(binding, out)) return 1;
    /* PATH[:header][:COLUMNS]: the file is PATH when the whole string names none (data.c) */
    struct stat sb;
    if (stat(binding, &sb) == 0) return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", binding);
    for (int k = 0; k < 2; k++) {
        char *colon = strrchr(path, ':');
        if (!colon || colon == path) break;
        *colon = '\0';
        if (cannl__same_file(path, out)) return 1;
    }
    return 0;
}

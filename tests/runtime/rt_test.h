/* rt_test.h - a few macros and file helpers for the runtime tests (each test
 * program includes this once; no test framework needed). */
#ifndef CANNL_RT_TEST_H
#define CANNL_RT_TEST_H

#include "cannl_rt.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rt_failures = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            rt_failures++;                                                            \
        }                                                                             \
    } while (0)

/* expr must return CANNL_OK; prints err.msg otherwise (needs a local `err`). */
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        err.msg[0] = '\0';                                                                      \
        cannl_status st_ = (expr);                                                              \
        if (st_ != CANNL_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #expr,           \
                    cannl_status_str(st_), err.msg);                                            \
            rt_failures++;                                                                      \
        }                                                                                       \
    } while (0)

/* expr must fail with `status` and an err.msg containing both substrings. */
#define CHECK_ERR(expr, status, sub1, sub2)                                                     \
    do {                                                                                        \
        err.msg[0] = '\0';                                                                      \
        cannl_status st_ = (expr);                                                              \
        if (st_ != (status) || !strstr(err.msg, (sub1)) || !strstr(err.msg, (sub2))) {          \
            fprintf(stderr, "%s:%d: %s: expected %s with \"%s\"/\"%s\", got %s: \"%s\"\n",       \
                    __FILE__, __LINE__, #expr, cannl_status_str(status), (sub1), (sub2),        \
                    cannl_status_str(st_), err.msg);                                            \
            rt_failures++;                                                                      \
        } else if (getenv("RT_VERBOSE")) {                                                      \
            printf("  ok: %s\n", err.msg);                                                      \
        }                                                                                       \
    } while (0)

static inline int rt_finish(const char *name) {
    if (rt_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, rt_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* dir/name into a static-size buffer (tests use short paths). */
static inline const char *rt_path(char *buf, size_t cap, const char *dir, const char *name) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(2);
    }
    return buf;
}

/* mkdir -p dir, then delete the regular files directly inside it. */
static inline int rt_fresh_dir(const char *dir) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[1200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(p);
    }
    closedir(d);
    return 0;
}

static inline int rt_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* Whole file into a malloc'd buffer (NUL-terminated); NULL if unreadable. */
static inline char *rt_read_file(const char *path, size_t *len) {
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static inline int rt_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Number of directory entries whose name contains `needle`. */
static inline int rt_count_matching(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, needle)) n++;
    closedir(d);
    return n;
}

#endif /* CANNL_RT_TEST_H */

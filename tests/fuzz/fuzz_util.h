/* fuzz_util.h - what the runtime's fuzzing harnesses share: the input written to a scratch
 * file (the readers take paths), and a check that aborts, so that the fuzzer reports a broken
 * invariant as a crash. */
#ifndef CANNL_FUZZ_UTIL_H
#define CANNL_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* data[0..size) into $TMPDIR (or /dev/shm, /tmp)/cannl-fuzz-<pid><suffix>; returns the path
 * (a static buffer; the same one on every call of a process). */
static inline const char *fuzz_write(const uint8_t *data, size_t size, const char *suffix) {
    static char path[512];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/cannl-fuzz-%ld%s", dir, (long)getpid(), suffix);
    }
    FILE *f = fopen(path, "wb");
    FUZZ_ASSERT(f != NULL);
    FUZZ_ASSERT(size == 0 || fwrite(data, 1, size, f) == size);
    FUZZ_ASSERT(fclose(f) == 0);
    return path;
}

/* A failure's message names the file it is about. */
static inline void fuzz_check_message(const char *msg, const char *path) {
    FUZZ_ASSERT(strstr(msg, path) != NULL);
    FUZZ_ASSERT(strchr(msg, '\n') == NULL);
}

#endif

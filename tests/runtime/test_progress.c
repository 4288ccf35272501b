/* test_progress.c - progress line formatting, plain output to a file, and
 * the rewritten line on a pseudo-terminal (when one can be opened). */
#define _XOPEN_SOURCE 600 /* posix_openpt, grantpt, unlockpt, ptsname */
#include "rt_test.h"

#include <fcntl.h>
#include <poll.h>
#include <math.h>

static void expect_line(const cannl_progress *p, const char *want) {
    char buf[256];
    size_t n = cannl_progress_format(buf, sizeof buf, p);
    if (strcmp(buf, want) != 0 || n != strlen(want)) {
        fprintf(stderr, "format: got \"%s\" (%zu), want \"%s\"\n", buf, n, want);
        rt_failures++;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_progress WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);

    cannl_progress p = {2, 10, 150, 469, 0.4123, 1520.26, 187.0};
    expect_line(&p, "epoch 2/10  step 150/469  loss 0.4123  1520.3 ex/s  ETA 3m07s");
    p.eta_s = 3723.4;
    expect_line(&p, "epoch 2/10  step 150/469  loss 0.4123  1520.3 ex/s  ETA 1h02m03s");
    p.eta_s = 9.6;
    expect_line(&p, "epoch 2/10  step 150/469  loss 0.4123  1520.3 ex/s  ETA 10s");
    cannl_progress q = {1, 0, 7, 0, NAN, -1, -1};
    expect_line(&q, "epoch 1  step 7  loss nan  ETA --");
    q.loss = 1.5e-05;
    q.eta_s = NAN;
    q.examples_per_s = NAN;
    expect_line(&q, "epoch 1  step 7  loss 1.5e-05  ETA --");
    q.eta_s = INFINITY;
    q.loss = 12345.678;
    expect_line(&q, "epoch 1  step 7  loss 1.235e+04  ETA --");
    /* No epochs (a token-stream run): the epoch is left out. */
    cannl_progress r = {0, 1, 40, 500, 2.25, 300.0, 12.0};
    expect_line(&r, "step 40/500  loss 2.25  300.0 ex/s  ETA 12s");

    /* Small buffers: truncated but terminated; the full length is returned. */
    char small[12];
    size_t full = cannl_progress_format(small, sizeof small, &p);
    CHECK(full == strlen("epoch 2/10  step 150/469  loss 0.4123  1520.3 ex/s  ETA 10s"));
    CHECK(strcmp(small, "epoch 2/10 ") == 0);
    CHECK(cannl_progress_format(NULL, 0, &p) == full);
    CHECK(cannl_progress_format(small, sizeof small, NULL) == 0 && small[0] == '\0');

    /* Not a terminal: one plain line per call, finish adds nothing. */
    char path[1024];
    FILE *f = fopen(rt_path(path, sizeof path, dir, "progress.txt"), "w+");
    CHECK(f != NULL);
    if (f) {
        p.eta_s = 187.0;
        cannl_progress_print(f, &p);
        p.step = 151;
        cannl_progress_print(f, &p);
        cannl_progress_finish(f);
        fclose(f);
        char *text = rt_read_file(path, NULL);
        CHECK(text && strcmp(text,
                             "epoch 2/10  step 150/469  loss 0.4123  1520.3 ex/s  ETA 3m07s\n"
                             "epoch 2/10  step 151/469  loss 0.4123  1520.3 ex/s  ETA 3m07s\n") == 0);
        free(text);
    }

    /* A terminal: '\r' + line + erase-to-end, and a newline at the end. */
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0 && ptsname(master)) {
        FILE *tty = fopen(ptsname(master), "w");
        CHECK(tty != NULL);
        if (tty) {
            cannl_progress_print(tty, &p);
            cannl_progress_finish(tty);
            fclose(tty);
            /* A pty may hand the bytes over in several reads: gather until the
               newline arrives or nothing more comes within a second. */
            char buf[512];
            ssize_t n = 0;
            while (n < (ssize_t)sizeof buf - 1) {
                struct pollfd pfd = {.fd = master, .events = POLLIN};
                if (poll(&pfd, 1, 1000) <= 0) break;
                ssize_t got = read(master, buf + n, sizeof buf - 1 - (size_t)n);
                if (got <= 0) break;
                n += got;
                if (memchr(buf, '\n', (size_t)n)) break;
            }
            CHECK(n > 0);
            if (n > 0) {
                buf[n] = '\0';
                /* The pty may turn '\n' into "\r\n". */
                CHECK(strncmp(buf, "\repoch 2/10  step 151/469", 25) == 0);
                CHECK(strstr(buf, "ETA 3m07s\033[K") != NULL);
                CHECK(strchr(buf, '\n') != NULL);
            }
        }
    } else {
        printf("no pseudo-terminal available: skipping the terminal case\n");
    }
    if (master >= 0) close(master);
    return rt_finish("test_progress");
}

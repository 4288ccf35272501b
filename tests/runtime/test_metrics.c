/* test_metrics.c - JSONL metrics log: exact line format, integers, shortest
 * round-trip doubles, null for non-finite, key escaping, append/truncate. */
#include "rt_test.h"

#include <math.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_metrics WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    char path[1024];
    rt_path(path, sizeof path, dir, "metrics.jsonl");

    cannl_metrics_log *log = NULL;
    CHECK_OK(cannl_metrics_open(path, 0, &log, &err));
    const cannl_metric m1[] = {CANNL_METRIC_INT("epoch", 1), CANNL_METRIC_INT("step", 469), CANNL_METRIC("loss", 0.1),
                               CANNL_METRIC("acc", 0.8125), CANNL_METRIC("lr", 1e-3)};
    CHECK_OK(cannl_metrics_write(log, m1, 5, &err));
    /* The line is flushed right away. */
    char *text = rt_read_file(path, NULL);
    CHECK(text && strcmp(text, "{\"epoch\":1,\"step\":469,\"loss\":0.1,\"acc\":0.8125,\"lr\":0.001}\n") == 0);
    free(text);
    const cannl_metric m2[] = {CANNL_METRIC("nan", NAN), CANNL_METRIC("inf", -INFINITY),
                               CANNL_METRIC("third", 1.0 / 3.0), CANNL_METRIC("k\"e\\y\n", -2.5),
                               CANNL_METRIC_INT("big", 9007199254740992.0), CANNL_METRIC("whole", 3.0)};
    CHECK_OK(cannl_metrics_write(log, m2, 6, &err));
    CHECK_OK(cannl_metrics_write(log, NULL, 0, &err));
    CHECK_OK(cannl_metrics_close(log, &err));
    text = rt_read_file(path, NULL);
    CHECK(text && strcmp(text,
                         "{\"epoch\":1,\"step\":469,\"loss\":0.1,\"acc\":0.8125,\"lr\":0.001}\n"
                         "{\"nan\":null,\"inf\":null,\"third\":0.3333333333333333,\"k\\\"e\\\\y\\n\":-2.5,"
                         "\"big\":9007199254740992,\"whole\":3}\n"
                         "{}\n") == 0);
    if (text) printf("%s", text);
    free(text);

    /* Append keeps the old lines; truncate drops them. */
    CHECK_OK(cannl_metrics_open(path, 1, &log, &err));
    const cannl_metric m3[] = {CANNL_METRIC_INT("epoch", 2)};
    CHECK_OK(cannl_metrics_write(log, m3, 1, &err));
    CHECK_OK(cannl_metrics_close(log, &err));
    text = rt_read_file(path, NULL);
    CHECK(text && strstr(text, "{}\n{\"epoch\":2}\n") != NULL && strncmp(text, "{\"epoch\":1,", 11) == 0);
    free(text);
    CHECK_OK(cannl_metrics_open(path, 0, &log, &err));
    CHECK_OK(cannl_metrics_write(log, m3, 1, &err));
    CHECK_OK(cannl_metrics_close(log, &err));
    text = rt_read_file(path, NULL);
    CHECK(text && strcmp(text, "{\"epoch\":2}\n") == 0);
    free(text);

    /* Errors. */
    char bad[1024];
    rt_path(bad, sizeof bad, dir, "no/such/dir/m.jsonl");
    CHECK_ERR(cannl_metrics_open(bad, 0, &log, &err), CANNL_E_IO, "no/such/dir/m.jsonl: cannot open metrics log",
              "No such file");
    CHECK(log == NULL);
    CHECK_OK(cannl_metrics_open(path, 1, &log, &err));
    const cannl_metric nokey[] = {{NULL, 1.0, 0}};
    CHECK_ERR(cannl_metrics_write(log, nokey, 1, &err), CANNL_E_ARG, "metrics.jsonl:", "NULL key");
    CHECK_OK(cannl_metrics_close(log, &err));
    CHECK(cannl_metrics_close(NULL, &err) == CANNL_OK);
    /* A full device reports the failed write. */
    if (rt_exists("/dev/full")) {
        CHECK_OK(cannl_metrics_open("/dev/full", 1, &log, &err));
        CHECK_ERR(cannl_metrics_write(log, m1, 5, &err), CANNL_E_IO, "/dev/full: cannot write metrics", "");
        cannl_metrics_close(log, NULL);
    }
    return rt_finish("test_metrics");
}

/* test_cuda_rt.c - the CUDA part of the runtime (runtime-lib/cuda/cannl_cuda.h).
 *   test_cuda_rt cpu    CPU events: waiting threads wake when another thread signals, queries,
 *                       a CPU event as a stream dependency (host wait), misuse reported; the
 *                       message of a failed CUDA call (file:line, the call, CUDA's text and
 *                       name). Needs no GPU.
 *   test_cuda_rt gpu    device and pinned buffers, streams and CUDA events on the device: copies
 *                       ordered across two streams by an event, round trip of the data. Exits
 *                       77 (skipped) without a CUDA device.
 *   test_cuda_rt probe  exits 0 when a CUDA device can be used, else 77 (tests/gpu/gpu_run.sh)
 */
#define _POSIX_C_SOURCE 200809L
#include "cannl_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)
#define CHECK_OK(expr)                                                                         \
    do {                                                                                       \
        cannl_status st_ = (expr);                                                             \
        if (st_ != CANNL_OK) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, err.msg);     \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct {
    cannl_event *e;
    volatile int work_done;
} job;

/* The "work" the event marks, then the signal. */
static void *worker(void *arg) {
    job *j = arg;
    sleep_ms(50);
    j->work_done = 1;
    cannl_error err;
    if (cannl_event_signal(j->e, &err) != CANNL_OK) fprintf(stderr, "signal: %s\n", err.msg);
    return NULL;
}

static void *waiter(void *arg) {
    job *j = arg;
    cannl_error err;
    if (cannl_event_sync(j->e, &err) != CANNL_OK) return (void *)1;
    return j->work_done ? NULL : (void *)1; /* woken only after the work */
}

static int test_cpu(void) {
    cannl_error err;
    cannl_event *e = NULL;
    CHECK_OK(cannl_event_create(CANNL_EVENT_CPU, &e, &err));
    if (!e) return 1;
    CHECK(cannl_event_kind_of(e) == CANNL_EVENT_CPU);
    CHECK(cannl_event_query(e, &err) == 1); /* complete until recorded */
    CHECK_OK(cannl_event_sync(e, &err));

    for (int round = 0; round < 3; round++) { /* an event is reused */
        job j = {e, 0};
        CHECK_OK(cannl_event_record(e, NULL, &err));
        CHECK(cannl_event_query(e, &err) == 0);
        pthread_t w, t1, t2;
        pthread_create(&t1, NULL, waiter, &j);
        pthread_create(&t2, NULL, waiter, &j);
        pthread_create(&w, NULL, worker, &j);
        CHECK_OK(cannl_event_sync(e, &err));
        CHECK(j.work_done == 1);
        void *r1, *r2;
        pthread_join(t1, &r1);
        pthread_join(t2, &r2);
        pthread_join(w, NULL);
        CHECK(r1 == NULL && r2 == NULL);
        CHECK(cannl_event_query(e, &err) == 1);
    }

    /* A CPU event as a stream dependency: the host waits (no stream is touched). */
    job j = {e, 0};
    CHECK_OK(cannl_event_record(e, NULL, &err));
    pthread_t w;
    pthread_create(&w, NULL, worker, &j);
    CHECK_OK(cannl_stream_wait_event(NULL, e, &err));
    CHECK(j.work_done == 1);
    pthread_join(w, NULL);

    /* Misuse: CPU events are not recorded on streams; only CPU events are signalled. */
    CHECK(cannl_event_record(e, (cannl_stream *)&j, &err) == CANNL_E_ARG);
    CHECK(strstr(err.msg, "CPU event") != NULL);
    cannl_event_destroy(e);
    cannl_event_destroy(NULL);

    /* The message of a failed CUDA call. */
    CHECK(cannl_cuda_check(cudaSuccess, "cudaFree(p)", "x.c", 3, &err) == CANNL_OK);
    CHECK(cannl_cuda_check(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", "model.cu", 212, &err) ==
          CANNL_E_DEVICE);
    CHECK(strncmp(err.msg, "model.cu:212: cudaMalloc(&p, bytes): ", 37) == 0);
    CHECK(strstr(err.msg, "cudaErrorMemoryAllocation") != NULL);
    CHECK(strcmp(cannl_status_str(CANNL_E_DEVICE), "device error") == 0);
    cudaError_t bad = cudaErrorInvalidValue;
    CHECK(CANNL_CUDA_CHECK(bad, &err) == CANNL_E_DEVICE);
    CHECK(strstr(err.msg, "test_cuda_rt.c:") != NULL && strstr(err.msg, ": bad: ") != NULL);
    return 0;
}

static int test_gpu(void) {
    if (cannl_cuda_device_count() == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    cannl_error err;
    enum { N = 1 << 20 };
    float *host = cannl_pinned_alloc(N * sizeof(float), &err);
    float *back = cannl_pinned_alloc(N * sizeof(float), &err);
    float *dev = cannl_device_alloc(N * sizeof(float), &err);
    float *dev2 = cannl_device_alloc(N * sizeof(float), &err);
    CHECK(host && back && dev && dev2);
    if (!host || !back || !dev || !dev2) return 1;
    CHECK(host[0] == 0 && host[N - 1] == 0);
    for (int i = 0; i < N; i++) host[i] = (float)i;
    cannl_stream *copy = NULL, *compute = NULL;
    cannl_event *up = NULL;
    CHECK_OK(cannl_stream_create(&copy, &err));
    CHECK_OK(cannl_stream_create(&compute, &err));
    CHECK_OK(cannl_event_create(CANNL_EVENT_CUDA, &up, &err));
    /* upload on one stream; the other copies device to device after the event, then back */
    CHECK_OK(cannl_stream_copy(copy, dev, host, N * sizeof(float), &err));
    CHECK_OK(cannl_event_record(up, copy, &err));
    CHECK_OK(cannl_stream_wait_event(compute, up, &err));
    CHECK_OK(cannl_stream_copy(compute, dev2, dev, N * sizeof(float), &err));
    CHECK_OK(cannl_stream_copy(compute, back, dev2, N * sizeof(float), &err));
    CHECK_OK(cannl_stream_sync(compute, &err));
    CHECK(cannl_event_query(up, &err) == 1);
    CHECK_OK(cannl_event_sync(up, &err));
    CHECK(memcmp(host, back, N * sizeof(float)) == 0);
    /* an impossible allocation fails with a message naming the call */
    CHECK(cannl_device_alloc((size_t)1 << 62, &err) == NULL);
    CHECK(strstr(err.msg, "cudaMalloc") != NULL);
    cannl_event_destroy(up);
    cannl_stream_destroy(copy);
    cannl_stream_destroy(compute);
    cannl_device_free(dev);
    cannl_device_free(dev2);
    cannl_pinned_free(host);
    cannl_pinned_free(back);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "probe") == 0) return cannl_cuda_device_count() > 0 ? 0 : 77;
    if (argc != 2 || (strcmp(argv[1], "cpu") != 0 && strcmp(argv[1], "gpu") != 0)) {
        fprintf(stderr, "usage: test_cuda_rt cpu|gpu|probe\n");
        return 2;
    }
    int rc = strcmp(argv[1], "cpu") == 0 ? test_cpu() : test_gpu();
    if (rc == 77) return 77;
    if (rc || failures) {
        fprintf(stderr, "test_cuda_rt %s: %d failures\n", argv[1], failures + (rc != 0));
        return 1;
    }
    printf("test_cuda_rt %s: ok\n", argv[1]);
    return 0;
}

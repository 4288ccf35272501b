/* kprof.c — where a CUDA program's device time goes, kernel by kernel: a CUPTI injection library
 * (scripts/gpu-check.sh, part `profile`). The CUDA driver loads it into any program, the statically
 * linked cudart ones included, when CUDA_INJECTION64_PATH names it; at exit it writes to KPROF_OUT
 * (default stderr) one row per kernel name (and one per kind of copy and fill): launches, total
 * and mean device time, share of the whole, heaviest first, and the device's busy time against the
 * span from the first record's start to the last one's end.
 *
 *   cc -O2 -shared -fPIC kprof.c -o libkprof.so -I$CUDA/include -L$CUDA/lib -lcupti
 *   CUDA_INJECTION64_PATH=$PWD/libkprof.so KPROF_OUT=prof.txt ./program ...
 *
 * Names stay mangled (c++filt reads them). Not a tracer: no timeline, only sums. */
#define _POSIX_C_SOURCE 200809L
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROWS = 4096, BUFFER_BYTES = 16 << 20 };

struct row {
    char *name;
    uint64_t launches, ns;
};

static struct row rows[MAX_ROWS];
static size_t n_rows;
static uint64_t first_start = UINT64_MAX, last_end, busy_ns, lost_records;

static void add(const char *name, uint64_t start, uint64_t end) {
    if (start < first_start) first_start = start;
    if (end > last_end) last_end = end;
    busy_ns += end - start;
    for (size_t i = 0; i < n_rows; ++i)
        if (strcmp(rows[i].name, name) == 0) {
            rows[i].launches++;
            rows[i].ns += end - start;
            return;
        }
    if (n_rows == MAX_ROWS) {
        lost_records++;
        return;
    }
    rows[n_rows].name = strdup(name);
    rows[n_rows].launches = 1;
    rows[n_rows].ns = end - start;
    n_rows++;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static const char *copy_kind(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy host to device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy device to host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy device to device]";
    default: return "[memcpy other]";
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
            add(k->name, k->start, k->end);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *c = (const CUpti_ActivityMemcpy6 *)record;
            add(copy_kind(c->copyKind), c->start, c->end);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *s = (const CUpti_ActivityMemset4 *)record;
            add("[memset]", s->start, s->end);
        }
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    lost_records += dropped;
    free(buffer);
}

static int by_time(const void *a, const void *b) {
    const struct row *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void report(void) {
    cuptiActivityFlushAll(1);
    const char *path = getenv("KPROF_OUT");
    FILE *f = path && *path ? fopen(path, "w") : stderr;
    if (!f) f = stderr;
    qsort(rows, n_rows, sizeof rows[0], by_time);
    const double span = last_end > first_start ? (double)(last_end - first_start) : 0.0;
    fprintf(f, "kprof: %zu names, device busy %.3f ms of a %.3f ms span (%.1f%%), %llu records lost\n", n_rows,
            busy_ns / 1e6, span / 1e6, span > 0 ? 100.0 * busy_ns / span : 0.0, (unsigned long long)lost_records);
    fprintf(f, "%10s %12s %10s %6s  %s\n", "launches", "total ms", "mean us", "share", "name");
    for (size_t i = 0; i < n_rows; ++i)
        fprintf(f, "%10llu %12.3f %10.2f %5.1f%%  %s\n", (unsigned long long)rows[i].launches, rows[i].ns / 1e6,
                rows[i].ns / 1e3 / (double)rows[i].launches, busy_ns ? 100.0 * rows[i].ns / busy_ns : 0.0,
                rows[i].name);
    if (f != stderr) fclose(f);
}

/* The entry point the CUDA driver calls for CUDA_INJECTION64_PATH. */
int InitializeInjection(void) {
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    atexit(report);
    return 1;
}

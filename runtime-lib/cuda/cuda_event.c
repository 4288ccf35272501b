/* cuda_event.c - events of two kinds behind one interface: CUDA events, completed by the
 * device, and CPU events (a mutex, a condition variable and a pending flag), completed by a
 * host thread. */
#include "cannl_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct cannl_event {
    cannl_event_kind kind;
    cudaEvent_t ev; /* CANNL_EVENT_CUDA */
    int recorded;   /* CANNL_EVENT_CUDA: ever recorded (an unrecorded event is complete) */
    pthread_mutex_t mu; /* CANNL_EVENT_CPU */
    pthread_cond_t cv;
    int pending;
};

static cannl_status fail(cannl_error *err, cannl_status st, const char *msg) {
    if (err) snprintf(err->msg, sizeof err->msg, "%s", msg);
    return st;
}

cannl_status cannl_event_create(cannl_event_kind kind, cannl_event **out, cannl_error *err) {
    *out = NULL;
    cannl_event *e = calloc(1, sizeof *e);
    if (!e) return fail(err, CANNL_E_NOMEM, "out of memory creating an event");
    e->kind = kind;
    if (kind == CANNL_EVENT_CUDA) {
        cannl_status st = CANNL_CUDA_CHECK(cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming), err);
        if (st != CANNL_OK) {
            free(e);
            return st;
        }
    } else if (kind == CANNL_EVENT_CPU) {
        if (pthread_mutex_init(&e->mu, NULL) != 0) {
            free(e);
            return fail(err, CANNL_E_NOMEM, "cannot create the mutex of a CPU event");
        }
        if (pthread_cond_init(&e->cv, NULL) != 0) {
            pthread_mutex_destroy(&e->mu);
            free(e);
            return fail(err, CANNL_E_NOMEM, "cannot create the condition variable of a CPU event");
        }
    } else {
        free(e);
        return fail(err, CANNL_E_ARG, "unknown event kind");
    }
    *out = e;
    return CANNL_OK;
}

void cannl_event_destroy(cannl_event *e) {
    if (!e) return;
    if (e->kind == CANNL_EVENT_CUDA) {
        (void)cudaEventDestroy(e->ev);
    } else {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
    }
    free(e);
}

cannl_event_kind cannl_event_kind_of(const cannl_event *e) { return e->kind; }

cannl_status cannl_event_record(cannl_event *e, cannl_stream *s, cannl_error *err) {
    if (e->kind == CANNL_EVENT_CUDA) {
        if (!s) return fail(err, CANNL_E_ARG, "a CUDA event is recorded on a stream");
        cannl_status st = CANNL_CUDA_CHECK(cudaEventRecord(e->ev, cannl_stream_cuda(s)), err);
        if (st == CANNL_OK) e->recorded = 1;
        return st;
    }
    if (s) return fail(err, CANNL_E_ARG, "a CPU event is not recorded on a stream");
    pthread_mutex_lock(&e->mu);
    e->pending = 1;
    pthread_mutex_unlock(&e->mu);
    return CANNL_OK;
}

cannl_status cannl_event_signal(cannl_event *e, cannl_error *err) {
    if (e->kind != CANNL_EVENT_CPU) return fail(err, CANNL_E_ARG, "only CPU events are signalled by the host");
    pthread_mutex_lock(&e->mu);
    e->pending = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return CANNL_OK;
}

cannl_status cannl_event_sync(cannl_event *e, cannl_error *err) {
    if (e->kind == CANNL_EVENT_CUDA)
        return e->recorded ? CANNL_CUDA_CHECK(cudaEventSynchronize(e->ev), err) : CANNL_OK;
    pthread_mutex_lock(&e->mu);
    while (e->pending) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return CANNL_OK;
}

int cannl_event_query(cannl_event *e, cannl_error *err) {
    if (e->kind == CANNL_EVENT_CUDA) {
        if (!e->recorded) return 1;
        cudaError_t r = cudaEventQuery(e->ev);
        if (r == cudaErrorNotReady) return 0;
        return CANNL_CUDA_CHECK(r, err) == CANNL_OK ? 1 : -1;
    }
    pthread_mutex_lock(&e->mu);
    int done = !e->pending;
    pthread_mutex_unlock(&e->mu);
    return done;
}

cannl_status cannl_stream_wait_event(cannl_stream *s, cannl_event *e, cannl_error *err) {
    if (e->kind == CANNL_EVENT_CPU) return cannl_event_sync(e, err);
    if (!e->recorded) return CANNL_OK;
    return CANNL_CUDA_CHECK(cudaStreamWaitEvent(cannl_stream_cuda(s), e->ev, 0), err);
}

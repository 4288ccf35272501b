/* test_model_io.c - cannl_model_save / cannl_model_load on the fake models:
 * round trip of the whole state, params-only loads, kept-open checkpoints,
 * and all-or-nothing loading (a failed load leaves the model unchanged). */
#include "fake_models.h"
#include "rt_test.h"

/* All state tensors' bytes plus the step, for comparing two models. */
typedef struct snapshot {
    unsigned char bytes[4096];
    size_t len;
    int64_t step;
} snapshot;

static void snap(const cannl_model_api *api, void *m, snapshot *s) {
    cannl_tensor t[16];
    size_t n = api->state_tensors(m, t, 16);
    s->len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = cannl_dtype_size(t[i].dtype);
        for (int32_t d = 0; d < t[i].ndims; d++) bytes *= (size_t)t[i].shape[d];
        memcpy(s->bytes + s->len, t[i].data, bytes);
        s->len += bytes;
    }
    s->step = api->get_step(m);
}

static int same(const snapshot *a, const snapshot *b) {
    return a->len == b->len && a->step == b->step && memcmp(a->bytes, b->bytes, a->len) == 0;
}

/* A few optimisation steps on a fixed batch. */
static void train_some(void *m, int steps) {
    float x[2 * 4] = {1, 0, 2, 1, 0, 3, 1, 2}, y[2 * 3] = {1, 0, 0, 0, 0, 1};
    const void *const in[] = {x, y};
    for (int i = 0; i < steps; i++) fake_softmax_api.train_step(m, in, 2);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_model_io WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    char p[1024], p2[1024];
    const cannl_model_api *api = &fake_softmax_api;

    /* ---- round trip ---- */
    void *m1 = api->create(1), *m2 = api->create(2), *m3 = api->create(3);
    train_some(m1, 3);
    snapshot s1, s2, s3, before;
    snap(api, m1, &s1);
    const char *full = rt_path(p, sizeof p, dir, "full.safetensors");
    const cannl_meta extra[] = {{"note", "hi"}};
    CHECK_OK(cannl_model_save(api, m1, full, extra, 1, &err));
    cannl_checkpoint *ck = NULL;
    CHECK_OK(cannl_checkpoint_open(full, "fake_softmax", &ck, &err));
    CHECK(ck && strcmp(cannl_checkpoint_meta(ck, "step"), "3") == 0);
    CHECK(ck && strcmp(cannl_checkpoint_meta(ck, "note"), "hi") == 0);
    cannl_checkpoint_close(ck);

    CHECK_OK(cannl_model_load(api, m2, full, CANNL_LOAD_ALL, NULL, &err));
    snap(api, m2, &s2);
    CHECK(same(&s1, &s2));
    /* The loaded model goes on exactly like the original. */
    train_some(m1, 2);
    train_some(m2, 2);
    snap(api, m1, &s1);
    snap(api, m2, &s2);
    CHECK(same(&s1, &s2));

    /* Params only: the momentum buffers and the step stay as they were. */
    snap(api, m3, &before);
    CHECK_OK(cannl_model_load(api, m3, full, CANNL_LOAD_PARAMS, NULL, &err));
    snap(api, m3, &s3);
    CHECK(s3.step == 0 && before.step == 0);
    CHECK(memcmp(s3.bytes + 60, before.bytes + 60, 60) == 0);  /* momentum buffers: bytes 60..119 */
    CHECK(memcmp(s3.bytes, before.bytes, 60) != 0);
    {
        void *m4 = api->create(4);
        CHECK_OK(cannl_model_load(api, m4, full, CANNL_LOAD_ALL, NULL, &err));
        snapshot s4;
        snap(api, m4, &s4);
        CHECK(memcmp(s3.bytes, s4.bytes, 60) == 0); /* the same params */
        api->destroy(m4);
    }

    /* Kept open: the caller reads more metadata and closes it. */
    ck = NULL;
    CHECK_OK(cannl_model_load(api, m2, full, CANNL_LOAD_ALL, &ck, &err));
    CHECK(ck && strcmp(cannl_checkpoint_meta(ck, "note"), "hi") == 0);
    cannl_checkpoint_close(ck);

    /* ---- all or nothing ---- */
    snap(api, m2, &before);
    float w[12] = {0}, b[3] = {0}, b4[4] = {0};
    const cannl_meta mine[] = {{"model", "fake_softmax"}, {"step", "9"}};
    /* w fine, b of the wrong shape (w is read first and must not be applied). */
    const cannl_tensor badb[] = {{"w", CANNL_F32, 2, {4, 3}, w},
                                 {"b", CANNL_F32, 1, {4}, b4},
                                 {"w.momentum_buffer", CANNL_F32, 2, {4, 3}, w},
                                 {"b.momentum_buffer", CANNL_F32, 1, {3}, b}};
    const char *bad = rt_path(p2, sizeof p2, dir, "badb.safetensors");
    CHECK_OK(cannl_checkpoint_save(bad, badb, 4, mine, 2, &err));
    ck = (cannl_checkpoint *)1;
    CHECK_ERR(cannl_model_load(api, m2, bad, CANNL_LOAD_ALL, &ck, &err), CANNL_E_MISMATCH, "badb.safetensors: ",
              "tensor 'b' has shape [4], expected [3]");
    CHECK(ck == NULL);
    CHECK_ERR(cannl_model_load(api, m2, bad, CANNL_LOAD_PARAMS, NULL, &err), CANNL_E_MISMATCH, "badb.safetensors: ",
              "tensor 'b'");
    snap(api, m2, &s2);
    CHECK(same(&before, &s2));

    /* The last state tensor is missing: params-only loads work, whole-state loads do not. */
    const char *nomom = rt_path(p2, sizeof p2, dir, "nomom.safetensors");
    const cannl_tensor three[] = {{"w", CANNL_F32, 2, {4, 3}, w}, {"b", CANNL_F32, 1, {3}, b},
                                  {"w.momentum_buffer", CANNL_F32, 2, {4, 3}, w}};
    CHECK_OK(cannl_checkpoint_save(nomom, three, 3, mine, 2, &err));
    CHECK_ERR(cannl_model_load(api, m2, nomom, CANNL_LOAD_ALL, NULL, &err), CANNL_E_NOTFOUND, "nomom.safetensors: ",
              "missing tensor 'b.momentum_buffer'");
    snap(api, m2, &s2);
    CHECK(same(&before, &s2));
    CHECK_OK(cannl_model_load(api, m3, nomom, CANNL_LOAD_PARAMS, NULL, &err));

    /* Params without metadata: not a checkpoint of the model. */
    const char *plain = rt_path(p2, sizeof p2, dir, "plain.safetensors");
    CHECK_OK(cannl_checkpoint_save(plain, three, 2, NULL, 0, &err));
    CHECK_ERR(cannl_model_load(api, m2, plain, CANNL_LOAD_ALL, NULL, &err), CANNL_E_MISMATCH, "plain.safetensors: ",
              "not a checkpoint of model 'fake_softmax'");
    CHECK_OK(cannl_model_load(api, m3, plain, CANNL_LOAD_PARAMS, NULL, &err));

    /* Another model's file, a broken step, a missing file. */
    const char *other = rt_path(p2, sizeof p2, dir, "other.safetensors");
    const cannl_meta theirs[] = {{"model", "moons_mlp"}, {"step", "1"}};
    CHECK_OK(cannl_checkpoint_save(other, three, 2, theirs, 2, &err));
    CHECK_ERR(cannl_model_load(api, m2, other, CANNL_LOAD_ALL, NULL, &err), CANNL_E_MISMATCH, "other.safetensors: ",
              "checkpoint of model 'moons_mlp', but this is 'fake_softmax'");
    CHECK_ERR(cannl_model_load(api, m2, other, CANNL_LOAD_PARAMS, NULL, &err), CANNL_E_MISMATCH, "other.safetensors: ",
              "checkpoint of model 'moons_mlp', but this is 'fake_softmax'");
    const char *badstep = rt_path(p2, sizeof p2, dir, "badstep.safetensors");
    const cannl_meta neg[] = {{"model", "fake_softmax"}, {"step", "-1"}};
    CHECK_OK(cannl_checkpoint_save(badstep, badb, 1, neg, 2, &err));
    CHECK_ERR(cannl_model_load(api, m2, badstep, CANNL_LOAD_ALL, NULL, &err), CANNL_E_FORMAT, "badstep.safetensors: ",
              "metadata \"step\" is '-1'");
    CHECK_ERR(cannl_model_load(api, m2, rt_path(p2, sizeof p2, dir, "none.safetensors"), CANNL_LOAD_ALL, NULL, &err),
              CANNL_E_IO, "none.safetensors: ", "cannot open");
    snap(api, m2, &s2);
    CHECK(same(&before, &s2));

    /* Save errors: the extra metadata may not repeat "model"/"step"; nothing is written. */
    const cannl_meta dup[] = {{"step", "1"}};
    const char *dupf = rt_path(p2, sizeof p2, dir, "dup.safetensors");
    CHECK_ERR(cannl_model_save(api, m1, dupf, dup, 1, &err), CANNL_E_ARG, "dup.safetensors: ",
              "duplicate metadata key 'step'");
    CHECK(!rt_exists(dupf));
    CHECK_ERR(cannl_model_save(NULL, m1, dupf, NULL, 0, &err), CANNL_E_ARG, "cannl_model_save", "NULL");
    CHECK_ERR(cannl_model_load(api, m1, full, (cannl_load_what)7, NULL, &err), CANNL_E_ARG, "full.safetensors",
              "invalid load mode 7");

    /* ---- a model without inputs: F64 and a scalar param ---- */
    const cannl_model_api *q = &fake_quad_api;
    void *q1 = q->create(5), *q2 = q->create(6);
    for (int i = 0; i < 4; i++) q->train_step(q1, NULL, 1);
    const char *qf = rt_path(p2, sizeof p2, dir, "quad.safetensors");
    CHECK_OK(cannl_model_save(q, q1, qf, NULL, 0, &err));
    CHECK_OK(cannl_model_load(q, q2, qf, CANNL_LOAD_ALL, NULL, &err));
    snapshot a, c;
    snap(q, q1, &a);
    snap(q, q2, &c);
    CHECK(same(&a, &c) && a.step == 4);
    CHECK_ERR(cannl_model_load(api, m2, qf, CANNL_LOAD_PARAMS, NULL, &err), CANNL_E_MISMATCH, "quad.safetensors: ",
              "checkpoint of model 'fake_quad', but this is 'fake_softmax'");
    CHECK(rt_count_matching(dir, ".tmp.") == 0);

    q->destroy(q1);
    q->destroy(q2);
    api->destroy(m1);
    api->destroy(m2);
    api->destroy(m3);
    return rt_finish("test_model_io");
}

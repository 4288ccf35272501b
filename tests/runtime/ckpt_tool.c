/* ckpt_tool.c - the C half of the safetensors interop test (driven by
 * ckpt_interop.py):
 *   ckpt_tool write PATH    write a checkpoint the Python side verifies
 *   ckpt_tool verify PATH   check the checkpoint the Python side wrote */
#include "rt_test.h"

static const char *UNAME = "na\xc3\xafve/\xe5\x90\x8d\xe5\x89\x8d"; /* "naïve/名前" */

static int do_write(const char *path) {
    cannl_error err;
    float w[15], sc = 42.5f, u[2] = {1.0f, 2.0f};
    double b[5];
    for (int i = 0; i < 15; i++) w[i] = (float)(1.0 / (i + 1)) - 0.5f;
    for (int i = 0; i < 5; i++) b[i] = 1.0 / (i + 3);
    const cannl_tensor ts[] = {
        {"layer.weight", CANNL_F32, 2, {3, 5}, w},
        {"layer.bias", CANNL_F64, 1, {5}, b},
        {"scalar", CANNL_F32, 0, {0}, &sc},
        {UNAME, CANNL_F32, 1, {2}, u},
        {"nothing", CANNL_F64, 2, {0, 4}, NULL},
    };
    const cannl_meta meta[] = {{CANNL_META_MODEL, "interop_net"}, {"step", "77"}, {"quote", "say \"hi\"\n\\"}};
    CHECK_OK(cannl_checkpoint_save(path, ts, 5, meta, 3, &err));
    return rt_finish("ckpt_tool write");
}

static int do_verify(const char *path) {
    cannl_error err;
    cannl_checkpoint *ck = NULL;
    CHECK_OK(cannl_checkpoint_open(path, "py_net", &ck, &err));
    if (!ck) return rt_finish("ckpt_tool verify");
    CHECK(cannl_checkpoint_meta(ck, "epoch") && strcmp(cannl_checkpoint_meta(ck, "epoch"), "5") == 0);
    CHECK(cannl_checkpoint_meta(ck, "\xc3\xa9t\xc3\xa9") && strcmp(cannl_checkpoint_meta(ck, "\xc3\xa9t\xc3\xa9"), "\xe2\x98\x83") == 0);

    float w[6];
    double wd[6];
    cannl_tensor t = {"py.w", CANNL_F32, 2, {2, 3}, w};
    CHECK_OK(cannl_checkpoint_read(ck, &t, &err));
    cannl_tensor td = {"py.w", CANNL_F64, 2, {2, 3}, wd};
    CHECK_OK(cannl_checkpoint_read(ck, &td, &err));
    for (int i = 0; i < 6; i++) CHECK(w[i] == (float)(1.0 / (i + 1)) && wd[i] == (double)w[i]);

    double b[3];
    float bf[3];
    cannl_tensor tb = {"py.b", CANNL_F64, 1, {3}, b};
    CHECK_OK(cannl_checkpoint_read(ck, &tb, &err));
    cannl_tensor tbf = {"py.b", CANNL_F32, 1, {3}, bf};
    CHECK_OK(cannl_checkpoint_read(ck, &tbf, &err));
    for (int i = 0; i < 3; i++) CHECK(b[i] == i * 0.1 && bf[i] == (float)(i * 0.1));

    float un;
    cannl_tensor tu = {"\xc3\xbcn\xc3\xaf", CANNL_F32, 1, {1}, &un}; /* "ünï", written as \u escapes */
    CHECK_OK(cannl_checkpoint_read(ck, &tu, &err));
    CHECK(un == 3.0f);
    cannl_tensor te = {"py.empty", CANNL_F32, 2, {0, 4}, NULL};
    CHECK_OK(cannl_checkpoint_read(ck, &te, &err));
    double iv[2];
    float ivf[2];
    cannl_tensor ti = {"py.i64", CANNL_F64, 1, {2}, iv};
    CHECK_OK(cannl_checkpoint_read(ck, &ti, &err));
    cannl_tensor tif = {"py.i64", CANNL_F32, 1, {2}, ivf};
    CHECK_OK(cannl_checkpoint_read(ck, &tif, &err));
    CHECK(iv[0] == 7 && iv[1] == -7 && ivf[0] == 7.0f && ivf[1] == -7.0f);
    cannl_checkpoint_close(ck);
    return rt_finish("ckpt_tool verify");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) return do_write(argv[2]);
    if (argc == 3 && strcmp(argv[1], "verify") == 0) return do_verify(argv[2]);
    fprintf(stderr, "usage: ckpt_tool write|verify PATH\n");
    return 2;
}

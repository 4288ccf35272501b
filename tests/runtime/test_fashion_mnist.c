/* test_fashion_mnist.c - reads the real Fashion-MNIST test set (gzip IDX)
 * if it is installed: 10000 images of 28x28 in 0..255, labels 0..9 (1000 of
 * each class), one-hot and a gathered batch. Exits 77 (skipped) when the
 * files are absent. Usage: test_fashion_mnist DATA_DIR */
#include "rt_test.h"

#include <math.h>

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    char ip[1024], lp[1024];
    rt_path(ip, sizeof ip, dir, "t10k-images-idx3-ubyte.gz");
    rt_path(lp, sizeof lp, dir, "t10k-labels-idx1-ubyte.gz");
    if (!rt_exists(ip) || !rt_exists(lp)) {
        printf("Fashion-MNIST t10k files not found in %s: skipping\n", dir);
        return 77;
    }
    cannl_error err;
    cannl_dataset img, lab;
    CHECK_OK(cannl_dataset_load(&img, ip, CANNL_FMT_AUTO, CANNL_F32, &err));
    CHECK_OK(cannl_dataset_load(&lab, lp, CANNL_FMT_AUTO, CANNL_F32, &err));
    if (rt_failures) return rt_finish("test_fashion_mnist");

    CHECK(img.count == 10000 && img.elems == 784 && img.ndims == 2 && img.dims[0] == 28 && img.dims[1] == 28);
    CHECK(lab.count == 10000 && lab.elems == 1 && lab.ndims == 0);
    const float *px = img.data;
    int in_range = 1;
    double sum = 0;
    for (int64_t i = 0; i < img.count * img.elems; i++) {
        in_range &= px[i] >= 0 && px[i] <= 255 && px[i] == floorf(px[i]);
        sum += px[i];
    }
    CHECK(in_range);
    double mean = sum / (double)(img.count * img.elems);
    printf("images: %lld x %lld, mean pixel %.3f\n", (long long)img.count, (long long)img.elems, mean);
    CHECK(mean > 60 && mean < 80); /* about 72.9 for Fashion-MNIST */

    int per_class[10] = {0};
    const float *l = lab.data;
    int labels_ok = 1;
    for (int64_t i = 0; i < lab.count; i++) {
        labels_ok &= l[i] >= 0 && l[i] <= 9 && l[i] == floorf(l[i]);
        if (l[i] >= 0 && l[i] <= 9) per_class[(int)l[i]]++;
    }
    CHECK(labels_ok);
    for (int c = 0; c < 10; c++) CHECK(per_class[c] == 1000);
    const float first = l[0];

    CHECK_OK(cannl_dataset_one_hot(&lab, 10, &err));
    CHECK(lab.elems == 10 && lab.ndims == 1 && lab.dims[0] == 10);
    const float *oh = lab.data;
    CHECK(oh[(int)first] == 1.0f);

    /* A shuffled batch of 64 images. */
    cannl_rng rng;
    cannl_rng_seed(&rng, 1);
    static int64_t idx[10000];
    for (int i = 0; i < 10000; i++) idx[i] = i;
    cannl_shuffle(&rng, idx, 10000);
    float *batch = cannl_alloc(64 * 784 * sizeof(float));
    CHECK_OK(cannl_dataset_gather(&img, idx, 64, batch, &err));
    CHECK(batch && memcmp(batch + 5 * 784, px + idx[5] * 784, 784 * sizeof(float)) == 0);
    cannl_free(batch);

    cannl_dataset_free(&img);
    cannl_dataset_free(&lab);
    return rt_finish("test_fashion_mnist");
}

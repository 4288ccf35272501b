/* lr_trace.c — the learning rate of each training step of a generated model whose loss is
 * sum(p) for one param p (tests/schedules/specs): its gradient is 1, so sgd moves p by minus
 * that step's lr. Prints "lr <step> <value> <last_lr>" for STEPS steps (argv[1]), 17 significant
 * digits: the lr as p moved, and as <model>_get_last_lr reports it after the step.
 * Compiled once per spec with -DLT_MODEL=<model>.
 */
#include <stdio.h>
#include <stdlib.h>

#define LT_STR_(x) #x
#define LT_STR(x) LT_STR_(x)
#define LT_CAT_(a, b) a##b
#define LT_CAT(a, b) LT_CAT_(a, b)
#include LT_STR(LT_MODEL.h)

int main(int argc, char **argv) {
    const int steps = argc > 1 ? atoi(argv[1]) : 0;
    LT_MODEL *m = LT_CAT(LT_MODEL, _create)(1u);
    if (!m || steps < 1) return 2;
    LT_CAT(LT_MODEL, _real) *p = LT_CAT(LT_MODEL, _param)(m, "p", NULL);
    for (int s = 0; s < steps; ++s) {
        const double before = (double)p[0];
        LT_CAT(LT_MODEL, _train_step)(m, NULL, 1);
        printf("lr %d %.17g %.17g\n", s, before - (double)p[0], LT_CAT(LT_MODEL, _get_last_lr)(m));
    }
    LT_CAT(LT_MODEL, _destroy)(m);
    return 0;
}

/* allreduce.c - the all-reduce a data-parallel training step does, alone: BYTES of floats
 * summed over the ranks with MPI_Iallreduce in 4 MiB buckets (as cannl_rt_mpi does), REPS
 * times after a warm-up; rank 0 prints the time per all-reduce, the bus bandwidth (the ring
 * all-reduce's 2 (P - 1) / P * bytes over the time) and what the ring model of
 * docs/distributed.md predicts for a given link. Build and run (docs/distributed.md):
 *   mpicc -O2 bench/mpi/allreduce.c -o allreduce
 *   mpirun --oversubscribe -np 2 ./allreduce 2678848 200 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long bytes = argc > 1 ? atol(argv[1]) : 2678848, reps = argc > 2 ? atol(argv[2]) : 100;
    const long n = bytes / (long)sizeof(float), per = (4L << 20) / (long)sizeof(float);
    float *x = calloc((size_t)n + 1, sizeof *x);
    MPI_Request *req = malloc(((size_t)(n / per) + 2) * sizeof *req);
    if (!x || !req) MPI_Abort(MPI_COMM_WORLD, 1);
    double t0 = 0;
    for (long r = -5; r < reps; r++) {
        if (r == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        int k = 0;
        for (long lo = 0; lo < n; lo += per, k++)
            MPI_Iallreduce(MPI_IN_PLACE, x + lo, (int)(n - lo < per ? n - lo : per), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &req[k]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    }
    const double t = (MPI_Wtime() - t0) / (double)reps;
    if (rank == 0)
        printf("%d ranks, %ld bytes: %.3f ms per all-reduce, bus bandwidth %.2f GB/s\n", size, bytes, 1e3 * t,
               2.0 * (size - 1) / size * (double)bytes / t / 1e9);
    free(x);
    free(req);
    MPI_Finalize();
    return 0;
}

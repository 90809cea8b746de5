/* without_mpi.c: comm_mpi_launch for the CPU reference programs of the GPU check, built on a GPU machine
 * that has no MPI: they run their ranks as threads and refuse a launcher with one line. */
#include "comm_backend.h"

#include <stdio.h>

int comm_mpi_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                    void *arg) {
  (void)grid, (void)timeout, (void)fn, (void)arg;
  fprintf(stderr, "plait: started by %s %d but this reference program was built without MPI; run it alone\n", launcher,
          world);
  return 1;
}

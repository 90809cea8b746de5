/* without_nccl.c: comm_nccl_launch for a CUDA build made where NCCL is missing (the Makefile takes this
 * file instead of comm_nccl.c): ranks that are threads still share a GPU through the local backend; a
 * job of processes is refused with one line. */
#include "comm_backend.h"

#include <stdio.h>

int comm_nccl_launch(const CommGrid *grid, double timeout, int world, const char *launcher, RankMain fn,
                     void *arg) {
  (void)grid, (void)timeout, (void)world, (void)launcher, (void)fn, (void)arg;
  fprintf(stderr, "plait: this program was built without NCCL, so its ranks cannot be processes; install NCCL and "
          "rebuild (make NCCL_HOME=DIR), or run it without a launcher and without WORLD_SIZE (ranks as threads)\n");
  return 1;
}

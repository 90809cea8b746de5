/* budget.c: allocations counted against a shared bound on bytes. */
#include "ir/budget.h"

#include <stdio.h>
#include <stdlib.h>

void *budget_realloc(MemoryBudget *b, void *p, size_t old_size, size_t new_size) {
  size_t old = p ? old_size : 0;
  if (new_size == 0) {
    free(p);
    if (b) b->used -= old;
    return NULL;
  }
  if (b && new_size > old && b->used - old + new_size > b->limit) {
    b->exceeded = 1;
    return NULL;
  }
  void *grown = realloc(p, new_size);
  if (!grown && !b) {
    fprintf(stderr, "plait: out of memory\n");
    exit(1);
  }
  if (grown && b) b->used = b->used - old + new_size;
  return grown;
}

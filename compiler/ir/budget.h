/* budget.h: a bound on bytes that several allocators share: while a model file runs, its Lua
 * values and the IR its tracing builds count against one limit (--lua-memory). */
#ifndef PLAIT_BUDGET_H
#define PLAIT_BUDGET_H

#include <stddef.h>

typedef struct {
  size_t used, limit; /* bytes */
  int exceeded;       /* an allocation was refused */
} MemoryBudget;

/* realloc(p, new_size) counted in b (NULL: no bound; a failed allocation then ends plait with
 * one line): new_size 0 frees p and returns NULL; growth past b's limit is refused (NULL,
 * b->exceeded set), as is growth the system cannot give. old_size is p's size (0 when p is
 * NULL). */
void *budget_realloc(MemoryBudget *b, void *p, size_t old_size, size_t new_size);

#endif

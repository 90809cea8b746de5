/* name_index.c: open addressing over ids, probed linearly from the FNV-1a hash of the name. */
#include "ir/name_index.h"

#include <stdint.h>
#include <string.h>

static uint32_t hash(const char *name) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
  return h;
}

int name_index_find(const NameIndex *x, const char *name, NameOf name_of, const void *owner) {
  if (x->cap == 0) return -1;
  for (uint32_t i = hash(name) & (uint32_t)(x->cap - 1);; i = (i + 1) & (uint32_t)(x->cap - 1)) {
    int id = x->slots[i] - 1;
    if (id < 0) return -1;
    if (strcmp(name_of(owner, id), name) == 0) return id;
  }
}

static void place(int *slots, int cap, int id, const char *name) {
  uint32_t i = hash(name) & (uint32_t)(cap - 1);
  while (slots[i]) i = (i + 1) & (uint32_t)(cap - 1);
  slots[i] = id + 1;
}

/* Twice the slots, every id placed again. */
static int grow(NameIndex *x, NameOf name_of, const void *owner, MemoryBudget *budget) {
  int cap = x->cap ? 2 * x->cap : 16;
  int *slots = budget_realloc(budget, NULL, 0, (size_t)cap * sizeof *slots);
  if (!slots) return -1;
  memset(slots, 0, (size_t)cap * sizeof *slots);
  for (int i = 0; i < x->cap; i++)
    if (x->slots[i]) place(slots, cap, x->slots[i] - 1, name_of(owner, x->slots[i] - 1));
  budget_realloc(budget, x->slots, (size_t)x->cap * sizeof *x->slots, 0);
  x->slots = slots;
  x->cap = cap;
  return 0;
}

int name_index_add(NameIndex *x, int id, NameOf name_of, const void *owner, MemoryBudget *budget) {
  if (2 * (x->count + 1) > x->cap && grow(x, name_of, owner, budget)) return -1;
  place(x->slots, x->cap, id, name_of(owner, id));
  x->count++;
  return 0;
}

void name_index_free(NameIndex *x, MemoryBudget *budget) {
  budget_realloc(budget, x->slots, (size_t)x->cap * sizeof *x->slots, 0);
  memset(x, 0, sizeof *x);
}

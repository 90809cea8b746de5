/* name_index.h: a hash from names to the ids of the things that carry them (dims, parameters,
 * constants), so that finding one by name takes the same time however many there are. The names
 * stay with their owners: the index holds ids and asks name_of(owner, id) for an id's name. */
#ifndef PLAIT_NAME_INDEX_H
#define PLAIT_NAME_INDEX_H

#include "ir/budget.h"

typedef const char *(*NameOf)(const void *owner, int id);

typedef struct {
  int *slots; /* id + 1, or 0 for an empty slot; a power of two of them */
  int cap, count;
} NameIndex;

/* The id named `name`, or -1. */
int name_index_find(const NameIndex *x, const char *name, NameOf name_of, const void *owner);
/* Adds id under its name (not in the index yet), growing within budget (NULL: no bound). Returns
 * 0, or -1 when the budget refuses. */
int name_index_add(NameIndex *x, int id, NameOf name_of, const void *owner, MemoryBudget *budget);
void name_index_free(NameIndex *x, MemoryBudget *budget);

#endif

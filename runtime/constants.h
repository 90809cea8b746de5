/* constants.h: the model's constants (values the model file computed when plait built the program),
 * in the backend's memory for the stage code to read. */
#ifndef PLAIT_CONSTANTS_H
#define PLAIT_CONSTANTS_H

#include <stddef.h>

#include "program.h"

/* Reads and checks constants.bin beside the program when p has constants in it (values NULL):
 * returns 0, or -1 with one line in why naming the file, its fault and the fix. */
int constants_check(const Program *p, char *why, size_t len);
/* One buffer per constant of p, its values as act_t; NULL when p has none. */
act_t **constants_upload(const Program *p);
void constants_free(const Program *p, act_t **constants);

#endif

/* constants.h: the model's constants (values the model file computed when plait built the program),
 * in the backend's memory for the stage code to read. */
#ifndef PLAIT_CONSTANTS_H
#define PLAIT_CONSTANTS_H

#include "program.h"

/* One buffer per constant of p, its values as act_t; NULL when p has none. */
act_t **constants_upload(const Program *p);
void constants_free(const Program *p, act_t **constants);

#endif

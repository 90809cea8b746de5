/* safetensors_meta.h: a checkpoint's metadata values read strictly: whole numbers within a
 * range, finite numbers from a floor, words from a closed list. A damaged or hand-edited value
 * is refused naming its key rather than read as something else (strtoll's 0 for "x", a seed of
 * "abc" that changes the losses). */
#ifndef PLAIT_CKPT_META_H
#define PLAIT_CKPT_META_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/safetensors.h"

/* Formats one line into error, control characters (a value from a damaged file may hold any) as
 * '?'; returns -1. */
int ckpt_refuse(char *error, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Each returns 1 when the checkpoint has no such key (out untouched), 0 with the value in out,
 * or -1 with one line in error naming the file, the key, the value found, what it must be, and
 * the fix. */

/* Decimal digits only (no sign, point or exponent), least <= value <= most. */
int ckpt_meta_whole(const Ckpt *c, const char *key, uint64_t least, uint64_t most, uint64_t *out,
                    char *error, size_t len);
/* A number strtod reads whole, finite and at least `least`. */
int ckpt_meta_real(const Ckpt *c, const char *key, double least, double *out, char *error,
                   size_t len);
/* One of words[0..nwords), exactly; out is its index. */
int ckpt_meta_word(const Ckpt *c, const char *key, const char *const *words, int nwords, int *out,
                   char *error, size_t len);

#endif

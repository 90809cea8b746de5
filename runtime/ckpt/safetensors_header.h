/* safetensors_header.h: the JSON header of a safetensors file: writing one, and a strict parser
 * that checks one. */
#ifndef PLAIT_CKPT_HEADER_H
#define PLAIT_CKPT_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/safetensors.h"

/* A parsed header. tensors are sorted by name; names, keys and values point into `strings`. */
typedef struct {
  CkptTensor *tensors;
  int ntensors;
  CkptMeta *meta;
  int nmeta;
  char *strings;
  uint64_t data_bytes; /* the data region the tensors tile */
  char error[512];     /* on failure: the cause, */
  const char *fix;     /* and what to do about it */
} CkptHeader;

/* The header for these tensors, stored back to back in list order, each in its spec's dtype
 * (`native` where the spec names none), with meta and then a checksum entry per tensor
 * (CKPT_CHECKSUM_PREFIX + its name) whose CKPT_CHECKSUM_DIGITS digits are zeros at
 * checksum_at[i], for the writer to fill in once the data is written; padded with spaces so that
 * 8 + *len is a multiple of 8. Returns a malloc'd text (not NUL-terminated in *len), or NULL
 * when out of memory. */
char *ckpt_header_format(const CkptSpec *tensors, int ntensors, const CkptMeta *meta, int nmeta,
                         CkptDtype native, size_t *checksum_at, size_t *len);

/* Parses text[0..len): strict JSON (trailing spaces allowed); every tensor with exactly dtype
 * (one of safetensors'), shape and data_offsets; offsets that match shape·dtype and tile [0,
 * data_bytes) without gap or overlap; metadata of strings only; no name twice. Returns 0
 * (tensors, meta and strings are the caller's to free), or -1 with error and fix set (and
 * nothing to free). */
int ckpt_header_parse(const char *text, size_t len, CkptHeader *h);

#endif

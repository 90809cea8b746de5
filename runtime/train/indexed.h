/* indexed.h: Megatron-LM's indexed datasets (PREFIX.bin and PREFIX.idx, the "MMIDIDX" format of
 * megatron/core/datasets/indexed_dataset.py) opened as a token stream read in place.
 *
 * PREFIX.idx, little-endian: the 9 bytes "MMIDIDX\0\0", a uint64 version (1), a uint8 dtype code
 * (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16), a uint64
 * sequence count n, a uint64 document count d, then int32 sizes[n] (tokens), int64 pointers[n]
 * (byte offsets into PREFIX.bin) and int64 document_indices[d] (0, then the sequence index that
 * ends each document, the last being n). PREFIX.bin: the sequences' tokens.
 *
 * plait reads the documents concatenated in order, as Megatron's GPT dataset does, and draws its
 * windows from that stream as from a token file. It reads dtypes uint16 and int32, and sequences
 * stored back to back from byte 0 (as Megatron-LM's writer stores them), which fill PREFIX.bin
 * exactly: the stream is then PREFIX.bin itself, mapped, not copied. */
#ifndef PLAIT_INDEXED_H
#define PLAIT_INDEXED_H

#include "train/data.h"

/* Whether PREFIX.idx exists: --data PREFIX then names an indexed dataset. */
int indexed_present(const char *prefix);

/* Maps PREFIX.bin into f (f->path being the prefix) after checking PREFIX.idx against it: its
 * magic, version and dtype, its length against its counts, every pointer against the sizes
 * before it and the .bin's length, the document indices. Returns 0, or -1 with f->error set
 * (one line naming the file, the cause and the fix) and nothing mapped. */
int indexed_open(TokenFile *f);

#endif

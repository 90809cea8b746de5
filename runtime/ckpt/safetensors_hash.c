/* safetensors_hash.c: the checksum of a tensor's bytes (safetensors_hash.h tells the function
 * and why it catches damage). */
#include "ckpt/safetensors_hash.h"

#include <string.h>

static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full,
                      P3 = 0x165667B19E3779F9ull;

static uint64_t word_at(const unsigned char *bytes) {
  uint64_t w;
  memcpy(&w, bytes, 8); /* little-endian: safetensors.c refuses to build elsewhere */
  return w;
}

static uint64_t round_of(uint64_t state, uint64_t word) {
  state += word * P2;
  return (state << 31 | state >> 33) * P1;
}

void ckpt_hash_begin(CkptHash *h) { memset(h, 0, sizeof *h), h->state = P3; }

void ckpt_hash_add(CkptHash *h, const void *bytes, size_t n) {
  const unsigned char *p = bytes;
  h->length += n;
  if (h->npending) {
    size_t take = n < 8 - h->npending ? n : 8 - h->npending;
    memcpy(h->pending + h->npending, p, take);
    h->npending += take, p += take, n -= take;
    if (h->npending < 8) return;
    h->state = round_of(h->state, word_at(h->pending));
    h->npending = 0;
  }
  for (; n >= 8; p += 8, n -= 8) h->state = round_of(h->state, word_at(p));
  memcpy(h->pending, p, n);
  h->npending = n;
}

uint64_t ckpt_hash_end(const CkptHash *h) {
  uint64_t s = h->state;
  if (h->npending) {
    unsigned char last[8] = {0};
    memcpy(last, h->pending, h->npending);
    s = round_of(s, word_at(last));
  }
  s ^= h->length;
  s ^= s >> 33, s *= P2;
  s ^= s >> 29, s *= P3;
  return s ^ s >> 32;
}

uint64_t ckpt_hash(const void *bytes, size_t n) {
  CkptHash h;
  ckpt_hash_begin(&h);
  ckpt_hash_add(&h, bytes, n);
  return ckpt_hash_end(&h);
}

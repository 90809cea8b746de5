/* utf8.h: UTF-8 as the tokenizer reads it: characters, the repair of bytes that are not UTF-8 (each
 * maximal ill-formed part becomes U+FFFD, as Python's bytes.decode("utf-8", errors="replace")
 * does), Unicode white space, and GPT-2's byte-level alphabet (each byte shown as one printable
 * character: the bytes_char table of Hugging Face tokenizers' ByteLevel). */
#ifndef PLAIT_TEXT_UTF8_H
#define PLAIT_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the well-formed UTF-8 character at s[0..n), its code point in *cp; 0 when
 * s starts none (a stray byte, an overlong form, a surrogate, past U+10FFFF, cut short). */
int utf8_char(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes the UTF-8 of cp to out (room for 4); returns its length. */
int utf8_put(uint32_t cp, unsigned char *out);

/* The length of the longest well-formed prefix of s[0..n). */
size_t utf8_valid_prefix(const unsigned char *s, size_t n);

/* s[0..n) with each maximal ill-formed subpart replaced by U+FFFD, into out (room for 3n bytes);
 * returns the length written. */
size_t utf8_repair(const unsigned char *s, size_t n, unsigned char *out);

/* Whether cp has the Unicode White_Space property. */
int utf8_is_space(uint32_t cp);

/* The character GPT-2's byte-level alphabet shows byte b as; and back: the byte cp shows, or -1
 * when cp is not in the alphabet. */
uint32_t bytelevel_char(unsigned char b);
int bytelevel_byte(uint32_t cp);

#endif

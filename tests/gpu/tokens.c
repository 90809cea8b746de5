/* tokens.c: `tokens OUT FILE...` writes the bytes of the files as a token file (runtime/train/data.h's format:
 * a header of 256 little-endian int32, then the tokens as uint16), for the GPU check, where plait itself
 * (and so `plait data`) is not built. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "train/data.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OUT FILE...\n", argv[0]);
    return 2;
  }
  FILE *out = fopen(argv[1], "wb");
  if (!out) {
    fprintf(stderr, "tokens: cannot write %s\n", argv[1]);
    return 1;
  }
  int32_t header[DATA_HEADER_INTS];
  memset(header, 0, sizeof header);
  fwrite(header, sizeof header, 1, out); /* the count is known at the end */
  int64_t count = 0;
  for (int i = 2; i < argc; i++) {
    FILE *in = fopen(argv[i], "rb");
    int byte;
    if (!in) {
      fprintf(stderr, "tokens: cannot read %s\n", argv[i]);
      return 1;
    }
    while ((byte = fgetc(in)) != EOF) {
      uint16_t token = (uint16_t)byte;
      fwrite(&token, sizeof token, 1, out);
      count++;
    }
    fclose(in);
  }
  header[0] = DATA_MAGIC, header[1] = DATA_VERSION, header[2] = (int32_t)count;
  fseek(out, 0, SEEK_SET);
  fwrite(header, sizeof header, 1, out);
  if (fclose(out) != 0) {
    fprintf(stderr, "tokens: writing %s failed\n", argv[1]);
    return 1;
  }
  printf("tokens: %lld tokens in %s\n", (long long)count, argv[1]);
  return 0;
}

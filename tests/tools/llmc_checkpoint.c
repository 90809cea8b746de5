/* llmc_checkpoint.c: a randomly initialised GPT-2 checkpoint in llm.c's format (train_gpt2.c's
 * gpt2_124M.bin), so that the benchmarks can time llm.c's CPU trainer beside plait on the same shape:
 * 256 int32 of header (magic 20240326, version 3, max_seq_len, vocab, layers, heads, channels, padded
 * vocab), then every parameter as fp32, uniform in [-0.02, 0.02] (what llm.c's timing needs: finite values
 * of the right count; the parameters' order does not matter to it).
 * usage: llmc_checkpoint FILE [LAYERS HEADS CHANNELS] (GPT-2 124M: 12 12 768) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_SEQ = 1024, VOCAB = 50257, PADDED_VOCAB = 50304, CHUNK = 1 << 16 };

/* llm.c's parameter tensors: the token and position tables, per layer two norms (weight and bias), the
 * q, k, v projection with its bias, the attention's output projection with its bias, the MLP's two
 * projections with their biases; the final norm. */
static int64_t parameter_count(int64_t layers, int64_t channels) {
  int64_t C = channels, per_layer = 4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C;
  return PADDED_VOCAB * C + MAX_SEQ * C + layers * per_layer + 2 * C;
}

/* xorshift64: the same values on every run. */
static float next_uniform(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (float)((double)(*state >> 11) / 9007199254740992.0 * 0.04 - 0.02);
}

static int write_parameters(FILE *f, int64_t count) {
  static float chunk[CHUNK];
  uint64_t state = 88172645463325252ull;
  for (int64_t done = 0; done < count;) {
    int64_t n = count - done < CHUNK ? count - done : CHUNK;
    for (int64_t i = 0; i < n; i++) chunk[i] = next_uniform(&state);
    if (fwrite(chunk, sizeof *chunk, (size_t)n, f) != (size_t)n) return -1;
    done += n;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 5) {
    fprintf(stderr, "usage: llmc_checkpoint FILE [LAYERS HEADS CHANNELS]\n");
    return 2;
  }
  int layers = argc == 5 ? atoi(argv[2]) : 12, heads = argc == 5 ? atoi(argv[3]) : 12;
  int channels = argc == 5 ? atoi(argv[4]) : 768;
  int32_t header[256] = {20240326, 3, MAX_SEQ, VOCAB, layers, heads, channels, PADDED_VOCAB};
  FILE *f = fopen(argv[1], "wb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  int status = fwrite(header, sizeof header, 1, f) == 1 ? write_parameters(f, parameter_count(layers, channels)) : -1;
  if (fclose(f) != 0 || status != 0) {
    fprintf(stderr, "llmc_checkpoint: could not write %s\n", argv[1]);
    return 1;
  }
  return 0;
}

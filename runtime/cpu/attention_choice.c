/* attention_choice.c: the CPU's answer to DIR/train --attention: plait's attention is the only one here,
 * so auto and plait run it and cudnn is refused with the way to get it. */
#include <stdio.h>

#include "kernels.h"

int k_attention_available(AttentionChoice choice, char *why, size_t size) {
  if (choice != ATTENTION_CUDNN) return 0;
  snprintf(why, size, "this program runs on the CPU, where plait's attention is the only one; cuDNN's runs in "
           "a GPU program (plait build --backend cuda)");
  return 1;
}

void k_attention_choose(AttentionChoice choice, int report) { (void)choice, (void)report; }

const char *k_attention_path(const AttnShape *s) {
  (void)s;
  return "plait";
}

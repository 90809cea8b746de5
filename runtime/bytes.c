/* bytes.c: amounts of memory in decimal units, as plait plan and DIR/train print them. */
#include "bytes.h"

#include <stdio.h>

void bytes_format(double bytes, char *buf, int len) {
  static const char *const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000 && u < 5) bytes /= 1000, u++;
  snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
}

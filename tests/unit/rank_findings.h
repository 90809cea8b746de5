/* rank_findings.h: what the ranks of a communication test found wrong, recorded by each rank (the
 * first failure's text kept, the rest counted) for the driver to report; shared by the tests that
 * run a function on every rank (comm_checks.h, test_experts.c). */
#ifndef PLAIT_RANK_FINDINGS_H
#define PLAIT_RANK_FINDINGS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "comm.h"

typedef struct {
  pthread_mutex_t lock; /* the ranks of the local backend share one */
  int failures;
  char first[512];
} Findings;

static void finding(Findings *f, Comm *c, const char *file, int line, const char *fmt, ...) {
  char message[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&f->lock);
  if (f->failures++ == 0)
    snprintf(f->first, sizeof f->first, "rank %d: %s:%d: %s", comm_info(c)->rank, file, line,
             message);
  pthread_mutex_unlock(&f->lock);
}

#define EXPECT(f, c, cond, ...) \
  do { if (!(cond)) finding(f, c, __FILE__, __LINE__, __VA_ARGS__); } while (0)

#endif

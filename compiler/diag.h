/* diag.h: how passes report a user's mistake: one line naming the cause and the fix. */
#ifndef PLAIT_DIAG_H
#define PLAIT_DIAG_H

typedef struct {
  char msg[1024];
} Diag;

/* Formats the message into d and returns -1, so that `return diag(d, ...)` reports and fails. */
int diag(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

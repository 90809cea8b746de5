/* diag.h: how passes report a user's mistake: one line naming the cause and the fix; and, where a
 * command checks many things at once (a checkpoint against a model), a list of such lines. */
#ifndef PLAIT_DIAG_H
#define PLAIT_DIAG_H

typedef struct {
  char msg[1024];
} Diag;

/* Formats the message into d and returns -1, so that `return diag(d, ...)` reports and fails. */
int diag(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct {
  char **lines;
  int count, cap;
} DiagList;

/* Prints one line to stderr as "plait: LINE", its control characters shown escaped (a message
 * may quote a model file's or a checkpoint's text). */
void diag_print(const char *line);

/* Adds one line (newlines in it become spaces). */
void diag_add(DiagList *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the lines as diag_print does, the first 20 and then how many more; returns the count. */
int diag_report(const DiagList *l);
void diag_list_free(DiagList *l);

#endif

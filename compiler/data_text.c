/* data_text.c: the tokenizer's reading, the end-of-text token's choice, the threads over the
 * documents and the progress line. */
#include "data_text.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "encode.h"
#include "infile.h"
#include "message.h"
#include "text/tokenizer.h"

enum { PROGRESS_FROM_BYTES = 64 << 20 };

/* What the threads share. */
typedef struct {
  const TextJob *job;
  const Encoder *encoder;
  uint32_t eot;
  IdList *documents;
  pthread_mutex_t lock;
  int next;          /* the next document to take */
  int failed_at;     /* the first document that failed (ninputs: none) */
  char error[MESSAGE_TEXT];
  int64_t bytes_done, bytes_total;
  int progress;      /* print the progress line */
  struct timespec start, shown;
} Shared;

static double seconds_since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + 1e-9 * (double)(now.tv_nsec - t->tv_nsec);
}

/* Under the lock: a line at most every half second, ended by the caller. */
static void show_progress(Shared *s, int last) {
  if (!s->progress || (!last && seconds_since(&s->shown) < 0.5)) return;
  clock_gettime(CLOCK_MONOTONIC, &s->shown);
  double mb = (double)s->bytes_done / 1e6, secs = seconds_since(&s->start);
  fprintf(stderr, "\rtokenized %.1f of %.1f MB (%.1f MB/s)%s", mb, (double)s->bytes_total / 1e6,
          secs > 0 ? mb / secs : 0.0, last ? "\n" : "");
}

/* The whole file into *text. */
static int read_file(const char *path, unsigned char **text, size_t *len, char *why, size_t size) {
  char cause[512];
  FILE *f = infile_open(path, cause, sizeof cause);
  if (!f) return snprintf(why, size, "'%s': %s; give text files", path, cause), -1;
  size_t cap = 1 << 16, n = 0, got;
  unsigned char *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *bigger = realloc(buf, 2 * cap);
      if (!bigger) free(buf);
      buf = bigger, cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf) return snprintf(why, size, "out of memory reading '%s'", path), -1;
  if (bad) {
    free(buf);
    return snprintf(why, size, "cannot read '%s' (%s); check the file", path, strerror(errno)), -1;
  }
  *text = buf, *len = n;
  return 0;
}

static int encode_document(Shared *s, EncodeWorker *w, int i, char *why, size_t size) {
  unsigned char *text;
  size_t len;
  IdList *doc = &s->documents[i];
  if (read_file(s->job->inputs[i], &text, &len, why, size)) return -1;
  char cause[512] = "out of memory";
  int rc = idlist_push(doc, s->eot) ? -1 : encode_text(w, text, len, doc, cause, sizeof cause);
  free(text);
  if (rc) snprintf(why, size, "'%s': %s", s->job->inputs[i], cause);
  pthread_mutex_lock(&s->lock);
  s->bytes_done += (int64_t)len;
  show_progress(s, 0);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static void *worker(void *arg) {
  Shared *s = arg;
  EncodeWorker w;
  char why[MESSAGE_TEXT];
  int ready = encode_worker_init(&w, s->encoder) == 0;
  for (;;) {
    pthread_mutex_lock(&s->lock);
    int i = s->next < s->failed_at ? s->next++ : s->job->ninputs;
    pthread_mutex_unlock(&s->lock);
    if (i >= s->job->ninputs) break;
    int rc = -1;
    if (ready) rc = encode_document(s, &w, i, why, sizeof why);
    else snprintf(why, sizeof why, "out of memory");
    if (rc == 0) continue;
    pthread_mutex_lock(&s->lock);
    if (i < s->failed_at) {
      s->failed_at = i;
      snprintf(s->error, sizeof s->error, "%s", why);
    }
    pthread_mutex_unlock(&s->lock);
  }
  encode_worker_free(&w);
  return NULL;
}

/* --eot's token, else the first of the usual names the tokenizer declares. */
static int pick_eot(const TextJob *job, const Tokenizer *t, uint32_t *eot, Diag *d) {
  int64_t id = job->eot ? tokenizer_find(t, job->eot) : tokenizer_document_start(t);
  if (id >= 0) return *eot = (uint32_t)id, 0;
  if (job->eot) return diag(d, "--eot %.200s: the tokenizer %s has no such token; name one it "
                            "declares", job->eot, job->tokenizer);
  return diag(d, "the tokenizer %s declares none of <|endoftext|>, <|begin_of_text|>, <s>; name "
              "the token that separates documents with --eot TOKEN", job->tokenizer);
}

static int64_t input_total(const TextJob *job) {
  int64_t total = 0;
  for (int i = 0; i < job->ninputs; i++) {
    struct stat st;
    if (stat(job->inputs[i], &st) == 0) total += st.st_size;
  }
  return total;
}

static int run_workers(Shared *s, Diag *d) {
  int n = s->job->workers < s->job->ninputs ? s->job->workers : s->job->ninputs;
  pthread_t threads[256];
  int started = 0;
  clock_gettime(CLOCK_MONOTONIC, &s->start);
  s->shown = s->start;
  for (; started < n - 1; started++)
    if (pthread_create(&threads[started], NULL, worker, s) != 0) break;
  worker(s);
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  show_progress(s, 1);
  if (s->failed_at < s->job->ninputs) return diag(d, "%s", s->error);
  return 0;
}

static int encode_all(const TextJob *job, const Encoder *e, uint32_t eot, TextTokens *out,
                      Diag *d) {
  Shared s = {.job = job, .encoder = e, .eot = eot, .failed_at = job->ninputs};
  s.documents = out->documents = calloc((size_t)job->ninputs, sizeof *out->documents);
  if (!s.documents) return diag(d, "out of memory");
  s.bytes_total = input_total(job);
  s.progress = isatty(2) || s.bytes_total > PROGRESS_FROM_BYTES;
  pthread_mutex_init(&s.lock, NULL);
  int rc = run_workers(&s, d);
  pthread_mutex_destroy(&s.lock);
  out->tokens = 0;
  for (int i = 0; i < job->ninputs; i++) out->tokens += s.documents[i].count;
  return rc;
}

int data_text_encode(const TextJob *job, TextTokens *out, Diag *d) {
  Tokenizer t;
  Encoder e;
  char why[MESSAGE_TEXT];
  uint32_t eot = 0;
  memset(out, 0, sizeof *out);
  if (tokenizer_load(&t, job->tokenizer, job->merges, why, sizeof why))
    return diag(d, "%.1000s", why);
  int rc = encoder_build(&e, &t, job->tokenizer, why, sizeof why) ? diag(d, "%.1000s", why) : 0;
  if (rc == 0) {
    rc = pick_eot(job, &t, &eot, d);
    if (rc == 0) rc = encode_all(job, &e, eot, out, d);
    encoder_free(&e);
  }
  out->token_bytes = t.size > 65536 ? 4 : 2;
  tokenizer_free(&t);
  if (rc) data_text_free(out, job->ninputs);
  return rc;
}

void data_text_free(TextTokens *t, int ninputs) {
  for (int i = 0; t->documents && i < ninputs; i++) idlist_free(&t->documents[i]);
  free(t->documents);
  t->documents = NULL;
}

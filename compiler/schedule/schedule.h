/* schedule.h: a pipeline schedule as data: every pipeline rank's ordered list of actions
 * (forward and backward passes, sends and receives, gradient reductions, the optimizer step),
 * with its generators, lowering, validation, and the text and CSV forms. docs/schedules.md
 * describes all of it. */
#ifndef PLAIT_SCHEDULE_H
#define PLAIT_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/diag.h"

/* What an action does. Its name is PyTorch's: <stage><KIND><microbatch> ("3F12", "2SEND_B5"),
 * <stage>REDUCE_GRAD, <stage>EMBED_REDUCE, and STEP. "Stage" is the global chunk index. */
typedef enum {
  ACTION_F,            /* forward of a stage on a microbatch */
  ACTION_B,            /* backward of a stage on a microbatch (input and weight gradients) */
  ACTION_SEND_F,       /* send the stage's output activation to stage + 1 */
  ACTION_RECV_F,       /* receive the stage's input activation from stage - 1 */
  ACTION_SEND_B,       /* send the gradient of the stage's input to stage - 1 */
  ACTION_RECV_B,       /* receive the gradient of the stage's output from stage + 1 */
  ACTION_REDUCE_GRAD,  /* data-parallel reduction of the stage's weight gradients */
  /* all-reduce of the tied embedding's gradient between the first and last stage */
  ACTION_EMBED_REDUCE,
  ACTION_STEP,         /* the optimizer step */
  ACTION_KINDS
} ActionKind;

typedef struct {
  uint8_t kind;       /* ActionKind */
  uint8_t joined;     /* SEND/RECV: 1 when posted in one group with the action before it */
  int32_t stage;      /* runs on rank stage mod pp; -1 for STEP */
  int32_t microbatch; /* -1 for REDUCE_GRAD, EMBED_REDUCE and STEP */
  int32_t peer;       /* SEND/RECV and EMBED_REDUCE: the rank at the other end; -1 otherwise */
} Action;

typedef struct {
  Action *action;
  int count, capacity;
} ActionList;

typedef struct {
  int pp, vpp; /* pipeline ranks and chunks (stages) per rank */
  int stages;  /* pp·vpp; stage s runs on rank s mod pp, as its local chunk s / pp */
  int microbatches;
  ActionList *rank; /* [pp] */
} Schedule;

/* Sizes a schedule may have: ranks, microbatches, (stage, microbatch) pairs, and actions read
 * from a file. */
enum {
  SCHEDULE_MAX_RANKS = 1 << 14,
  SCHEDULE_MAX_MICROBATCHES = 1 << 20,
  SCHEDULE_MAX_PAIRS = 1 << 24,
  SCHEDULE_MAX_ACTIONS = 1 << 24
};

/* ---- schedule.c: the data and the generators ---- */

/* An empty schedule of pp ranks; -1 with a message when the sizes are out of range. */
int schedule_init(Schedule *s, int pp, int vpp, int microbatches, Diag *d);
void schedule_free(Schedule *s);
void schedule_push(Schedule *s, int rank, Action a);
/* For readers, which learn the sizes last: appends an empty rank to s (pp grows; start from a
 * zeroed Schedule) and returns its index; then sets vpp and microbatches, checked as
 * schedule_init checks them, and every action's peer. */
int schedule_add_rank(Schedule *s);
int schedule_set_sizes(Schedule *s, int vpp, int microbatches, Diag *d);
/* calloc that ends the program with one line when memory runs out. */
void *schedule_alloc(size_t count, size_t size);

/* The compute-only schedule `name` (gpipe, 1f1b, interleaved) for pp ranks, vpp chunks per rank and
 * m microbatches, or the schedule read from the file `name` (text or .csv), which must have those
 * sizes (pp = 0: whatever sizes it has). Returns 0, or -1 with one line in d (an unknown name lists
 * the choices). */
int schedule_generate(const char *name, int pp, int vpp, int microbatches, Schedule *s, Diag *d);
/* per_stage[stage]: the most microbatches the stage has run forward and not yet backward,
 * walking each rank's F and B in order (what its activations must hold at least). */
void schedule_peak_inflight(const Schedule *s, int *per_stage);

int schedule_is_compute(ActionKind kind); /* F, B */
int schedule_is_p2p(ActionKind kind);     /* SEND_F, RECV_F, SEND_B, RECV_B */
int schedule_has_p2p(const Schedule *s);
/* The rank at the other end of a's transfer (or the tied-embedding partner); -1 if it has none. */
int schedule_peer(const Schedule *s, const Action *a);
/* Writes the action's name ("3F12", "0REDUCE_GRAD", "STEP") into buf; returns its length. */
int schedule_action_name(const Action *a, char *buf, size_t size);
/* "F", "SEND_B", "STEP": how schedules spell an action kind. */
const char *schedule_kind_name(ActionKind kind);

/* ---- lower.c: compute-only lists to a plan that runs ---- */

enum {
  LOWER_TIED_EMBEDDING = 1, /* add <stage>EMBED_REDUCE on the first and the last stage's ranks */
  /* every REDUCE_GRAD of a rank after its last backward (--grad-reduce after) */
  LOWER_REDUCE_AFTER = 2
};

/* Where the schedule has no SEND/RECV, adds them: after each compute action, one group holding
 * the send of its output and the receives that the next compute action needs, posted in the
 * order the peer sends them. Where it has no REDUCE_GRAD, EMBED_REDUCE or STEP, adds each
 * stage's REDUCE_GRAD after its last backward (and that backward's group; with
 * LOWER_REDUCE_AFTER, after the rank's last), EMBED_REDUCE if asked, and STEP last. */
void lower_schedule(Schedule *s, int options);

/* ---- validate.c: the checks a plan must pass ---- */

typedef struct {
  int rank, step;     /* where: the rank and the index in its list (step == count: at its end) */
  char message[512];  /* one line: "rank R, step S: ACTION ..." */
  char context[4096]; /* a few lines: the neighbourhood of that step on the ranks involved */
} ScheduleFault;

/* Checks a lowered schedule: every action where it belongs, one F and one B per (stage,
 * microbatch), each in causal order, every send matched by a receive of the same tensor in the
 * same order, the reductions and the step in place, and a dry run with blocking groups that
 * never deadlocks. Returns 0, or -1 with the first fault. */
int validate_schedule(const Schedule *s, ScheduleFault *fault);

/* ---- schedule_read.re and schedule_csv.c: reading; schedule_write.c: writing ---- */

/* Reads a schedule from `text` (len bytes; `name` is the file name used in messages). The text form
 * is described in docs/schedules.md. Errors are "name:line:column: what was expected". */
int schedule_read_text(const char *name, const char *text, size_t len, Schedule *s, Diag *d);
/* Reads one action name ("3F12", "STEP") from [text, text+len) exactly; -1 if it is not one. */
int schedule_read_action(const char *text, size_t len, Action *a);
/* Reads PyTorch's CSV form: one row per rank, one action per cell, empty cells idle. */
int schedule_csv_read(const char *name, const char *text, size_t len, Schedule *s, Diag *d);
/* Reads a file: CSV when its name ends in .csv, the text form otherwise. */
int schedule_read_file(const char *path, Schedule *s, Diag *d);

enum { WRITE_COMPUTE_ONLY = 1 }; /* write only F and B: the plan is their lowering */
/* The text form, one "rank R:" line per rank (wrapped), inside "schedule pp=.. vpp=..
 * microbatches=.. {" and "}". */
void schedule_write_text(const Schedule *s, FILE *f, int options);
void schedule_csv_write(const Schedule *s, FILE *f, int options);

#endif

/* emit_plan.c: the plan's action lists, with their activation slots, as C tables of the
 * generated program. */
#include "emit/emit.h"
#include "escape.h"

static const char *const kind_names[ACTION_KINDS] = {
    [ACTION_F] = "ACT_FORWARD",
    [ACTION_B] = "ACT_BACKWARD",
    [ACTION_SEND_F] = "ACT_SEND_F",
    [ACTION_RECV_F] = "ACT_RECV_F",
    [ACTION_SEND_B] = "ACT_SEND_B",
    [ACTION_RECV_B] = "ACT_RECV_B",
    [ACTION_REDUCE_GRAD] = "ACT_REDUCE_GRAD",
    [ACTION_EMBED_REDUCE] = "ACT_EMBED_REDUCE",
    [ACTION_STEP] = "ACT_STEP",
};

static void rank_table(const Plan *p, int rank, FILE *f) {
  const ActionList *list = &p->schedule.rank[rank];
  fprintf(f, "static const Action rank_%d[] = {\n", rank);
  for (int i = 0; i < list->count; i++) {
    const Action *a = &list->action[i];
    char name[64];
    schedule_action_name(a, name, sizeof name);
    fprintf(f, "  {%s, %d, %d, %d, %d, %d, %d}, /* %s */\n", kind_names[a->kind], a->joined,
            a->stage, a->microbatch, a->peer, p->slots.slot[rank][i], p->slots.neighbour[rank][i],
            name);
  }
  fprintf(f, "};\n");
}

void emit_plan_tables(const Plan *p, FILE *f) {
  char schedule[ESCAPED_SIZE(sizeof p->par.schedule)];
  fprintf(f,
          "/* The plan: each pipeline rank's actions in order (schedule %s, %d microbatches). "
          "Fields: kind, joined\n"
          " * (posted in one group with the action before it), chunk, microbatch, peer rank, the "
          "slot of the\n"
          " * chunk's activations it uses, the slot of the neighbouring chunk on this rank it "
          "reads or writes. */\n",
          escape(ESC_C_COMMENT, p->par.schedule, schedule, sizeof schedule), p->microbatches);
  for (int r = 0; r < p->par.pp; r++) rank_table(p, r, f);
  fprintf(f, "static const Action *const actions[] = {");
  for (int r = 0; r < p->par.pp; r++) fprintf(f, "%srank_%d", r ? ", " : "", r);
  fprintf(f, "};\nstatic const int nactions[] = {");
  for (int r = 0; r < p->par.pp; r++) fprintf(f, "%s%d", r ? ", " : "", p->schedule.rank[r].count);
  fprintf(f,
          "};\n/* Activation slots per chunk: the most microbatches in flight through it at once. "
          "*/\nstatic const int slots[] = {");
  for (int c = 0; c < p->nchunks; c++) fprintf(f, "%s%d", c ? ", " : "", p->slots.per_chunk[c]);
  fprintf(f,
          "};\n/* What the plan holds on each pipeline rank (one TP rank's share): parameter "
          "elements, each with its\n"
          " * gradient and Adam state, and activation elements. */\nstatic const RankFootprint "
          "footprints[] = {");
  for (int r = 0; r < p->par.pp; r++)
    fprintf(f, "%s{%lld, %lld}", r ? ", " : "", (long long)p->ranks[r].params,
            (long long)p->ranks[r].activation_elems);
  fprintf(f, "};\n\n");
}

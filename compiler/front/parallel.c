/* parallel.c: merging, defaulting and checking the parallel layout, field by field of its table. */
#include "front/parallel.h"

#include <stdio.h>
#include <string.h>

#include "front/layout_fields.h"

static int is_set(const LayoutField *field, const Parallel *p) {
  return field->kind == FIELD_NAME ? LAYOUT_NAME(field, p)[0] != 0 : LAYOUT_INT(field, p) != UNSET;
}

void parallel_unset(Parallel *p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < LAYOUT_FIELDS; i++)
    if (layout_fields[i].kind != FIELD_NAME) LAYOUT_INT(&layout_fields[i], p) = UNSET;
}

void parallel_override(Parallel *base, const Parallel *over) {
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *field = &layout_fields[i];
    if (is_set(field, over))
      memcpy((char *)base + field->offset, (const char *)over + field->offset, field->size);
  }
}

void parallel_defaults(Parallel *p) {
  for (int i = 0; i < LAYOUT_FIELDS; i++)
    if (layout_fields[i].standard && !is_set(&layout_fields[i], p))
      layout_field_set(&layout_fields[i], layout_fields[i].standard, p);
  if (p->gbs == UNSET) p->gbs = p->mbs * p->dp;
  if (!p->schedule[0])
    snprintf(p->schedule, sizeof p->schedule, "%s", p->vpp > 1 ? "interleaved" : "1f1b");
}

const char *parallel_recompute_name(int recompute) {
  return layout_field_by_key("recompute")->words[recompute];
}

int parallel_microbatches(const Parallel *p) { return p->gbs / (p->mbs * p->dp); }

int parallel_check(const Parallel *p, Diag *d) {
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *size = &layout_fields[i];
    if (size->kind == FIELD_SIZE && LAYOUT_INT(size, p) < 1)
      return diag(d, "%s %d: sizes must be at least 1", size->flag, LAYOUT_INT(size, p));
  }
  if (p->gbs % (p->mbs * p->dp) != 0)
    return diag(
        d, "global batch %d is not divisible by mbs·dp = %d·%d = %d; choose --gbs a multiple of %d",
        p->gbs, p->mbs, p->dp, p->mbs * p->dp, p->mbs * p->dp);
  if (p->dp % p->ep != 0)
    return diag(d,
                "--ep %d does not divide dp = %d: the experts are spread over data-parallel ranks; "
                "choose --ep a divisor of %d",
                p->ep, p->dp, p->dp);
  if (p->ep > 1 && p->distributed_optimizer == 1)
    return diag(d, "--ep %d with the distributed optimizer is not supported yet; leave out "
                "--distributed-optimizer", p->ep);
  for (int i = 0; i < LAYOUT_FIELDS; i++) {
    const LayoutField *name = &layout_fields[i];
    char use[256], flag[64];
    snprintf(flag, sizeof flag, "%s ", name->flag);
    if (name->kind == FIELD_NAME && name->words[0] &&
        layout_field_word(name->words, LAYOUT_NAME(name, p)) < 0)
      return diag(d, "unknown %s '%s'; use %s", name->key, LAYOUT_NAME(name, p),
                  layout_field_words(name, flag, "", use, sizeof use));
  }
  return 0;
}

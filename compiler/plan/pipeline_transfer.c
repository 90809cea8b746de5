/* pipeline_transfer.c: how an activation or its gradient travels between the pipeline ranks of
 * two chunks: whether they are on different nodes (world ranks laid on nodes in order, the
 * machine's devices per node each, as a launcher places them), and whether it goes scattered
 * over the tensor-parallel ranks and gathered inside the receiving node (Narayanan et al. 2021,
 * §4.1, Figure 9), with what each rank sends and the time it takes. */
#include "plan/plan.h"

#include "cost/kernel_time.h"

/* World rank of (tp_r, dp_r, pp_r) as runtime/comm.h numbers them. */
static int world_rank(const Parallel *par, int tp_r, int dp_r, int pp_r) {
  return tp_r + par->tp * (dp_r + par->dp * pp_r);
}

static int across_nodes(const Plan *p, int from, int to) {
  const Parallel *par = &p->par;
  int per_node = p->machine.devices_per_node >= 1 ? (int)p->machine.devices_per_node : 1;
  for (int dp_r = 0; dp_r < par->dp; dp_r++)
    for (int tp_r = 0; tp_r < par->tp; tp_r++)
      if (world_rank(par, tp_r, dp_r, from) / per_node !=
          world_rank(par, tp_r, dp_r, to) / per_node)
        return 1;
  return 0;
}

/* The tensor-parallel group of a rank lies inside one node: its all-gather runs on NVLink. */
static int tp_group_in_node(const Plan *p) {
  int per_node = p->machine.devices_per_node >= 1 ? (int)p->machine.devices_per_node : 1;
  return p->par.tp <= per_node && per_node % p->par.tp == 0;
}

PipelineTransfer pipeline_transfer(const Plan *p, int from, int to) {
  const Parallel *par = &p->par;
  const Machine *m = &p->machine;
  double whole = (double)p->io_elems * m->activation_bytes;
  PipelineTransfer t = {.across_nodes = across_nodes(p, from, to)};
  t.scattered = t.across_nodes && par->scatter_gather && par->tp > 1 && !par->sequence_parallel &&
                tp_group_in_node(p);
  t.bytes = t.scattered ? whole / par->tp : whole;
  Link link = kernel_p2p_link(m, t.across_nodes ? (int)m->devices_per_node : 0);
  t.seconds = kernel_p2p(&link, t.bytes).seconds;
  if (t.scattered) {
    Link node = kernel_group_link(m, 1, par->tp);
    t.gather_seconds = kernel_collective(&node, RING_ALLGATHER, whole, par->tp).seconds;
    t.seconds += t.gather_seconds;
  }
  return t;
}

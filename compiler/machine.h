/* machine.h: the machines plans are costed on: a small table of peak rate, link bandwidths and latency. */
#ifndef PLAIT_MACHINE_H
#define PLAIT_MACHINE_H

typedef struct {
  const char *name;
  const char *about;
  double flops;          /* peak dense FLOP/s of one device in the training precision */
  double efficiency;     /* the fraction of that peak the time estimates assume GEMMs reach */
  double intra_node_bw;  /* bytes/s one device sends to a peer in its node (NVLink) */
  double inter_node_bw;  /* bytes/s one device sends to a peer in another node (InfiniBand) */
  double latency;        /* seconds per message */
  double memory_bw;      /* bytes/s of the device's memory: the pace of kernels that are not GEMMs */
  int devices_per_node;
  int activation_bytes;  /* bytes per activation element in the training precision */
} Machine;

/* The machine of that name, or NULL. */
const Machine *machine_find(const char *name);
/* "a100, h100, h200, cpu" for messages. */
const char *machine_names(void);

#endif

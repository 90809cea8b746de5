/* main.c: the plait command: dispatches to plan, tune, calibrate, build, check, data, plot,
 * import and export. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ir/diag.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *usage;
} Command;

static const Command commands[] = {
    {"plan", cmd_plan,
     "plait plan MODEL.lua [--tp N --pp N --vpp N --dp N --mbs N --gbs N --schedule NAME|FILE\n"
     "           --recompute none|full|selective --sequence-parallel --partition balanced|uniform "
     "--grad-reduce overlap|after\n"
     "           --set key=value ...]\n"
     "           [--format text|json|dot|trace|svg] [--machine NAME|FILE.lua] [--unit-costs] "
     "[--print PASS] [-o FILE]\n"
     "           [--lua-instructions N] [--lua-memory MB]   (the model file's limits; also for "
     "build, import, export)\n"
     "           [--separate-gemms]   (also for build: GEMMs of one input kept apart)"},
    {"tune", cmd_tune,
     "plait tune MODEL.lua --gpus N [--machine NAME|FILE.lua] [--gbs B] [--set key=value ...] "
     "[--format text|json]\n"
     "           [--tp N --pp N --vpp N --dp N --mbs N --schedule NAME "
     "--recompute none|full|selective --sequence-parallel\n"
     "            --grad-reduce overlap|after]\n"
     "           (the fastest layouts that fit; a layout flag pins its dimension)"},
    {"calibrate", cmd_calibrate,
     "plait calibrate [--ranks N] [--launcher CMD] [--time-limit S] [-o FILE.lua]\n"
     "           (this machine measured as N ranks share it, default one per core, at most 8\n"
     "           a core, threads or the processes CMD starts, within S seconds, default 600:\n"
     "           a machine file for plait plan --machine)"},
    {"build", cmd_build,
     "plait build MODEL.lua [layout flags and --set as for plan] -o DIR [--emit-only] [--double]"},
    {"check", cmd_check,
     "plait check FILE.txt|FILE.csv|gpipe|1f1b|interleaved [--pp N --vpp N --dp N --mbs N --gbs N] "
     "[--unit-costs]\n"
     "           [--format report|text|csv|trace|svg] [-o FILE]"},
    {"data", cmd_data,
     "plait data --bytes FILE... -o OUT.bin [--val-fraction F]   (validation part: OUT.val.bin)\n"
     "           [--format megatron]   (-o OUT writes Megatron-LM's OUT.bin and OUT.idx, a "
     "document a file)\n"
     "plait data --tokenizer T.json [--merges merges.txt] [--eot TOKEN] [--workers N] FILE... "
     "-o OUT.bin ...\n"
     "           (byte-level BPE ids, each file a document after the end-of-text token; "
     "--vocab N refuses\n"
     "           ids not below the model's vocabulary N)"},
    {"plot", cmd_plot,
     "plait plot LOG.json... -o CURVE.svg [--x steps|tokens] [--lr] [--grad-norm]   (training "
     "logs of\n"
     "           train --log-json: loss curves, one colour a run)"},
    {"import", cmd_import,
     "plait import MODEL.lua HF_DIR -o CKPT_DIR [--set key=value ...] [--force]   (a Hugging Face "
     "checkpoint: weights\n"
     "           to start from; --force replaces a full training checkpoint in CKPT_DIR)"},
    {"export", cmd_export,
     "plait export MODEL.lua CKPT_DIR -o HF_DIR [--dtype f32|bf16|f16|f64] [--shard-size 5GB] "
     "[--set key=value ...]"},
};

static int usage(FILE *f) {
  fprintf(f, "plait: compiles a transformer and its parallel layout into a training program\n\n");
  for (unsigned i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "%s\n\n", commands[i].usage);
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return usage(stdout);
  for (unsigned i = 0; i < sizeof commands / sizeof *commands; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc, argv);
  Diag d;
  diag(&d, "unknown command '%s'; see plait help", argv[1]);
  diag_print(d.msg);
  return 2;
}

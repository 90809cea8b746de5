/* evaluate.h: --eval FILE: the model's loss over a token file read in order, no sampling and no
 * training, under any layout. */
#ifndef PLAIT_EVALUATE_H
#define PLAIT_EVALUATE_H

#include "train/batch.h"

/* Collective over all ranks: runs the forward actions of the plan over the file t->eval_file
 * holds (opened by the ranks that read data) in global batches of sequential windows (data.h:
 * data_eval_batch), every token but the first predicted exactly once; masked-LM programs predict
 * the masked positions of windows of the file (data_mlm_eval_batch). The loss is the mean of
 * -log p(target) over the predictions, summed in double; rank 0 prints it with the count and the
 * perplexity (log.h). */
void evaluate_file(Trainer *t, const char *path);

#endif

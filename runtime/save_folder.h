/* save_folder.h: --save's folder, checked before any rank starts, and cleared of what killed saves left. */
#ifndef PLAIT_SAVE_FOLDER_H
#define PLAIT_SAVE_FOLDER_H

#include <stddef.h>

/* Refuses a --save that would overwrite an input or the wrong thing: an existing file, plait's own source
 * tree (a folder holding compiler/, runtime/ and lib/plait/), or the folder --init reads its weights from
 * (init may be NULL; saving over the folder --load resumes from is the normal pattern, the write being
 * atomic). Then creates the folder where it is missing, checks that it takes files, and removes the
 * temporaries of saves killed part way (ckpt_remove_temporaries). Returns 0, or -1 with one line in error
 * naming the cause and the fix. */
int save_folder_prepare(const char *save, const char *init, char *error, size_t len);

#endif

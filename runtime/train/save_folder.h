/* save_folder.h: --save's folder, checked before any rank starts. */
#ifndef PLAIT_SAVE_FOLDER_H
#define PLAIT_SAVE_FOLDER_H

#include <stddef.h>

/* Refuses a --save that would write where it must not (own_folder_check: a file, a link, a
 * folder holding files plait did not write, plait's sources, a .git folder) or over the folder
 * --init reads its weights from (init may be NULL; saving over the folder --load resumes from is
 * the normal pattern, the write being atomic). Changes nothing: the first save makes the folder
 * and its marker. Returns 0, or -1 with one line in error naming the cause and the fix. */
int save_folder_check(const char *save, const char *init, char *error, size_t len);

#endif

/* save_folder.c: --save's folder before training: a checkpoint folder of plait's own (or one it
 * can make) in a place it may write, and not the folder --init reads. */
#include "train/save_folder.h"

#include <sys/stat.h>

#include "own_folder.h"
#include "write_place.h"

/* The same folder, by device and inode (another spelling, a link). */
static int same_folder(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int save_folder_check(const char *save, const char *init, char *error, size_t len) {
  OwnFolder folder;
  int status = own_folder_check(&folder, "--save", save, FOLDER_CHECKPOINT, error, len);
  own_folder_free(&folder);
  if (status == 0 && init && same_folder(save, init))
    return place_refuse(
        error, len,
        "--save %s is the folder --init reads its weights from, and saving would replace "
        "them; give --save another folder",
        save);
  return status;
}

/* test_own_folder.c: where plait may write (write_place.h) and its own folders (own_folder.h): links,
 * devices, pipes and folders refused where a file is meant, a checkout's sources and .git at any depth,
 * a folder holding anything plait did not write refused, its marker, temporaries removed only when they
 * carry the folder's mark and their process has ended, and the list export settles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt/safetensors.h"
#include "ckpt/safetensors_model.h"
#include "own_folder.h"
#include "write_place.h"

static char dir[64] = "/tmp/plait-own-folder-XXXXXX";

static const char *at(const char *name) {
  static char path[4][512];
  static int next;
  char *out = path[next++ % 4];
  snprintf(out, sizeof path[0], "%s/%s", dir, name);
  return out;
}

static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs("the user's\n", f);
  fclose(f);
}

static int refused(int status, const char *error, const char *want) {
  return status == -1 && strstr(error, want) != NULL;
}

static void test_files(void) {
  char error[1024];
  mkdir(at("folder"), 0755);
  mkfifo(at("pipe"), 0644);
  touch(at("target"));
  symlink(at("target"), at("link"));
  CHECK(place_check_file("-o", at("new"), error, sizeof error) == 0, "a new file: %s", error);
  CHECK(place_check_file("-o", at("target"), error, sizeof error) == 0, "a regular file: %s", error);
  const char *paths[] = {"/dev/null", at("pipe"), at("folder"), at("link")};
  const char *kinds[] = {"is a character device", "is a named pipe", "is a directory", "is a symbolic link (to "};
  for (int i = 0; i < 4; i++)
    CHECK(refused(place_check_file("-o", paths[i], error, sizeof error), error, kinds[i]), "%s", error);
  int status = place_check_folder("-o", at("target"), error, sizeof error);
  CHECK(refused(status, error, "is a regular file; give a folder"), "%s", error);
  status = place_check_folder("-o", at("nowhere/x"), error, sizeof error);
  CHECK(refused(status, error, "cannot create the directory"), "%s", error);
}

/* A checkout (compiler/, runtime/, lib/plait/) in the test's folder, and a repository's .git. */
static void test_protected_places(void) {
  char error[1024];
  const char *made[] = {"tree", "tree/compiler", "tree/runtime", "tree/lib", "tree/lib/plait", "tree/build",
                        "tree/tests", "tree/tests/gpu", "tree/tests/gpu/generated", "repo", "repo/.git",
                        "repo/.git/objects"};
  for (size_t i = 0; i < sizeof made / sizeof *made; i++) mkdir(at(made[i]), 0755);
  const char *refused_files[] = {"tree/compiler/x.c", "tree/compiler/new/deeper/x", "tree/plan.txt",
                                 "tree/lib/plait/x", "tree/build/../runtime/x", "repo/.git/objects/x",
                                 "repo/.git/new/x", "tree/docs/x"};
  for (size_t i = 0; i < sizeof refused_files / sizeof *refused_files; i++)
    CHECK(place_check_file("-o", at(refused_files[i]), error, sizeof error) == -1, "%s was taken", refused_files[i]);
  const char *taken_files[] = {"tree/build/plan.txt", "tree/tests/gpu/generated/x", "tree/runs/x", "repo/x",
                               "repo/.gitx/y"};
  for (size_t i = 0; i < sizeof taken_files / sizeof *taken_files; i++)
    CHECK(place_check_file("-o", at(taken_files[i]), error, sizeof error) == 0, "%s: %s", taken_files[i], error);
  const char *folders[] = {"tree", "tree/runtime/new", "repo/.git"};
  const char *whys[] = {"is in plait's own sources", "is in plait's own sources", "is in a .git folder"};
  for (int i = 0; i < 3; i++)
    CHECK(refused(place_check_folder("-o", at(folders[i]), error, sizeof error), error, whys[i]), "%s", error);
  CHECK(place_check_folder("-o", at("tree/build/program"), error, sizeof error) == 0, "build/: %s", error);
  CHECK(place_check_folder("-o", at("tree/runs"), error, sizeof error) == 0, "a folder of one's own: %s", error);
}

static void test_claim_and_foreign_files(void) {
  char error[1024], temp[4400];
  OwnFolder f;
  const char *names[] = {"model.c", "train"};
  CHECK(own_folder_claim(&f, "-o", at("program"), FOLDER_PROGRAM, names, 2, error, sizeof error) == 0, "%s", error);
  CHECK(access(at("program/" OWN_FOLDER_MARKER), F_OK) == 0 && strlen(f.mark) == 16, "no marker");
  own_folder_temp(&f, "model.c", temp, sizeof temp);
  CHECK(strstr(temp, "/model.c.tmp.") && strstr(temp, f.mark) && strcmp(temp + strlen(temp) - 7, "-XXXXXX") == 0,
        "temporary %s", temp);
  own_folder_free(&f);
  touch(at("program/model.c"));
  CHECK(own_folder_check(&f, "-o", at("program"), FOLDER_PROGRAM, error, sizeof error) == 0, "its own file: %s", error);
  own_folder_free(&f);
  CHECK(refused(own_folder_check(&f, "--save", at("program"), FOLDER_CHECKPOINT, error, sizeof error), error,
                "is a program's folder (plait build), not a checkpoint folder"), "%s", error);
  own_folder_free(&f);
  touch(at("program/notes.txt"));
  CHECK(refused(own_folder_check(&f, "-o", at("program"), FOLDER_PROGRAM, error, sizeof error), error,
                "holds notes.txt, which plait did not write there"), "%s", error);
  own_folder_free(&f);
  unlink(at("program/notes.txt"));
  FILE *marker = fopen(at("program/" OWN_FOLDER_MARKER), "w");
  fputs("not a marker\n", marker);
  fclose(marker);
  CHECK(refused(own_folder_check(&f, "-o", at("program"), FOLDER_PROGRAM, error, sizeof error), error,
                "which is not a marker plait wrote"), "%s", error);
  own_folder_free(&f);
}

/* Temporaries: the mark's and an ended process's are removed, a running one's kept; one without the mark
 * is the user's, so the folder is refused and nothing removed. */
static void test_temporaries(void) {
  char error[1024], name[256];
  OwnFolder f;
  const char *names[] = {"model.safetensors"};
  CHECK(own_folder_claim(&f, "--save", at("ckpt"), FOLDER_CHECKPOINT, names, 1, error, sizeof error) == 0, "%s", error);
  snprintf(name, sizeof name, "ckpt/model.safetensors.tmp.%s-999999999-Ab12Cd", f.mark);
  char ended[512], running[512];
  snprintf(ended, sizeof ended, "%s", at(name));
  snprintf(name, sizeof name, "ckpt/model.safetensors.tmp.%s-%ld-Ab12Cd", f.mark, (long)getppid());
  snprintf(running, sizeof running, "%s", at(name));
  touch(ended);
  touch(running);
  own_folder_free(&f);
  CHECK(own_folder_claim(&f, "--save", at("ckpt"), FOLDER_CHECKPOINT, names, 1, error, sizeof error) == 0, "%s", error);
  CHECK(access(ended, F_OK) != 0 && access(running, F_OK) == 0, "ended kept or running removed");
  own_folder_free(&f);
  touch(at("ckpt/model.safetensors.tmp.backup"));
  CHECK(refused(own_folder_claim(&f, "--save", at("ckpt"), FOLDER_CHECKPOINT, names, 1, error, sizeof error), error,
                "holds model.safetensors.tmp.backup, which plait did not write"), "%s", error);
  CHECK(access(at("ckpt/model.safetensors.tmp.backup"), F_OK) == 0 && access(running, F_OK) == 0, "a file removed");
  own_folder_free(&f);
}

/* What export settles: the files listed before and not now are removed, nothing else. */
static void test_settle(void) {
  char error[1024];
  OwnFolder f;
  const char *first[] = {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  const char *second[] = {"config.json", "model.safetensors"};
  CHECK(own_folder_claim(&f, "-o", at("hf"), FOLDER_HF, first, 3, error, sizeof error) == 0, "%s", error);
  for (int i = 0; i < 3; i++) {
    char name[128];
    snprintf(name, sizeof name, "hf/%s", first[i]);
    touch(at(name));
  }
  own_folder_free(&f);
  CHECK(own_folder_claim(&f, "-o", at("hf"), FOLDER_HF, second, 2, error, sizeof error) == 0, "%s", error);
  touch(at("hf/model.safetensors"));
  CHECK(own_folder_settle(&f, second, 2, error, sizeof error) == 0, "%s", error);
  CHECK(access(at("hf/model-00001-of-00002.safetensors"), F_OK) != 0 && access(at("hf/config.json"), F_OK) == 0 &&
            access(at("hf/model.safetensors"), F_OK) == 0, "settled wrongly");
  own_folder_free(&f);
  CHECK(own_folder_check(&f, "-o", at("hf"), FOLDER_HF, error, sizeof error) == 0 && f.nfiles == 2, "%s", error);
  own_folder_free(&f);
}

/* A checkpoint folder from before markers: plait's checkpoint alone is taken as plait's, a program's
 * folder is not, and another model.safetensors is the user's. */
static void test_unmarked_checkpoint(void) {
  char error[1024];
  OwnFolder f;
  CkptWriter w;
  const CkptMeta meta[] = {{CKPT_FORMAT_KEY, CKPT_FORMAT}};
  mkdir(at("old"), 0755);
  CHECK(ckpt_save(&w, at("old/model.safetensors"), NULL, NULL, 0, meta, 1) == 0, "save: %s", w.error);
  CHECK(own_folder_check(&f, "--save", at("old"), FOLDER_CHECKPOINT, error, sizeof error) == 0 && f.nfiles == 1, "%s",
        error);
  own_folder_free(&f);
  CHECK(own_folder_check(&f, "-o", at("old"), FOLDER_PROGRAM, error, sizeof error) == -1, "a program's folder took it");
  own_folder_free(&f);
  mkdir(at("foreign"), 0755);
  touch(at("foreign/model.safetensors"));
  CHECK(refused(own_folder_check(&f, "--save", at("foreign"), FOLDER_CHECKPOINT, error, sizeof error), error,
                "holds model.safetensors, which plait did not write"), "%s", error);
  own_folder_free(&f);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  RUN(test_files);
  RUN(test_protected_places);
  RUN(test_claim_and_foreign_files);
  RUN(test_temporaries);
  RUN(test_settle);
  RUN(test_unmarked_checkpoint);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  TEST_EXIT();
}

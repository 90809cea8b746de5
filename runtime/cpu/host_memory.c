/* host_memory.c: how much memory this process can still take, before the plan is allocated: the least of
 * the machine's available memory, the room its address-space and data-size limits leave (these count
 * what is mapped, touched or not: OpenBLAS's buffers too), and the room the memory limit of its cgroup
 * (and of each cgroup above it) leaves. */
#include "cpu.h"

#include <sys/resource.h>

/* The number after `key` in a "key value" line of a /proc or /sys file, times `unit`; -1 when absent. */
static double file_value(const char *path, const char *key, double unit) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  double value = -1;
  size_t n = strlen(key);
  while (value < 0 && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) value = strtod(line + n, NULL) * unit;
  fclose(f);
  return value;
}

/* A file holding one number ("max", or a v1 limit of 2^62 and more: no limit, -1); -1 when unreadable. */
static double file_number(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char text[64] = "";
  int read = fgets(text, sizeof text, f) != NULL;
  fclose(f);
  char *end;
  double value = read ? strtod(text, &end) : -1;
  return !read || end == text || value >= 0x1p62 ? -1 : value;
}

/* Keeps the smaller room, and what bounds it. */
static void keep_least(double *room, char *what, size_t size, double candidate, const char *candidate_what) {
  if (candidate < 0 || (*room >= 0 && candidate >= *room)) return;
  *room = candidate;
  snprintf(what, size, "%s", candidate_what);
}

/* The room a limit of mapped memory leaves: the limit less what the process maps already (status_key of
 * /proc/self/status, in kB) and what it will map besides the plan (`besides`, described in `besides_what`). */
static void limit_room(int resource, const char *status_key, const char *limit_name, double besides,
                       const char *besides_what, double *room, char *what, size_t size) {
  struct rlimit limit;
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  double used = file_value("/proc/self/status", status_key, 1024), left = (double)limit.rlim_cur - besides;
  char name[512];
  left -= used > 0 ? used : 0;
  snprintf(name, sizeof name, "the room %s leaves beside %s", limit_name, besides_what);
  keep_least(room, what, size, left > 0 ? left : 0, name);
}

/* The files of a cgroup's memory limit, its usage and its page cache (which it can give back). */
typedef struct {
  const char *root, *limit, *usage, *cache_key;
} CgroupFiles;

static const CgroupFiles cgroup_v2[] = {{"/sys/fs/cgroup", "memory.max", "memory.current", "file "},
                                        {"/sys/fs/cgroup/unified", "memory.max", "memory.current", "file "}};
static const CgroupFiles cgroup_v1 = {"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
                                      "total_cache "};

/* One cgroup's room: its limit less its usage, the page cache (which it gives back) counted as free. */
static void cgroup_level_room(const CgroupFiles *files, const char *folder, double *room, char *what, size_t size) {
  char limit_file[1100], usage_file[1100], stat_file[1100], name[1200];
  snprintf(limit_file, sizeof limit_file, "%s/%s", folder, files->limit);
  double limit = file_number(limit_file);
  if (limit < 0) return;
  snprintf(usage_file, sizeof usage_file, "%s/%s", folder, files->usage);
  snprintf(stat_file, sizeof stat_file, "%s/memory.stat", folder);
  double usage = file_number(usage_file), cache = file_value(stat_file, files->cache_key, 1);
  double left = limit - (usage > 0 ? usage : 0) + (cache > 0 ? cache : 0);
  snprintf(name, sizeof name, "the room its cgroup's memory limit (%s) leaves", limit_file);
  keep_least(room, what, size, left < 0 ? 0 : left > limit ? limit : left, name);
}

/* The cgroup at `path` under files->root, and every one above it up to the root. */
static void cgroup_room(const CgroupFiles *files, const char *path, double *room, char *what, size_t size) {
  char folder[1024];
  size_t root = strlen(files->root);
  snprintf(folder, sizeof folder, "%s%s", files->root, path);
  for (;;) {
    cgroup_level_room(files, folder, room, what, size);
    char *slash = strrchr(folder + root, '/');
    if (!slash) return;
    *slash = 0;
  }
}

/* /proc/self/cgroup: "0::/path" for cgroup v2, "N:...memory...:/path" for v1's memory controller. */
static void cgroups_room(double *room, char *what, size_t size) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return;
  char line[1100];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *controllers = strchr(line, ':'), *path = controllers ? strchr(controllers + 1, ':') : NULL;
    if (!path) continue;
    *path++ = 0;
    controllers++;
    if (strcmp(line, "0") == 0 && !*controllers)
      for (size_t i = 0; i < sizeof cgroup_v2 / sizeof *cgroup_v2; i++) cgroup_room(&cgroup_v2[i], path, room, what, size);
    else if (strstr(controllers, "memory"))
      cgroup_room(&cgroup_v1, path, room, what, size);
  }
  fclose(f);
}

double cpu_memory_available(double mapped_besides, const char *besides_what, char *what, size_t size) {
  double room = -1;
  snprintf(what, size, "memory");
  keep_least(&room, what, size, file_value("/proc/meminfo", "MemAvailable:", 1024),
             "the machine's available memory (MemAvailable)");
  limit_room(RLIMIT_AS, "VmSize:", "its address-space limit (ulimit -v)", mapped_besides, besides_what, &room, what,
             size);
  limit_room(RLIMIT_DATA, "VmData:", "its data-size limit (ulimit -d)", mapped_besides, besides_what, &room, what,
             size);
  cgroups_room(&room, what, size);
  return room;
}

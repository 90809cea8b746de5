/* machine.c: reading a machine file (Lua, evaluated with no libraries, text only) into a
 * Machine, every field checked: present, a number, within the bounds of what a machine can be
 * (latencies and overheads may be zero), so that no rate makes a plan's times infinite, NaN or
 * negative. */
#include "cost/machine.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "infile.h"
#include "front/lua_limits.h"
#include "front/lualib.h"

enum { MACHINE_INSTRUCTIONS = 10000000, MACHINE_MEMORY_MB = 16 };

/* What a field may be: from lo to hi (0 too where zero), a whole number where whole. The bounds are
 * physical, generous both ways: past them a number is a typo or a hostile file, whose times would
 * be infinite, NaN or negative. */
typedef struct {
  double lo, hi;
  int zero, whole;
} Bound;

static const Bound RATE = {1e3, 1e18, 0, 0};        /* FLOP/s, special functions/s */
static const Bound SPECIAL = {1e3, 1e18, 1, 0};     /* special_rate: 0 where memory bounds them */
static const Bound SHARE = {1e-6, 1, 0, 0};         /* an efficiency: a share of a peak */
static const Bound DROPOUT = {0, 0.999, 1, 0};
static const Bound BANDWIDTH = {1e3, 1e16, 0, 0};   /* bytes/s */
static const Bound BYTES = {1e6, 1e16, 0, 0};       /* a device's memory */
static const Bound SECONDS = {0, 10, 1, 0};         /* latencies, overheads */
static const Bound UNITS = {1, 1e6, 0, 1};          /* SMs or cores */
static const Bound DEVICES = {1, 1 << 20, 0, 1};    /* per node */
static const Bound NICS = {1, 1024, 0, 1};
static const Bound TILE = {1, 65536, 0, 1};
static const Bound FLOPS = {1, 1e21, 0, 0};         /* of one measured call */
static const Bound SIZE = {1, 1e9, 0, 0};           /* a measured GEMM's M, N or K */
static const Bound HEAD = {1, 65536, 0, 0};         /* a measured head size */

typedef struct {
  const char *section, *key; /* device.memory_bandwidth */
  size_t offset;             /* of the double in Machine */
  const Bound *bound;
  const char *what;          /* for the message naming a missing field */
} Field;

#define F(section, key, member, bound, what) {section, key, offsetof(Machine, member), &bound, what}
static const Field fields[] = {
    F("device", "gemm_efficiency", gemm_efficiency, SHARE,
      "the largest measured GEMM rate over peak, at most 1"),
    F("device", "memory_bandwidth", memory_bandwidth, BANDWIDTH, "bytes/s of the device's memory"),
    F("device", "memory_efficiency", memory_efficiency, SHARE,
      "the share of that bandwidth streaming kernels reach"),
    F("device", "memory", memory_bytes, BYTES, "bytes of device memory"),
    F("device", "compute_units", compute_units, UNITS, "SMs or cores"),
    F("device", "launch_overhead", launch_overhead, SECONDS, "seconds per kernel launch"),
    F("device", "special_rate", special_rate, SPECIAL,
      "special functions (tanh, exp, erf, ...) per second; 0 where memory bounds them"),
    F("node", "devices", devices_per_node, DEVICES, "devices per node"),
    F("node", "link_bandwidth", link_bandwidth, BANDWIDTH,
      "bytes/s of a collective's bus bandwidth inside a node"),
    F("node", "link_latency", link_latency, SECONDS, "seconds per ring step inside a node"),
    F("network", "nics", nics, NICS, "network adapters per node"),
    F("network", "nic_bandwidth", nic_bandwidth, BANDWIDTH, "bytes/s of one network adapter"),
    F("network", "nic_latency", nic_latency, SECONDS, "seconds per ring step between nodes"),
};
#undef F

/* The value at the top of the stack as a number for `path` within its bound; pops it. */
static int take_number(lua_State *L, const char *origin, const char *path, const char *what,
                       const Bound *b, double *out, Diag *d) {
  int isnum;
  double v = lua_tonumberx(L, -1, &isnum);
  int missing = lua_isnil(L, -1);
  lua_pop(L, 1);
  if (missing)
    return diag(d, "machine %s: %s is missing (%s); add it to the machine file", origin, path,
                what);
  if (!isnum) return diag(d, "machine %s: %s must be a number (%s)", origin, path, what);
  if (!((v >= b->lo && v <= b->hi) || (b->zero && v == 0)))
    return diag(d, "machine %s: %s is %g; it must be %sfrom %g to %g (%s)", origin, path, v,
                b->zero ? "0 or " : "", b->lo, b->hi, what);
  if (b->whole && v != (double)(long long)v)
    return diag(d, "machine %s: %s is %g; it must be a whole number", origin, path, v);
  *out = v;
  return 0;
}

/* Pushes t[section] (a table) or reports it missing. */
static int section_table(lua_State *L, int t, const char *origin, const char *section, Diag *d) {
  lua_getfield(L, t, section);
  if (lua_istable(L, -1)) return 0;
  lua_pop(L, 1);
  return diag(
      d,
      "machine %s: the table %s is missing; a machine file returns { device = {...}, node = {...}, "
      "network = {...}, ... } (see docs/cost-model.md)",
      origin, section);
}

static int read_field(lua_State *L, int t, const char *origin, const Field *f, Machine *m,
                      Diag *d) {
  if (section_table(L, t, origin, f->section, d)) return -1;
  lua_getfield(L, -1, f->key);
  char path[96];
  snprintf(path, sizeof path, "%s.%s", f->section, f->key);
  double *out = (double *)((char *)m + f->offset);
  int status = take_number(L, origin, path, f->what, f->bound, out, d);
  lua_pop(L, 1);
  return status;
}

static int read_string(lua_State *L, int t, const char *origin, const char *key, char *out,
                       size_t len, Diag *d) {
  lua_getfield(L, t, key);
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (s) snprintf(out, len, "%s", s);
  lua_pop(L, 1);
  return s ? 0
           : diag(d, "machine %s: %s is missing (a string); add it to the machine file", origin,
                  key);
}

/* The machine's name, which plans print: plain, as a model's names are. */
static int read_name(lua_State *L, int t, const char *origin, Machine *m, Diag *d) {
  if (read_string(L, t, origin, "name", m->name, sizeof m->name, d)) return -1;
  lua_getfield(L, t, "name");
  char shown[120];
  int plain = escape_plain_name(lua_tostring(L, -1), sizeof m->name - 1);
  if (!plain) escape(ESC_TEXT, lua_tostring(L, -1), shown, sizeof shown);
  lua_pop(L, 1);
  return plain ? 0
               : diag(d,
                      "machine %s: name '%s' is not a plain name: give it 1 to %d ASCII letters, "
                      "digits, "
                      "'_', '.' or '-'",
                      origin, shown, (int)sizeof m->name - 1);
}

/* precision names the training precision; device.flops[precision] is its peak. */
static int read_precision(lua_State *L, int t, const char *origin, Machine *m, Diag *d) {
  char precision[16];
  if (read_string(L, t, origin, "precision", precision, sizeof precision, d)) return -1;
  if (strcmp(precision, "bf16") && strcmp(precision, "fp16") && strcmp(precision, "fp32"))
    return diag(d, "machine %s: precision \"%s\" is not one plait trains in (bf16, fp16, fp32)",
                origin, precision);
  m->activation_bytes = strcmp(precision, "fp32") == 0 ? 4 : 2;
  m->bf16 = strcmp(precision, "bf16") == 0;
  if (section_table(L, t, origin, "device", d)) return -1;
  lua_getfield(L, -1, "flops");
  int ok = lua_istable(L, -1);
  if (ok) lua_getfield(L, -1, precision);
  else lua_pushnil(L);
  char path[64];
  snprintf(path, sizeof path, "device.flops.%s", precision);
  int status = take_number(L, origin, path, "dense FLOP/s of one device in the training precision",
                           &RATE, &m->peak_flops, d);
  lua_pop(L, 2);
  return status;
}

static int read_tile(lua_State *L, int t, const char *origin, Machine *m, Diag *d) {
  if (section_table(L, t, origin, "device", d)) return -1;
  lua_getfield(L, -1, "gemm_tile");
  int status = lua_istable(L, -1) ? 0 : -1;
  if (status == 0) {
    lua_geti(L, -1, 1);
    status = take_number(L, origin, "device.gemm_tile[1]", "rows of a GEMM output tile", &TILE,
                         &m->gemm_tile_m, d);
    lua_geti(L, -1, 2);
    if (status == 0)
      status = take_number(L, origin, "device.gemm_tile[2]", "columns of a GEMM output tile", &TILE,
                           &m->gemm_tile_n, d);
    else lua_pop(L, 1);
  } else {
    diag(d, "machine %s: device.gemm_tile is missing ({rows, columns} of a GEMM output tile)",
         origin);
  }
  lua_pop(L, 2);
  return status;
}

/* One { FLOPs, FLOP/s } pair of a rate curve, at the top of the stack (popped). */
static int read_rate_point(lua_State *L, const char *origin, const char *name, int i, void *into,
                           Diag *d) {
  RateCurve *c = into;
  char path[96];
  snprintf(path, sizeof path, "%s[%d]", name, i);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return diag(d, "machine %s: %s must be a pair { FLOPs, FLOP/s }", origin, path);
  }
  lua_geti(L, -1, 1);
  int status =
      take_number(L, origin, path, "the FLOPs of a measured call", &FLOPS, &c->flops[i - 1], d);
  lua_geti(L, -1, 2);
  if (status == 0)
    status = take_number(L, origin, path, "the FLOP/s it ran at", &RATE, &c->rate[i - 1], d);
  else lua_pop(L, 1);
  lua_pop(L, 1);
  if (status == 0 && i > 1 && c->flops[i - 1] <= c->flops[i - 2])
    return diag(
        d, "machine %s: %s has %g FLOPs, not more than the pair before it; list the pairs by FLOPs",
        origin, path, c->flops[i - 1]);
  return status;
}

typedef int (*EntryReader)(lua_State *L, const char *origin, const char *name, int i, void *into,
                           Diag *d);

/* An optional list t[key] of a calibrated machine's measurements: 1 to `most` entries, each read
 * (and popped) by `read`; the count read into *count, 0 when absent. `what` names an entry's
 * form. */
static int read_entries(lua_State *L, int t, const char *origin, const char *name, const char *key,
                        int most, const char *what, EntryReader read, void *into, int *count,
                        Diag *d) {
  lua_getfield(L, t, key);
  int status = 0;
  if (!lua_isnil(L, -1)) {
    lua_Integer n = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
    if (n < 1 || n > most)
      status = diag(d, "machine %s: %s must list 1 to %d %s", origin, name, most, what);
    for (int i = 1; status == 0 && i <= n; i++) {
      lua_geti(L, -1, i);
      status = read(L, origin, name, i, into, d);
    }
    *count = status == 0 ? (int)n : 0;
  }
  lua_pop(L, 1);
  return status;
}

/* The table at the top of the stack (popped) as `count` numbers into field[], each within its
 * bound; `form` is what the message says it must be. */
static int read_tuple(lua_State *L, const char *origin, const char *path, int count,
                      const char *const *what, const Bound *const *bound, double *const *field,
                      const char *form, Diag *d) {
  int status = lua_istable(L, -1) && (int)lua_rawlen(L, -1) == count
                   ? 0
                   : diag(d, "machine %s: %s must be %s", origin, path, form);
  for (int j = 0; status == 0 && j < count; j++) {
    lua_geti(L, -1, j + 1);
    status = take_number(L, origin, path, what[j], bound[j], field[j], d);
  }
  lua_pop(L, 1);
  return status;
}

/* One { M, N, K, FLOP/s } of device.gemm_rates, at the top of the stack (popped). */
static int read_gemm_shape(lua_State *L, const char *origin, const char *name, int i, void *into,
                           Diag *d) {
  static const char *const what[] = {"the rows M of a measured GEMM", "its columns N",
                                     "its inner size K", "the FLOP/s it ran at"};
  static const Bound *const bound[] = {&SIZE, &SIZE, &SIZE, &RATE};
  GemmRates *g = into;
  double *const field[] = {&g->m[i - 1], &g->n[i - 1], &g->k[i - 1], &g->rate[i - 1]};
  char path[64];
  snprintf(path, sizeof path, "%s[%d]", name, i);
  return read_tuple(L, origin, path, 4, what, bound, field,
                    "{ M, N, K, FLOP/s } (run plait calibrate again)", d);
}

/* device.gemm_rates (optional): GEMM calls' rates measured at shapes. */
static int read_gemm_rates(lua_State *L, int t, const char *origin, Machine *m, Diag *d) {
  if (section_table(L, t, origin, "device", d)) return -1;
  int status = read_entries(L, lua_gettop(L), origin, "device.gemm_rates", "gemm_rates",
                            MACHINE_GEMM_SHAPES, "shapes { M, N, K, FLOP/s }", read_gemm_shape,
                            &m->gemm_rates, &m->gemm_rates.count, d);
  lua_pop(L, 1);
  return status;
}

/* One { head size, forward FLOP/s, backward FLOP/s } of an attention kernel's rates, at the top
 * of the stack (popped); head sizes increasing. */
static int read_head_rate(lua_State *L, const char *origin, const char *name, int i, void *into,
                          Diag *d) {
  static const char *const what[] = {"the head size measured",
                                     "the forward's FLOP/s over the scores it computes",
                                     "the backward's FLOP/s, counted as twice the forward's FLOPs"};
  static const Bound *const bound[] = {&HEAD, &RATE, &RATE};
  AttentionRates *r = into;
  double *const field[] = {&r->head_dim[i - 1], &r->forward[i - 1], &r->backward[i - 1]};
  char path[96];
  snprintf(path, sizeof path, "%s[%d]", name, i);
  if (read_tuple(L, origin, path, 3, what, bound, field,
                 "{ head size, forward FLOP/s, backward FLOP/s }", d))
    return -1;
  if (i > 1 && r->head_dim[i - 1] <= r->head_dim[i - 2])
    return diag(d,
                "machine %s: %s has head size %g, not more than the entry before it; list them by "
                "head size",
                origin, path, r->head_dim[i - 1]);
  return 0;
}

/* kernels.cudnn_attention or kernels.plait_attention: required where kernels.attention runs that
 * kernel. */
static int read_attention_rates(lua_State *L, int k, const char *origin, const char *key,
                                int required, const char *attention, AttentionRates *r, Diag *d) {
  char name[64];
  snprintf(name, sizeof name, "kernels.%s", key);
  if (read_entries(L, k, origin, name, key, MACHINE_HEAD_SIZES,
                   "entries { head size, forward FLOP/s, backward FLOP/s }", read_head_rate, r,
                   &r->count, d))
    return -1;
  if (r->count == 0 && required)
    return diag(
        d,
        "machine %s: %s is missing ({ head size, forward FLOP/s, backward FLOP/s } of the kernel, "
        "measured); kernels.attention \"%s\" times attention on it",
        origin, name, attention);
  return 0;
}

const char *const memory_kind_names[MEMORY_KINDS] = {
    "elementwise", "norm", "bias_sums", "embedding", "xent", "optimizer", "grad_norm"};

static int memory_kind_named(const char *name) {
  for (int i = 0; i < MEMORY_KINDS; i++)
    if (strcmp(name, memory_kind_names[i]) == 0) return i;
  return -1;
}

/* One kind = share of kernels.memory_efficiency, its key at -2 and value at -1 (the value
 * popped). */
static int read_kind_efficiency(lua_State *L, const char *origin, Machine *m, Diag *d) {
  const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
  int kind = memory_kind_named(key);
  if (kind < 0) {
    lua_pop(L, 1);
    return diag(d,
                "machine %s: kernels.memory_efficiency names a kind \"%s\"; the kinds are "
                "elementwise, norm, "
                "bias_sums, embedding, xent, optimizer, grad_norm",
                origin, key);
  }
  char path[96];
  snprintf(path, sizeof path, "kernels.memory_efficiency.%s", key);
  double *share = &m->kind_efficiency[kind];
  return take_number(L, origin, path, "the share of the copy rate the kind's kernels reach", &SHARE,
                     share, d);
}

/* kernels.memory_efficiency (optional): { kind = share of the copy rate, ... }; kinds not named
 * get 1. */
static int read_kind_efficiencies(lua_State *L, int k, const char *origin, Machine *m, Diag *d) {
  for (int i = 0; i < MEMORY_KINDS; i++) m->kind_efficiency[i] = 1;
  lua_getfield(L, k, "memory_efficiency");
  int status = 0;
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2))
      if ((status = read_kind_efficiency(L, origin, m, d))) {
        lua_pop(L, 1);
        break;
      }
  } else if (!lua_isnil(L, -1)) {
    status = diag(d, "machine %s: kernels.memory_efficiency must be a table { kind = share, ... }",
                  origin);
  }
  lua_pop(L, 1);
  return status;
}

static const char *const attention_names[] = {"materialised", "fused", "cudnn", "plait"};

static int read_attention_software(lua_State *L, int k, const char *origin, Machine *m, Diag *d) {
  char attention[32];
  if (read_string(L, k, origin, "attention", attention, sizeof attention, d)) return -1;
  for (int i = 0; i < (int)(sizeof attention_names / sizeof *attention_names); i++)
    if (strcmp(attention, attention_names[i]) == 0) {
      m->attention = (AttentionSoftware)i;
      return 0;
    }
  return diag(d,
              "machine %s: kernels.attention is \"%s\"; it must be \"materialised\", \"fused\", "
              "\"cudnn\" or "
              "\"plait\"",
              origin, attention);
}

/* kernels.attention (materialised, fused, cudnn or plait) and kernels.attention_dropout;
 * optional: kernels.attention_rates (fused), the rates of cuDNN's and plait's attention kernels
 * (required by the software that runs them) and the memory-bound kinds' efficiencies. */
static int read_kernels(lua_State *L, int t, const char *origin, Machine *m, Diag *d) {
  if (section_table(L, t, origin, "kernels", d)) return -1;
  int k = lua_gettop(L);
  int status = read_attention_software(L, k, origin, m, d);
  if (status == 0) {
    lua_getfield(L, k, "attention_dropout");
    status = take_number(L, origin, "kernels.attention_dropout",
                         "the dropout rate on the attention scores", &DROPOUT,
                         &m->attention_dropout, d);
  }
  if (status == 0)
    status = read_entries(L, k, origin, "kernels.attention_rates", "attention_rates",
                          MACHINE_RATE_POINTS, "pairs { FLOPs, FLOP/s }", read_rate_point,
                          &m->attention_rates, &m->attention_rates.n, d);
  const char *software = attention_names[m->attention];
  if (status == 0)
    status = read_attention_rates(L, k, origin, "cudnn_attention", m->attention == ATTENTION_CUDNN,
                                  software, &m->cudnn_attention, d);
  if (status == 0)
    status = read_attention_rates(L, k, origin, "plait_attention", m->attention >= ATTENTION_CUDNN,
                                  software, &m->plait_attention, d);
  if (status == 0) status = read_kind_efficiencies(L, k, origin, m, d);
  lua_pop(L, 1);
  return status;
}

static int read_machine(lua_State *L, const char *origin, Machine *m, Diag *d) {
  int t = lua_gettop(L);
  if (!lua_istable(L, t))
    return diag(d, "machine %s: the file must return a table (see docs/cost-model.md)", origin);
  if (read_name(L, t, origin, m, d) ||
      read_string(L, t, origin, "about", m->about, sizeof m->about, d) ||
      read_precision(L, t, origin, m, d) || read_tile(L, t, origin, m, d) ||
      read_gemm_rates(L, t, origin, m, d) || read_kernels(L, t, origin, m, d))
    return -1;
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    if (read_field(L, t, origin, &fields[i], m, d)) return -1;
  return 0;
}

/* Runs the chunk with an empty environment and reads what it returns. */
static int evaluate(const char *text, size_t len, const char *chunk, const char *origin, Machine *m,
                    Diag *d) {
  LuaLimits limits;
  lua_State *L = lua_limits_state(&limits, MACHINE_INSTRUCTIONS, MACHINE_MEMORY_MB);
  if (!L) return diag(d, "out of memory reading machine %s", origin);
  limits.what = "the machine file", limits.raise = "; a machine file is a table of numbers";
  int status = luaL_loadbufferx(L, text, len, chunk, "t");
  if (status == LUA_OK) {
    lua_newtable(L);
    lua_setupvalue(L, -2, 1);
    status = lua_pcall(L, 0, 1, 0);
  }
  if (status != LUA_OK && limits.memory.exceeded)
    diag(d,
         "machine %s: the machine file used more than %d MB of Lua memory; a machine file is a "
         "table of numbers",
         origin, MACHINE_MEMORY_MB);
  else if (status != LUA_OK) diag(d, "machine %s: %s", origin, lua_tostring(L, -1));
  else status = read_machine(L, origin, m, d);
  lua_close(L);
  return status ? -1 : 0;
}

static const LuaSource *builtin(const char *name) {
  char module[96];
  snprintf(module, sizeof module, "plait.machines.%s", name);
  for (int i = 0; plait_lua_sources[i].module; i++)
    if (strcmp(plait_lua_sources[i].module, module) == 0) return &plait_lua_sources[i];
  return NULL;
}

static void builtin_names(char *buf, size_t len) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; plait_lua_sources[i].module && at < len; i++)
    if (strncmp(plait_lua_sources[i].module, "plait.machines.", 15) == 0)
      at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "",
                             plait_lua_sources[i].module + 15);
}

static int load_file(const char *path, Machine *m, Diag *d) {
  char why[512];
  FILE *f = infile_open(path, why, sizeof why);
  if (!f)
    return diag(d,
                "--machine %s: cannot read the machine file: %s; give a machine file (a .lua file) "
                "or a built-in "
                "name",
                path, why);
  char *text = malloc(1 << 16);
  size_t len = fread(text, 1, 1 << 16, f);
  int too_long = !feof(f);
  fclose(f);
  char chunk[300];
  snprintf(chunk, sizeof chunk, "@%s", path);
  int status = too_long ? diag(d, "--machine %s: larger than 64 KB; is it a machine file?", path)
                        : evaluate(text, len, chunk, path, m, d);
  free(text);
  return status;
}

static int is_path(const char *name) {
  size_t n = strlen(name);
  return strchr(name, '/') || (n > 4 && strcmp(name + n - 4, ".lua") == 0);
}

int machine_load(const char *name, Machine *m, Diag *d) {
  memset(m, 0, sizeof *m);
  if (is_path(name)) {
    snprintf(m->origin, sizeof m->origin, "%s", name);
    return load_file(name, m, d);
  }
  const LuaSource *s = builtin(name);
  if (!s) {
    char names[128];
    builtin_names(names, sizeof names);
    return diag(d, "--machine %s: unknown machine (built-in: %s; or a machine file, NAME.lua)",
                name, names);
  }
  snprintf(m->origin, sizeof m->origin, "built-in");
  char chunk[128];
  snprintf(chunk, sizeof chunk, "@%s", s->path);
  return evaluate(s->text, s->len, chunk, name, m, d);
}

// main.cpp: attention.cu's tiled kernels (forward, prep, dQ, dK/dV), run in emulation (emu.h),
// against plait's CPU attention: 41 shapes x 5 outputs (out, lse, dq, dk, dv), relative L2 error
// at most 1e-2 each. `main N` runs case N alone. C++17, as emu.h says why.
#include "emu.h"

#include "attention_tiles.inc" /* attention.cu from its tiles on (the make target cuts it) */

extern "C" {
#include "device.h"
#include "kernels.h"
}

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}
static float round_bf(float x) { return ld(st(x)); }

struct Tensor {
  std::vector<float> f;
  std::vector<bf16> b;
  Tensor(int64_t n, float lo, float hi) : f(n), b(n) {
    for (int64_t i = 0; i < n; i++)
      f[i] = round_bf(uniform(lo, hi)), b[i] = st(f[i]);
  }
};

static int failures;

static void compare(const char *what, const char *tag, const float *ref,
                    const std::vector<float> &got, double tol) {
  double diff = 0, norm = 0;
  int64_t nan = 0;
  for (size_t i = 0; i < got.size(); i++) {
    if (std::isnan(got[i])) nan++;
    diff += (got[i] - ref[i]) * (double)(got[i] - ref[i]), norm += (double)ref[i] * ref[i];
  }
  double rel = norm > 1e-12 * (double)got.size() ? sqrt(diff / norm) : sqrt(diff);
  if (getenv("EMU_VERBOSE")) printf("  diff %g norm %g\n", diff, norm);
  bool ok = nan == 0 && rel <= tol;
  if (!ok) failures++;
  printf("%s %-4s %s rel %.2e%s\n", ok ? "PASS" : "FAIL", what, tag, rel, nan ? " NaN" : "");
}

template <int D, bool MOD> static void run_forward(const Attn &a) {
  constexpr int BR = 128;
  unsigned blocks = (unsigned)(a.B * a.Hq * ((a.T + BR - 1) / BR));
  emu_launch(blocks, 128, [&] { attention_forward_kernel<D, MOD>(a); });
}

template <int D, bool MOD> static void run_backward(const Attn &a) {
  constexpr int BR = 64 * Plan<D>::DQ_MT, KEYS = 64;
  emu_launch((unsigned)(a.B * a.Hq * ((a.T + BR - 1) / BR)), 128,
             [&] { attention_dq_kernel<D, MOD>(a); });
  emu_launch((unsigned)(a.B * a.Hkv * ((a.T + KEYS - 1) / KEYS)), 128,
             [&] { attention_dkv_kernel<D, MOD>(a); });
}

template <int D> static void run(const Attn &a, bool backward) {
  bool mod = a.softcap > 0 || a.slopes;
  if (!backward)
    mod ? run_forward<D, true>(a) : run_forward<D, false>(a);
  else
    mod ? run_backward<D, true>(a) : run_backward<D, false>(a);
}

static void dispatch(int D, const Attn &a, bool backward) {
  switch (D) {
  case 16:
    run<16>(a, backward);
    break;
  case 32:
    run<32>(a, backward);
    break;
  case 64:
    run<64>(a, backward);
    break;
  case 80:
    run<80>(a, backward);
    break;
  case 96:
    run<96>(a, backward);
    break;
  case 128:
    run<128>(a, backward);
    break;
  default:
    abort();
  }
}

static void check(int64_t B, int64_t T, int Hq, int Hkv, int D, int causal, int rope,
                  int64_t window, double softcap, double scale, int alibi) {
  AttnShape s = {};
  s.B = B, s.T = T, s.Hq = Hq, s.Hkv = Hkv, s.D = D, s.causal = causal, s.rope = rope,
  s.rope_theta = 10000;
  s.window = window, s.softcap = softcap, s.scale = scale, s.alibi = alibi,
  s.head0 = alibi ? Hq : 0, s.heads_total = 2 * Hq;
  char tag[160];
  snprintf(tag, sizeof tag, "B%lld T%lld H%d/%d D%d%s%s w%lld cap%g scale%g%s", (long long)B,
           (long long)T, Hq, Hkv, D, causal ? " causal" : "", rope ? " rope" : "",
           (long long)window, softcap, scale, alibi ? " alibi" : "");
  int64_t nq = B * T * Hq * D, nkv = B * T * Hkv * D, rows = B * Hq * T;
  Tensor q(nq, -2, 2), k(nkv, -2, 2), v(nkv, -1, 1), dout(nq, -1, 1);
  // reference
  std::vector<float> out(nq), lse(rows), dq(nq), dk(nkv), dv(nkv);
  k_attention_forward(&s, q.f.data(), k.f.data(), v.f.data(), out.data(), lse.data());
  k_attention_backward(&s, q.f.data(), k.f.data(), v.f.data(), out.data(), lse.data(),
                       dout.f.data(), dq.data(), dk.data(), dv.data());
  // emulated: as attn_setup
  Attn a = {};
  a.B = B, a.T = (int)T, a.Hq = Hq, a.Hkv = Hkv, a.group = Hq / Hkv, a.causal = causal;
  a.q_stride = (int64_t)Hq * D, a.kv_stride = (int64_t)Hkv * D;
  a.scale = (float)(scale > 0 ? scale : 1 / sqrt((double)D));
  a.scale_log2 = a.scale * LOG2E;
  a.window = (int)(window > 0 && window < T ? window : T);
  a.softcap = (float)softcap, a.inv_softcap = softcap > 0 ? (float)(1 / softcap) : 0.0f;
  std::vector<float> slopes(Hq), tables(rope ? 2 * T * (D / 2) : 0);
  if (alibi) {
    for (int h = 0; h < Hq; h++)
      slopes[h] = (float)attention_alibi_slope(s.heads_total, s.head0 + h);
    a.slopes = slopes.data();
  }
  if (rope) {
    int64_t n = T * (D / 2), half = D / 2;
    for (int64_t idx = 0; idx < n; idx++) {
      double angle = (double)(idx / half) * pow(10000.0, -2.0 * (double)(idx % half) / D);
      tables[idx] = (float)cos(angle), tables[n + idx] = (float)sin(angle);
    }
    a.cos_t = tables.data(), a.sin_t = tables.data() + n;
  }
  std::vector<bf16> gout(nq, bf16{0xffff}), gdq(nq, bf16{0xffff}), gdk(nkv, bf16{0xffff}),
      gdv(nkv, bf16{0xffff});
  std::vector<float> glse(rows, NAN), stats(2 * rows, NAN);
  a.q = q.b.data(), a.k = k.b.data(), a.v = v.b.data(), a.out_w = gout.data(),
  a.lse_w = glse.data();
  dispatch(D, a, false);
  a.out = gout.data(), a.lse = glse.data(), a.dout = dout.b.data(), a.dq = gdq.data(),
  a.dk = gdk.data(), a.dv = gdv.data();
  emu_launch((unsigned)((rows + 127) / 128), 128,
             [&] { attention_prep_kernel(a, D, 1, stats.data(), stats.data() + rows); });
  a.delta = stats.data(), a.lse2 = stats.data() + rows;
  dispatch(D, a, true);
  auto widen = [](const std::vector<bf16> &x) {
    std::vector<float> f(x.size());
    for (size_t i = 0; i < x.size(); i++)
      f[i] = ld(x[i]);
    return f;
  };
  compare("out", tag, out.data(), widen(gout), 1e-2);
  compare("lse", tag, lse.data(), glse, 1e-2);
  compare("dq", tag, dq.data(), widen(gdq), 1e-2);
  compare("dk", tag, dk.data(), widen(gdk), 1e-2);
  compare("dv", tag, dv.data(), widen(gdv), 1e-2);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : -1, i = 0;
#define CASE(...)                                                                                  \
  if (only < 0 || only == i) check(__VA_ARGS__);                                                   \
  i++;
  CASE(2, 128, 4, 4, 64, 1, 0, 0, 0, 0, 0)
  CASE(1, 100, 4, 2, 32, 1, 1, 0, 0, 0, 0)
  CASE(2, 64, 2, 1, 128, 0, 1, 0, 0, 0, 0)
  CASE(1, 80, 2, 2, 16, 0, 0, 0, 0, 0, 0)
  CASE(1, 192, 2, 2, 128, 1, 1, 0, 0, 0, 0)
  CASE(1, 1, 2, 1, 16, 1, 1, 0, 0, 0, 0)
  CASE(1, 65, 4, 1, 64, 0, 1, 0, 0, 0, 0)
  CASE(1, 70, 8, 2, 16, 1, 1, 0, 0, 0, 0)
  CASE(2, 200, 4, 2, 64, 1, 1, 70, 0, 0, 0)
  CASE(1, 130, 2, 1, 128, 1, 0, 5, 0, 0, 0)
  CASE(1, 100, 4, 2, 32, 1, 1, 0, 1.5, 0.1, 0)
  CASE(1, 90, 2, 2, 16, 0, 0, 0, 2.0, 0, 0)
  CASE(1, 150, 4, 4, 64, 1, 0, 0, 0, 0, 1)
  CASE(2, 40, 4, 2, 80, 0, 1, 0, 0, 0, 0)
  CASE(1, 77, 2, 1, 96, 1, 1, 0, 0, 0, 0)
  CASE(1, 300, 2, 1, 64, 1, 0, 0, 0, 0, 0)
  CASE(1, 1, 2, 2, 128, 0, 0, 0, 0, 0, 0)
  CASE(1, 257, 4, 1, 128, 1, 1, 100, 0, 0, 0)
  CASE(1, 190, 2, 2, 96, 0, 0, 0, 3.0, 0, 1)
  CASE(1, 140, 4, 4, 80, 1, 0, 33, 0, 0, 1)
  CASE(1, 90, 2, 2, 32, 1, 0, 20, 3.0, 0.2, 1)
  CASE(1, 200, 2, 1, 16, 1, 1, 130, 2.0, 0, 0)
  CASE(1, 2, 2, 1, 64, 1, 1, 0, 0, 0, 0)
  CASE(1, 17, 2, 2, 80, 1, 0, 0, 0, 0, 0)
  CASE(1, 129, 4, 1, 64, 1, 0, 0, 2.0, 0, 1)
  CASE(1, 255, 2, 1, 64, 1, 1, 40, 0, 0, 0)
  CASE(1, 100, 2, 2, 64, 0, 0, 0, 0, 0, 1)
  CASE(1, 33, 2, 2, 128, 0, 1, 0, 1.0, 0, 1)
  CASE(1, 300, 2, 1, 128, 1, 0, 10, 2.5, 0, 0)
  CASE(1, 97, 4, 2, 96, 1, 1, 16, 0, 0.3, 0)
  CASE(1, 70, 2, 2, 16, 0, 1, 0, 0, 0, 1)
  CASE(2, 160, 2, 1, 32, 1, 0, 64, 0, 0, 0)
  CASE(1, 200, 2, 2, 80, 1, 1, 0, 0, 0, 0)
  CASE(1, 64, 4, 4, 128, 1, 0, 1, 0, 0, 0)
  // 128 wide on the forward's 32-key chunks (rolled loop): odd T, GQA, windows inside and across
  // chunks
  CASE(1, 203, 4, 2, 128, 1, 0, 0, 0, 0, 0)
  CASE(2, 161, 4, 1, 128, 1, 0, 40, 0, 0, 0)
  CASE(1, 97, 2, 2, 128, 0, 0, 0, 0, 0, 0)
  CASE(1, 250, 4, 2, 128, 1, 1, 33, 0, 0.05, 0)
  CASE(1, 131, 2, 1, 128, 1, 0, 17, 0, 0, 1)
  // 128 wide on dQ's 32-key chunks (rolled loop, Q and dO in registers): a window inside a chunk,
  // GQA, last chunks of one key
  CASE(1, 97, 4, 2, 128, 1, 0, 20, 0, 0, 0)
  CASE(1, 161, 2, 1, 128, 0, 1, 0, 2.0, 0, 1)
  printf("%d failures\n", failures);
  return failures != 0;
}

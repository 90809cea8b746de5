// emu.cpp: the fiber scheduler and the warp collectives of emu.h (C++17, as emu.h says why).
#include "emu.h"

unsigned char smem[SMEM_BYTES];
Dim emu_block_idx, emu_block_dim;
EmuThread *emu_cur;
EmuThread emu_threads[MAX_THREADS];
static ucontext_t sched_ctx;
static const std::function<void()> *emu_kernel;
static unsigned nthreads;

void emu_yield() { swapcontext(&emu_cur->ctx, &sched_ctx); }

static void trampoline() {
  (*emu_kernel)();
  emu_cur->state = DONE;
  swapcontext(&emu_cur->ctx, &sched_ctx);
}

static uint16_t smem16(uint32_t byte) {
  if (byte + 2 > SMEM_BYTES) {
    fprintf(stderr, "ldmatrix past shared memory\n");
    abort();
  }
  uint16_t v;
  memcpy(&v, smem + byte, 2);
  return v;
}

static float bf(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

// Executes the collective the 32 lanes of warp w wait at.
static void warp_op(int w) {
  EmuThread *t = emu_threads + w * 32;
  Op op = t[0].op;
  for (int l = 1; l < 32; l++)
    if (t[l].op != op) {
      fprintf(stderr, "warp %d: lanes at different collectives\n", w);
      abort();
    }
  if (op == OP_SYNCWARP) return;
  if (op == OP_SHFL_ANY) {
    uint32_t any = 0;
    for (int l = 0; l < 32; l++)
      any |= t[l].in[0];
    for (int l = 0; l < 32; l++)
      t[l].out[0] = any;
    return;
  }
  if (op == OP_SHFL) {
    float v[32];
    for (int l = 0; l < 32; l++)
      v[l] = t[l].fin[0];
    for (int l = 0; l < 32; l++)
      t[l].fout[0] = v[l ^ t[l].in[0]];
    return;
  }
  if (op == OP_LDSM || op == OP_LDSM_T) {
    for (int l = 0; l < 32; l++)
      if (t[l].in[0] % 16) {
        fprintf(stderr, "misaligned ldmatrix row\n");
        abort();
      }
    uint32_t out[32][4];
    for (int m = 0; m < 4; m++) // matrix m: rows from lanes 8m..8m+7
      for (int l = 0; l < 32; l++) {
        int r = l / 4, c = 2 * (l % 4);
        uint16_t e0, e1;
        if (op == OP_LDSM)
          e0 = smem16(t[8 * m + r].in[0] + 2 * c), e1 = smem16(t[8 * m + r].in[0] + 2 * (c + 1));
        else
          e0 = smem16(t[8 * m + c].in[0] + 2 * r), e1 = smem16(t[8 * m + c + 1].in[0] + 2 * r);
        out[l][m] = (uint32_t)e0 | (uint32_t)e1 << 16;
      }
    for (int l = 0; l < 32; l++)
      for (int m = 0; m < 4; m++)
        t[l].out[m] = out[l][m];
    return;
  }
  // mma m16n8k16 row.col bf16 → f32
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    int g = l / 4, q = l % 4;
    for (int i = 0; i < 4; i++) {
      int row = g + (i & 1) * 8, col = 2 * q + (i >> 1) * 8;
      A[row][col] = bf((uint16_t)(t[l].in[i] & 0xffff)),
      A[row][col + 1] = bf((uint16_t)(t[l].in[i] >> 16));
    }
    for (int i = 0; i < 2; i++) {
      int k = 2 * q + i * 8;
      B[k][g] = bf((uint16_t)(t[l].in[4 + i] & 0xffff)),
      B[k + 1][g] = bf((uint16_t)(t[l].in[4 + i] >> 16));
    }
    C[g][2 * q] = t[l].fin[0], C[g][2 * q + 1] = t[l].fin[1], C[g + 8][2 * q] = t[l].fin[2],
             C[g + 8][2 * q + 1] = t[l].fin[3];
  }
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      double s = C[i][j];
      for (int k = 0; k < 16; k++)
        s += (double)A[i][k] * B[k][j];
      C[i][j] = (float)s;
    }
  for (int l = 0; l < 32; l++) {
    int g = l / 4, q = l % 4;
    t[l].fout[0] = C[g][2 * q], t[l].fout[1] = C[g][2 * q + 1], t[l].fout[2] = C[g + 8][2 * q],
    t[l].fout[3] = C[g + 8][2 * q + 1];
  }
}

// Thread i's fiber, ready to start the kernel (a function of its own: getcontext may return twice,
// so no loop variable lives across it).
static __attribute__((noinline)) void start_thread(unsigned i) {
  EmuThread &t = emu_threads[i];
  t.stack.resize(1 << 17);
  getcontext(&t.ctx);
  t.ctx.uc_stack.ss_sp = t.stack.data();
  t.ctx.uc_stack.ss_size = t.stack.size();
  t.ctx.uc_link = nullptr;
  makecontext(&t.ctx, trampoline, 0);
  t.tidx = {i, 0, 0};
  t.state = READY;
  t.pending.clear();
}

static void run_block() {
  for (unsigned i = 0; i < nthreads; i++) start_thread(i);
  for (;;) {
    bool any = false;
    for (unsigned i = 0; i < nthreads; i++)
      if (emu_threads[i].state == READY) {
        emu_cur = &emu_threads[i];
        swapcontext(&sched_ctx, &emu_cur->ctx);
        any = true;
      }
    unsigned done = 0, at_block = 0;
    for (unsigned i = 0; i < nthreads; i++)
      done += emu_threads[i].state == DONE, at_block += emu_threads[i].state == AT_BLOCK;
    if (done == nthreads) return;
    for (unsigned w = 0; w < nthreads / 32; w++) {
      unsigned at = 0;
      for (int l = 0; l < 32; l++)
        at += emu_threads[w * 32 + l].state == AT_WARP;
      if (at == 32) {
        warp_op((int)w);
        for (int l = 0; l < 32; l++)
          emu_threads[w * 32 + l].state = READY;
        any = true;
      }
    }
    if (at_block + done == nthreads && at_block) {
      if (done) {
        fprintf(stderr, "barrier with exited threads\n");
        abort();
      }
      for (unsigned i = 0; i < nthreads; i++)
        emu_threads[i].state = READY;
      any = true;
    }
    if (!any) {
      fprintf(stderr, "deadlock\n");
      abort();
    }
  }
}

void emu_launch(unsigned blocks, unsigned threads, const std::function<void()> &kernel) {
  emu_kernel = &kernel;
  nthreads = threads;
  emu_block_dim = {threads, 1, 1};
  for (unsigned b = 0; b < blocks; b++) {
    emu_block_idx = {b, 0, 0};
    memset(smem, 0xff, sizeof smem);
    run_block();
  }
}

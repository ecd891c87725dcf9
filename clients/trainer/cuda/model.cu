// model.cu: the forward and backward of both architectures on the GPU,
// layer by layer as gpt.c and llama.c (shapes in comments in ops.c), with
// the arithmetic of kernels.h: the same chains and trees as the CPU path, so
// the GPU gives the CPU's bits.
//
// A thread computes its output elements alone (no shuffles or atomics),
// reading only what no thread of the same launch writes, or what its block
// wrote to shared memory before a __syncthreads (the GEMMs' tiles), or what
// its warp's lanes hold in an mma's fragments (the mx8 GEMM). That is
// what lets cuda/emu compile this file for the host and run each launch
// thread by thread (as fibers between barriers), which is how the CPU = GPU
// contract is tested on machines without a GPU. Kernels that use
// __syncthreads are launched with TRG_LAUNCH_SYNC. Grid sizes depend only on
// the problem shape. Built with --fmad=false: the only fused multiply-adds
// are kernels.h's explicit ones.

#ifdef TRG_EMULATE
#include "emu/emu.h"
#else
#include <cuda_runtime.h>
// TRG_PROFILE=1 in the environment times every launch and copy with events
// (which serialises them) and prints the totals per kernel at trg_destroy.
#define TRG_LAUNCH(kernel, grid, block, ...)                                  \
    do {                                                                     \
        cudaEvent_t e0_ = trg_prof_begin();                                  \
        kernel<<<(grid), (block)>>>(__VA_ARGS__);                            \
        trg_prof_end(#kernel, e0_);                                          \
    } while (0)
#define TRG_LAUNCH_SYNC TRG_LAUNCH
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>

#include "../kernels.h"
#include "../layout.h"
#include "trainer_cuda.h"

// ----------------------------------------------------------------------------
// Profiling (TRG_PROFILE=1; real GPUs only)

#ifdef TRG_EMULATE
#define TRG_TIMED_COPY(name, dst, src, n, kind) cudaMemcpy(dst, src, n, kind)
static void trg_prof_print(void) {}
#else
struct trg_prof_entry {
    const char *name;
    double ms;
    long calls;
};
static trg_prof_entry trg_prof[64];
static int trg_prof_on = -1;

static cudaEvent_t trg_prof_begin(void) {
    if (trg_prof_on < 0) trg_prof_on = getenv("TRG_PROFILE") && strcmp(getenv("TRG_PROFILE"), "0") != 0;
    if (!trg_prof_on) return NULL;
    cudaEvent_t e;
    cudaEventCreate(&e);
    cudaEventRecord(e);
    return e;
}

static void trg_prof_end(const char *name, cudaEvent_t e0) {
    if (!e0) return;
    cudaEvent_t e1;
    cudaEventCreate(&e1);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (int i = 0; i < 64; i++) {
        if (!trg_prof[i].name || strcmp(trg_prof[i].name, name) == 0) {
            trg_prof[i].name = name;
            trg_prof[i].ms += ms;
            trg_prof[i].calls++;
            return;
        }
    }
}

static cudaError_t trg_timed_copy(const char *name, void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    cudaEvent_t e0 = trg_prof_begin();
    cudaError_t e = cudaMemcpy(dst, src, n, kind);
    trg_prof_end(name, e0);
    return e;
}
#define TRG_TIMED_COPY(name, dst, src, n, kind) trg_timed_copy(name, dst, src, n, kind)

static void trg_prof_print(void) {
    double total = 0;
    for (int i = 0; i < 64 && trg_prof[i].name; i++) total += trg_prof[i].ms;
    if (total == 0) return;
    fprintf(stderr, "trg profile: %-36s %10s %8s %6s\n", "kernel or copy", "ms", "calls", "share");
    for (int i = 0; i < 64 && trg_prof[i].name; i++)
        fprintf(stderr, "trg profile: %-36s %10.1f %8ld %5.1f%%\n", trg_prof[i].name, trg_prof[i].ms, trg_prof[i].calls,
                100 * trg_prof[i].ms / total);
    memset(trg_prof, 0, sizeof trg_prof);
}
#endif

// ----------------------------------------------------------------------------
// CUDA kernels

__device__ static size_t trg_thread(void) { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }

// out(BT,C) = wte[tok] + wpe[t]
__global__ void encoder_forward_kernel(float *out, const int32_t *tok, const float *wte, const float *wpe, int BT, int T, int C) {
    size_t idx = trg_thread();
    if (idx >= (size_t)BT * C) return;
    int bt = (int)(idx / C), i = (int)(idx % C);
    out[idx] = wpe ? wte[(size_t)tok[bt] * C + i] + wpe[(size_t)(bt % T) * C + i] : wte[(size_t)tok[bt] * C + i];
}

// One thread per channel, positions in order (the CPU's chains); dwpe may be NULL.
__global__ void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int BT, int T, int C) {
    size_t i = trg_thread();
    if (i >= (size_t)C) return;
    for (int bt = 0; bt < BT; bt++) {
        float d = dout[(size_t)bt * C + i];
        dwte[(size_t)tok[bt] * C + i] += d;
        if (dwpe) dwpe[(size_t)(bt % T) * C + i] += d;
    }
}

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N, int C) {
    size_t r = trg_thread();
    if (r >= (size_t)N) return;
    trk_layernorm_row(out + r * C, mean + r, rstd + r, inp + r * C, w, b, C);
}

__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                               const float *mean, const float *rstd, int N, int C) {
    size_t r = trg_thread();
    if (r >= (size_t)N) return;
    trk_layernorm_back_row(dinp + r * C, dout + r * C, inp + r * C, w, mean[r], rstd[r], C);
}

// Column chains over the rows (bias and norm weight gradients):
// one thread per column runs its chain in row order, through chunks of rows
// that the whole block first copies to shared memory, so that many loads
// are in flight while a chain waits on its previous add.
#define CH_ROWS 64
#define CH_COLS 32
#define CH_THREADS 256

// Rows [r0, r0+n) of columns [c0, c0+CH_COLS) of x (row stride ld) into s.
__device__ static void chain_stage(float s[CH_ROWS][CH_COLS], const float *x, size_t ld, int r0, int n, int c0, int C) {
    for (int e = threadIdx.x; e < CH_ROWS * CH_COLS; e += CH_THREADS) {
        int r = e / CH_COLS, c = e % CH_COLS;
        if (r < n && c0 + c < C) s[r][c] = x[(size_t)(r0 + r) * ld + c0 + c];
    }
}

// dw(C), db(C): LayerNorm's weight and bias gradient chains.
__global__ void layernorm_backward_dw_kernel(float *dw, float *db, const float *dout, const float *inp,
                                             const float *mean, const float *rstd, int N, int C) {
    __shared__ float sx[CH_ROWS][CH_COLS], sd[CH_ROWS][CH_COLS], smu[CH_ROWS], srs[CH_ROWS];
    int c0 = blockIdx.x * CH_COLS, i = c0 + threadIdx.x;
    bool mine = threadIdx.x < CH_COLS && i < C;
    float sw = mine ? dw[i] : 0.0f, sb = mine ? db[i] : 0.0f;
    for (int r0 = 0; r0 < N; r0 += CH_ROWS) {
        int n = N - r0 < CH_ROWS ? N - r0 : CH_ROWS;
        chain_stage(sx, inp, C, r0, n, c0, C);
        chain_stage(sd, dout, C, r0, n, c0, C);
        if (threadIdx.x < n) smu[threadIdx.x] = mean[r0 + threadIdx.x], srs[threadIdx.x] = rstd[r0 + threadIdx.x];
        __syncthreads();
        if (mine)
            for (int r = 0; r < n; r++) trk_layernorm_dw_step(&sw, &sb, sx[r][threadIdx.x], smu[r], srs[r], sd[r][threadIdx.x]);
        __syncthreads();
    }
    if (mine) dw[i] = sw, db[i] = sb;
}

// The GEMM's batch and causal ranges (gemm_kernel).
enum { TRG_FULL, TRG_K_UPTO_M, TRG_K_FROM_M, TRG_N_UPTO_M };
typedef struct {
    int inner;                  // z = outer * inner + j
    int group;                  // B's inner index is j / group (query heads per key head)
    size_t a_outer, a_inner;    // element offsets per outer and inner index
    size_t b_outer, b_inner;
    size_t o_outer, o_inner;
    int causal;
} trg_batch;

// GEMM (gemm_kernel): a block of 256 threads computes 128x128 outputs; its
// 8 warps are 2 along m by 4 along n, each 64x32. A lane holds 8x8 outputs
// as 2x2 sub-tiles of 4x4 at rows lm*4 and 32 + lm*4 of its warp's tile,
// columns ln*4 and 16 + ln*4 (lane = 4 lm + ln): so the 8 (4) distinct
// float4s that a warp's lanes read of A (B) at one k are contiguous in
// shared memory, one conflict-free broadcast each.
#define GT_M 128
#define GT_N 128
#define GT_K 16
#define GT_THREADS 256
#define GT_WM 64
#define GT_WN 32
#define GT_LD (GT_M + 4) // floats per k in shared memory: 16-byte rows; the padding spreads the transposing stores over the banks
#define GT_R 8           // outputs per thread along m and n

// 4 consecutive floats at p (16-byte aligned: the emulator checks).
__device__ static __forceinline__ void ld4(float v[4], const float *p) {
#ifdef TRG_EMULATE
    trg_emu_vector_access(p);
    for (int j = 0; j < 4; j++) v[j] = p[j];
#else
    float4 t = *(const float4 *)p;
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
#endif
}

__device__ static __forceinline__ void st4(float *p, const float v[4]) {
#ifdef TRG_EMULATE
    trg_emu_vector_access(p);
    for (int j = 0; j < 4; j++) p[j] = v[j];
#else
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
#endif
}

// A thread's share of an operand's 128x16 tile: two runs (l = 0, 1) of 4
// floats consecutive in memory, from row (or column) x0 + share_i and k =
// k0 + share_k + 8l. Row-major operands (x(i, k) at x[i*ld + k]) run along
// k: a warp reads 16 rows of 32 bytes, and its stores into the k-major
// shared tile hit 32 banks. Transposed ones (T: x(k, i) at x[k*ld + i]) run
// along i: a warp reads 512 contiguous bytes and stores them as they are.
template <bool T> __device__ static __forceinline__ int share_i(void) { return T ? threadIdx.x % 32 * 4 : threadIdx.x / 2; }
template <bool T> __device__ static __forceinline__ int share_k(void) { return T ? threadIdx.x / 32 : threadIdx.x % 2 * 4; }

// An operand as a thread loads it: x (rows or columns x0 + [0, 128) of n),
// and for FAST p, the thread's run 0 of the tile it loads next.
typedef struct {
    const float *x, *p;
    int ld, x0, n;
} gemm_operand;

template <bool T, bool FAST>
__device__ static __forceinline__ gemm_operand gemm_operand_at(const float *x, int ld, int x0, int n, int kbeg) {
    gemm_operand o = {x, NULL, ld, x0, n};
    if (FAST) {
        int i = x0 + share_i<T>(), k = kbeg + share_k<T>();
        if (i >= n) i = T ? n - 4 : n - 1; // in the operand, in whole float4s
        o.p = T ? x + (size_t)k * ld + i : x + (size_t)i * ld + k;
    }
    return o;
}

// Run l of the share of the tile at k0 into r. FAST (gemm_fast): one
// aligned float4, rows past n clamped once (gemm_operand_at). Otherwise runs
// are clamped to the operand: past row n or column K an element reads the
// operand's last one instead (no branch per element), which reaches only
// outputs that are not stored, or k that no chain takes (the math stops at
// kend <= K).
template <bool T, bool FAST> __device__ static __forceinline__ void gemm_load(const gemm_operand &o, int K, int k0, int l, float r[4]) {
    if (FAST) {
        ld4(r, o.p + (size_t)8 * l * (T ? o.ld : 1));
        return;
    }
    int i = o.x0 + share_i<T>(), k = k0 + share_k<T>() + 8 * l;
    int ic = i < o.n ? i : o.n - 1, kc = k < K ? k : K - 1;
    const float *p = T ? o.x + (size_t)kc * o.ld + ic : o.x + (size_t)ic * o.ld + kc;
    int room = T ? o.n - 1 - ic : K - 1 - kc; // elements after p in the run's direction
    r[0] = p[0];
#pragma unroll
    for (int j = 1; j < 4; j++) r[j] = j <= room ? p[j] : r[0];
}

template <bool T> __device__ static __forceinline__ void gemm_store(float *tile, int l, const float r[4]) {
    float *q = tile + (share_k<T>() + 8 * l) * GT_LD + share_i<T>();
    if (T) st4(q, r);
    else
#pragma unroll
        for (int j = 0; j < 4; j++) q[j * GT_LD] = r[j];
}

// One k of a thread's 8x8 outputs, for the rows in rowmask: a and b are the
// k's row of the A and B tiles at the thread's rows and columns.
__device__ static __forceinline__ void gemm_step(float acc[GT_R][GT_R], const float *a, const float *b, int rowmask) {
    float av[4], bv[GT_R];
    ld4(bv, b), ld4(bv + 4, b + 16);
#pragma unroll
    for (int h = 0; h < 2; h++) { // a's two float4s one after the other: fewer live registers
        ld4(av, a + 32 * h);
#pragma unroll
        for (int r = 0; r < 4; r++)
            if (rowmask >> (4 * h + r) & 1)
#pragma unroll
                for (int c = 0; c < GT_R; c++) acc[4 * h + r][c] = trk_fma(av[r], bv[c], acc[4 * h + r][c]);
    }
}

// v, as a value that the compiler cannot know: so that the epilogue
// recomputes its addresses instead of keeping the prologue's live (spilled)
// through the k loop.
__device__ static __forceinline__ int gemm_opaque(int v) {
#ifndef TRG_EMULATE
    asm("" : "+r"(v));
#endif
    return v;
}

__device__ static __forceinline__ float *gemm_opaque(float *v) {
#ifndef TRG_EMULATE
    asm("" : "+l"(v));
#endif
    return v;
}

// The thread's row r (of 8) and column group h (of 2, 4 columns each).
#define GT_ROW(r) ((r) % 4 + (r) / 4 * 32)
#define GT_COL(h) ((h) * 16)

// Every output element is one chain over k in order from its base
// (trk_gemm_element), whatever the tiling. A and B pass through shared
// memory 16 values of k at a time, in two buffers: tile k+1 loads from
// global memory into registers while the warps compute on tile k, then goes
// to the other buffer, so one __syncthreads per tile. Batched: blockIdx.z
// picks the matrices. Attention's products are causal: a row m takes only
// k <= m (TRG_K_UPTO_M) or k >= m (TRG_K_FROM_M), and its scores need only
// n <= m (TRG_N_UPTO_M: blocks and warps wholly above the diagonal skip it,
// and leave their outputs, which nothing reads, unwritten).
// TA, TB: the operands are transposed; FAST: gemm_fast. As constants they
// let the loads' index arithmetic fold, and each variant gets its own
// register allocation (one kernel with all of them spilled on sm_80).
template <bool TA, bool TB, bool FAST>
__global__ void __launch_bounds__(GT_THREADS, 2) gemm_kernel(tr_gemm_args g, trg_batch bt) {
    __shared__ __align__(16) float As[2][GT_K * GT_LD];
    __shared__ __align__(16) float Bs[2][GT_K * GT_LD];
    int z = blockIdx.z, zo = z / bt.inner, zi = z % bt.inner;
    g.a += zo * bt.a_outer + zi * bt.a_inner;
    g.b += zo * bt.b_outer + (zi / bt.group) * bt.b_inner;
    g.out += zo * bt.o_outer + zi * bt.o_inner;
    int m0 = blockIdx.y * GT_M, n0 = blockIdx.x * GT_N;
    if (bt.causal == TRG_N_UPTO_M && n0 > m0 + GT_M - 1) return; // the whole block
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int wm = warp / (GT_N / GT_WN) * GT_WM, wn = warp % (GT_N / GT_WN) * GT_WN;
    int tm = wm + lane / 4 * 4, tn = wn + lane % 4 * 4;
    int mrow = m0 + tm, ncol = n0 + tn; // the thread's first output
    bool idle = bt.causal == TRG_N_UPTO_M && n0 + wn > m0 + wm + GT_WM - 1; // the warp's tile
    // Outputs as float4s where the rows allow it (the base of accumulating
    // GEMMs, and the stores).
    bool ovec = g.ldo % 4 == 0 && (uintptr_t)g.out % 16 == 0;
    float acc[GT_R][GT_R];
#pragma unroll
    for (int r = 0; r < GT_R; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int m = mrow + GT_ROW(r), n = ncol + GT_COL(h);
            float *a4 = acc[r] + 4 * h;
            if (g.accumulate && ovec && m < g.M && n + 3 < g.N) ld4(a4, g.out + (size_t)m * g.ldo + n);
            else
#pragma unroll
                for (int j = 0; j < 4; j++) a4[j] = m < g.M && n + j < g.N ? trk_gemm_base(&g, m, n + j) : 0.0f;
        }
    int kbeg = bt.causal == TRG_K_FROM_M ? (m0 < g.K ? m0 : g.K) : 0;
    int kend = bt.causal == TRG_K_UPTO_M && m0 + GT_M < g.K ? m0 + GT_M : g.K;
    gemm_operand oa = gemm_operand_at<TA, FAST>(g.a, g.lda, m0, g.M, kbeg), ob = gemm_operand_at<TB, FAST>(g.b, g.ldb, n0, g.N, kbeg);
    for (int l = 0; l < 2 && kbeg < kend; l++) {
        float ra[4], rb[4];
        gemm_load<TA, FAST>(oa, g.K, kbeg, l, ra);
        gemm_load<TB, FAST>(ob, g.K, kbeg, l, rb);
        gemm_store<TA>(As[0], l, ra);
        gemm_store<TB>(Bs[0], l, rb);
    }
    __syncthreads();
    for (int k0 = kbeg, buf = 0; k0 < kend; k0 += GT_K, buf ^= 1) {
        bool more = k0 + GT_K < kend;
        if (FAST && more) oa.p += (size_t)GT_K * (TA ? g.lda : 1), ob.p += (size_t)GT_K * (TB ? g.ldb : 1);
        const float *a = As[buf] + tm, *b = Bs[buf] + tn;
        int kn = kend - k0 < GT_K ? kend - k0 : GT_K;
        // Whether every k of the tile is in each of the thread's rows' ranges
        // (off the diagonal of a causal product, all but the last tile
        // otherwise), or in none.
        int mlast = mrow + GT_ROW(GT_R - 1);
        bool full = kn == GT_K && (bt.causal == TRG_K_UPTO_M ? k0 + GT_K - 1 <= mrow
                                   : bt.causal == TRG_K_FROM_M ? k0 >= mlast : true);
        bool none = idle || (bt.causal == TRG_K_UPTO_M && k0 > mlast) || (bt.causal == TRG_K_FROM_M && k0 + kn - 1 < mrow);
        // The next tile's runs load one at a time, each during a quarter of
        // the math on this one: few registers in flight.
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float rx[4];
            if (more) {
                if (q % 2 == 0) gemm_load<TA, FAST>(oa, g.K, k0 + GT_K, q / 2, rx);
                else gemm_load<TB, FAST>(ob, g.K, k0 + GT_K, q / 2, rx);
            }
            if (none) {
            } else if (full) {
#pragma unroll
                for (int kk = 4 * q; kk < 4 * q + 4; kk++) gemm_step(acc, a + kk * GT_LD, b + kk * GT_LD, (1 << GT_R) - 1);
            } else {
#pragma unroll 1
                for (int kk = 4 * q; kk < 4 * q + 4 && kk < kn; kk++) {
                    int k = k0 + kk, rowmask = 0;
#pragma unroll
                    for (int r = 0; r < GT_R; r++) {
                        int m = mrow + GT_ROW(r);
                        if (!((bt.causal == TRG_K_UPTO_M && k > m) || (bt.causal == TRG_K_FROM_M && k < m))) rowmask |= 1 << r;
                    }
                    gemm_step(acc, a + kk * GT_LD, b + kk * GT_LD, rowmask);
                }
            }
            if (more) {
                if (q % 2 == 0) gemm_store<TA>(As[buf ^ 1], q / 2, rx);
                else gemm_store<TB>(Bs[buf ^ 1], q / 2, rx);
            }
        }
        __syncthreads();
    }
    if (idle) return;
    float *out = gemm_opaque(g.out);
    int ldo = gemm_opaque(g.ldo), mr0 = gemm_opaque(mrow);
#pragma unroll
    for (int r = 0; r < GT_R; r++) {
        int m = mr0 + GT_ROW(r);
        if (m >= g.M) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int n = ncol + GT_COL(h);
            float *o = out + (size_t)m * ldo + n;
            if (ovec && n + 3 < g.N) st4(o, acc[r] + 4 * h);
            else
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (n + j < g.N) o[j] = acc[r][4 * h + j];
        }
    }
}

// Numeric contract v3 (mx8): an operand quantized, one thread per row and
// block part (trk_mx_quant_block, as the CPU's packs), into codes
// [row][block][part][32] and scales [row][block][part]; X(p, k) is as
// trk_gemm_a reads A; b_side and slices pick each part's slice.
__global__ void mx_quant_kernel(int8_t *codes, float *scales, const float *x, int ld, int trans, int rows, int K, int kseg,
                                int nblocks, int slices, int b_side) {
    size_t i = trg_thread();
    int parts = TR_MX_PARTS(slices);
    if (i >= (size_t)rows * nblocks * parts) return;
    int p = (int)(i / ((size_t)nblocks * parts)), b = (int)(i / parts % nblocks), j = (int)(i % parts);
    tr_gemm_args q = {rows, 0, K, x, ld, NULL, 0, NULL, 0, NULL, 0, trans, 0};
    scales[i] = trk_mx_quant_block(&q, 0, p, b, kseg, trk_mx_part_slice(slices, b_side, j), codes + i * TRK_MX_BLOCK);
}

// The mx8 GEMM from quantized operands on tensor cores (sm_80 on):
// mma.sync m16n8k32 s8 takes exactly one block of K, so each block's int32
// dots of a 16x8 tile come from one mma, and each lane then runs its outputs'
// chains one block step further, blocks in order (trk_mx_gemm_element).
//
// A block of 256 threads computes 128x128 outputs; its 8 warps are 2 along m
// by 4 along n, each 64x32 outputs (4 x 4 tiles of 16x8, 64 fp32 chains per
// lane). Codes and scales of MX_KB blocks of k pass through shared memory in
// two stages: cp.async fills one while the warps compute from the other.
// Rows and blocks past the operands' ends are filled with zeros.
#define MX_TILE 128 // output rows and columns per block
#define MX_KB 2
#define MX_THREADS 256 // = MX_TILE * MX_KB: one scale of each operand per thread and stage
#define MX_WM 64
#define MX_WN 32
// Bytes per staged row: 64 of codes and 16 of padding, so that a fragment
// load (8 rows x 4 words) falls on 32 different banks.
#define MX_ROW (MX_KB * TRK_MX_BLOCK + 16)
// The mma's C input: a dot d comes out as the bits of the float 1.5 * 2^23 + d
// (|d| <= 32 * 127^2 < 2^22), read without an int-to-float conversion, which
// runs at a fraction of the fma rate.
#define MX_MAGIC 0x4b400000
#define MX_MAGIC_F 12582912.0f

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MX_NO_MMA 1 // mma.sync m16n8k32 s8 and cp.async need sm_80: trg_create marks mx8 refused, trg_run fails
#else

// D = A B + C on one warp's 16x8x32 tile, in the PTX ISA's fragment layout
// (lane 4 g + t: a[0..3] hold A's rows g, g+8, g, g+8 at k 4t..4t+3, 4t..,
// 16+4t.., 16+4t..; b[0..1] column g of B at k 4t.. and 16+4t..; c and d
// rows g, g, g+8, g+8 at columns 2t, 2t+1, 2t, 2t+1). emu.h emulates it
// from that layout.
__device__ static __forceinline__ void mma_s8_16832(int d[4], const unsigned a[4], const unsigned b[2], const int c[4]) {
#ifdef TRG_EMULATE
    trg_emu_mma_s8_16832(d, a, b, c);
#else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
#endif
}

// cp.async of n (4 or 16) bytes from global to shared memory, or n zeros
// when !valid (src is then not read). Visible after mx_wait and a barrier.
__device__ static __forceinline__ void mx_copy(void *dst, const void *src, int n, bool valid) {
#ifdef TRG_EMULATE
    if (valid) memcpy(dst, src, n);
    else memset(dst, 0, n);
#else
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (n == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 4 : 0) : "memory");
#endif
}

__device__ static __forceinline__ void mx_commit(void) {
#ifndef TRG_EMULATE
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `pending` committed groups of this thread are in flight.
template <int pending> __device__ static __forceinline__ void mx_wait(void) {
#ifndef TRG_EMULATE
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#endif
}

// One stage: blocks [b0, b0 + MX_KB) of rows [r0, r0 + MX_TILE) of an operand
// (codes [row][block][32], scales [row][block]) into shared memory; each of
// the 256 threads copies two 16-byte pieces of codes and one scale.
__device__ static __forceinline__ void mx_stage(int8_t *codes, float *scales, const int8_t *q, const float *sc, int rows,
                                                int nblocks, int r0, int b0) {
    for (int c = threadIdx.x; c < MX_TILE * MX_KB * 2; c += MX_THREADS) {
        int r = c / (MX_KB * 2), part = c % (MX_KB * 2), b = b0 + part / 2;
        bool valid = r0 + r < rows && b < nblocks;
        const int8_t *src = valid ? q + ((size_t)(r0 + r) * nblocks + b) * TRK_MX_BLOCK + part % 2 * 16 : q;
        mx_copy(codes + r * MX_ROW + part * 16, src, 16, valid);
    }
    int r = threadIdx.x / MX_KB, b = b0 + threadIdx.x % MX_KB;
    bool valid = r0 + r < rows && b < nblocks;
    mx_copy(scales + threadIdx.x, valid ? sc + (size_t)(r0 + r) * nblocks + b : sc, 4, valid);
}

// trk_mx_step(acc, dot, sa, sb) from the mma's bits u = MX_MAGIC + dot and
// nsa = -MX_MAGIC_F * sa: fma(float(u), sa, nsa) is dot * sa exactly (sa is
// 2^e, |e| <= 63, or NaN), and fma(dot * sa, sb, acc) rounds the same real
// number as fma((float)dot, sa * sb, acc) once, so the bits are the same.
__device__ static __forceinline__ float mx_step(float acc, int u, float sa, float nsa, float sb) {
    return trk_fma(trk_fma(tr_bits2f((uint32_t)u), sa, nsa), sb, acc);
}

__device__ static __forceinline__ unsigned mx_word(const int8_t *p) { return *(const unsigned *)p; }

// Output row and column of a lane's accumulator r of the warp's tile (i, j)
// (the mma's C/D layout: rows g, g, g+8, g+8 at columns 2t, 2t+1, 2t, 2t+1).
__device__ static __forceinline__ int mx_row(int base, int i, int gq, int r) { return base + 16 * i + gq + 8 * (r / 2); }
__device__ static __forceinline__ int mx_col(int base, int j, int tq, int r) { return base + 8 * j + 2 * tq + r % 2; }
#endif

// One block per multiprocessor: its 64 chains and the fragments take about
// 200 registers a thread (capped at 128 for two blocks, they spilled).
__global__ void __launch_bounds__(MX_THREADS) mx_gemm_kernel(tr_gemm_args g, int nblocks, const int8_t *qa, const float *sa,
                                                             const int8_t *qb, const float *sb) {
#ifdef MX_NO_MMA
    __trap();
#else
    __shared__ __align__(16) int8_t As[2][MX_TILE * MX_ROW], Bs[2][MX_TILE * MX_ROW];
    __shared__ float Sa[2][MX_TILE * MX_KB], Sb[2][MX_TILE * MX_KB]; // [row][block]
    int m0 = blockIdx.y * MX_TILE, n0 = blockIdx.x * MX_TILE;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
    int wm = warp / (MX_TILE / MX_WN) * MX_WM, wn = warp % (MX_TILE / MX_WN) * MX_WN;
    float acc[MX_WM / 16][MX_WN / 8][4]; // registers: every index below is a constant after unrolling
#pragma unroll
    for (int i = 0; i < MX_WM / 16; i++)
#pragma unroll
        for (int j = 0; j < MX_WN / 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int m = mx_row(m0 + wm, i, gq, r), n = mx_col(n0 + wn, j, tq, r);
                acc[i][j][r] = m < g.M && n < g.N ? trk_gemm_base(&g, m, n) : 0.0f;
            }
    const int magic[4] = {MX_MAGIC, MX_MAGIC, MX_MAGIC, MX_MAGIC};
    int stages = (nblocks + MX_KB - 1) / MX_KB;
    mx_stage(As[0], Sa[0], qa, sa, g.M, nblocks, m0, 0);
    mx_stage(Bs[0], Sb[0], qb, sb, g.N, nblocks, n0, 0);
    mx_commit();
    for (int s = 0; s < stages; s++) {
        int buf = s % 2;
        if (s + 1 < stages) { // the next stage loads while this one is used
            mx_stage(As[buf ^ 1], Sa[buf ^ 1], qa, sa, g.M, nblocks, m0, (s + 1) * MX_KB);
            mx_stage(Bs[buf ^ 1], Sb[buf ^ 1], qb, sb, g.N, nblocks, n0, (s + 1) * MX_KB);
            mx_commit();
            mx_wait<1>();
        } else {
            mx_wait<0>();
        }
        __syncthreads();
        int nkb = nblocks - s * MX_KB < MX_KB ? nblocks - s * MX_KB : MX_KB; // no step for blocks past the end
        for (int kb = 0; kb < nkb; kb++) {
            unsigned bf[MX_WN / 8][2];
            float cb[MX_WN / 8][2];
#pragma unroll
            for (int j = 0; j < MX_WN / 8; j++) {
                const int8_t *p = Bs[buf] + (wn + 8 * j + gq) * MX_ROW + kb * TRK_MX_BLOCK + 4 * tq;
                bf[j][0] = mx_word(p), bf[j][1] = mx_word(p + 16);
#pragma unroll
                for (int h = 0; h < 2; h++) cb[j][h] = Sb[buf][(wn + 8 * j + 2 * tq + h) * MX_KB + kb];
            }
#pragma unroll
            for (int i = 0; i < MX_WM / 16; i++) { // A's fragment and row scales one tile at a time: fewer live registers
                int row = wm + 16 * i + gq;
                const int8_t *p = As[buf] + row * MX_ROW + kb * TRK_MX_BLOCK + 4 * tq;
                unsigned af[4] = {mx_word(p), mx_word(p + 8 * MX_ROW), mx_word(p + 16), mx_word(p + 8 * MX_ROW + 16)};
                float ra[2], rn[2];
#pragma unroll
                for (int h = 0; h < 2; h++) ra[h] = Sa[buf][(row + 8 * h) * MX_KB + kb], rn[h] = -MX_MAGIC_F * ra[h];
#pragma unroll
                for (int j = 0; j < MX_WN / 8; j++) {
                    int d[4];
                    mma_s8_16832(d, af, bf[j], magic);
#pragma unroll
                    for (int r = 0; r < 4; r++) acc[i][j][r] = mx_step(acc[i][j][r], d[r], ra[r / 2], rn[r / 2], cb[j][r % 2]);
                }
            }
        }
        __syncthreads(); // before the next stage's copies overwrite this buffer
    }
#pragma unroll
    for (int i = 0; i < MX_WM / 16; i++)
#pragma unroll
        for (int j = 0; j < MX_WN / 8; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int m = mx_row(m0 + wm, i, gq, r), n = mx_col(n0 + wn, j, tq, r);
                if (m < g.M && n < g.N) g.out[(size_t)m * g.ldo + n] = acc[i][j][r];
            }
#endif
}

// dbias(OC) += column sums of dout(BT, row stride ld), rows in order.
__global__ void bias_backward_kernel(float *dbias, const float *dout, int ld, int BT, int OC) {
    __shared__ float sd[CH_ROWS][CH_COLS];
    int c0 = blockIdx.x * CH_COLS, o = c0 + threadIdx.x;
    bool mine = threadIdx.x < CH_COLS && o < OC;
    float s = mine ? dbias[o] : 0.0f;
    for (int r0 = 0; r0 < BT; r0 += CH_ROWS) {
        int n = BT - r0 < CH_ROWS ? BT - r0 : CH_ROWS;
        chain_stage(sd, dout, ld, r0, n, c0, OC);
        __syncthreads();
        if (mine)
            for (int r = 0; r < n; r++) s = s + sd[r][threadIdx.x];
        __syncthreads();
    }
    if (mine) dbias[o] = s;
}

__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    size_t r = trg_thread();
    if (r >= (size_t)N) return;
    trk_rmsnorm_row(out + r * C, rstd + r, inp + r * C, w, C, eps);
}

__global__ void rmsnorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                             const float *rstd, int N, int C) {
    size_t r = trg_thread();
    if (r >= (size_t)N) return;
    trk_rmsnorm_back_row(dinp + r * C, dout + r * C, inp + r * C, w, rstd[r], C);
}

// dw(C): RMSNorm's weight gradient chains.
__global__ void rmsnorm_backward_dw_kernel(float *dw, const float *dout, const float *inp, const float *rstd, int N, int C) {
    __shared__ float sx[CH_ROWS][CH_COLS], sd[CH_ROWS][CH_COLS], srs[CH_ROWS];
    int c0 = blockIdx.x * CH_COLS, i = c0 + threadIdx.x;
    bool mine = threadIdx.x < CH_COLS && i < C;
    float sw = mine ? dw[i] : 0.0f;
    for (int r0 = 0; r0 < N; r0 += CH_ROWS) {
        int n = N - r0 < CH_ROWS ? N - r0 : CH_ROWS;
        chain_stage(sx, inp, C, r0, n, c0, C);
        chain_stage(sd, dout, C, r0, n, c0, C);
        if (threadIdx.x < n) srs[threadIdx.x] = rstd[r0 + threadIdx.x];
        __syncthreads();
        if (mine)
            for (int r = 0; r < n; r++) trk_rmsnorm_dw_step(&sw, sx[r][threadIdx.x], srs[r], sd[r][threadIdx.x]);
        __syncthreads();
    }
    if (mine) dw[i] = sw;
}

// One thread per (row, q or k head): rotates (back: un-rotates) it in place.
__global__ void rope_kernel(float *qkv, const float *cosv, const float *sinv, int N, int T, int C, int NH, int KV, int back) {
    size_t idx = trg_thread();
    if (idx >= (size_t)N * (NH + KV)) return;
    int r = (int)(idx / (NH + KV)), hh = (int)(idx % (NH + KV)), hs = C / NH, half = hs / 2;
    float *x = qkv + (size_t)r * ((size_t)C + 2 * (size_t)KV * hs) + (size_t)hh * hs;
    const float *cs = cosv + (size_t)(r % T) * half, *sn = sinv + (size_t)(r % T) * half;
    if (back) trk_rope_back(x, cs, sn, hs);
    else trk_rope(x, cs, sn, hs);
}

__global__ void swiglu_forward_kernel(float *out, const float *g, const float *u, size_t n) {
    size_t i = trg_thread();
    if (i < n) out[i] = trk_swiglu(g[i], u[i]);
}

__global__ void swiglu_backward_kernel(float *dg, float *du, const float *g, const float *u, const float *dh, size_t n) {
    size_t i = trg_thread();
    if (i < n) trk_swiglu_back(g[i], u[i], dh[i], dg + i, du + i);
}

// Attention's softmax and backward rows around its GEMMs, in three steps so
// that each thread stays independent: a row (b, h, t) of T holds the
// query's scores (chains from the GEMM, unscaled) for t2 <= t.
// Step 1, one thread per row: the max of the scaled scores, in order.
__global__ void softmax_max_kernel(float *mx, const float *att, int rows, int T, float scale) {
    size_t r = trg_thread();
    if (r >= (size_t)rows) return;
    const float *a = att + r * T;
    int t = (int)(r % T);
    float m = -3.4e38f;
#pragma unroll 8
    for (int t2 = 0; t2 <= t; t2++) m = trk_max(m, a[t2] * scale);
    mx[r] = m;
}

// Step 2, one thread per (row, lane j): exp of the scaled scores t2 = j,
// j+32, ... <= t in place, and their sum in order: lane j of trk_sum.
__global__ void softmax_exp_kernel(float *att, float *lanes, const float *mx, int rows, int T, float scale) {
    size_t idx = trg_thread();
    if (idx >= (size_t)rows * TRK_LANES) return;
    size_t r = idx / TRK_LANES;
    int j = (int)(idx % TRK_LANES), t = (int)(r % T);
    float *a = att + r * T, m = mx[r], p = 0.0f;
    for (int t2 = j; t2 <= t; t2 += TRK_LANES) {
        a[t2] = tr_expf(a[t2] * scale - m);
        p = p + a[t2];
    }
    lanes[idx] = p;
}

// Step 3, one thread per row: 1 / the sum of the row's lanes (trk_tree32).
__global__ void softmax_inv_kernel(float *inv, const float *lanes, int rows) {
    size_t r = trg_thread();
    if (r >= (size_t)rows) return;
    float p[TRK_LANES];
    for (int j = 0; j < TRK_LANES; j++) p[j] = lanes[r * TRK_LANES + j];
    inv[r] = 1.0f / trk_tree32(p);
}

// Step 4, one thread per element: probabilities, 0 above the diagonal.
__global__ void softmax_norm_kernel(float *att, const float *inv, int rows, int T) {
    size_t idx = trg_thread();
    if (idx >= (size_t)rows * T) return;
    size_t r = idx / T;
    int t2 = (int)(idx % T), t = (int)(r % T);
    att[idx] = t2 <= t ? att[idx] * inv[r] : 0.0f;
}

// Backward, one thread per (row, lane j): lane j of trk_sum_products(a, datt).
__global__ void attention_dot_lanes_kernel(float *lanes, const float *att, const float *datt, int rows, int T) {
    size_t idx = trg_thread();
    if (idx >= (size_t)rows * TRK_LANES) return;
    size_t r = idx / TRK_LANES;
    int j = (int)(idx % TRK_LANES), t = (int)(r % T);
    float p = 0.0f;
    for (int t2 = j; t2 <= t; t2 += TRK_LANES) p = trk_fma(att[r * T + t2], datt[r * T + t2], p);
    lanes[idx] = p;
}

// Backward, one thread per row: sum(a datt), the tree over the lanes.
__global__ void attention_dot_kernel(float *dot, float *lanes, int rows) {
    size_t r = trg_thread();
    if (r >= (size_t)rows) return;
    dot[r] = trk_tree32(lanes + r * TRK_LANES);
}

// Backward, one thread per element: dpre = a (datt - sum(a datt)) scale, 0 above the diagonal.
__global__ void attention_dpre_kernel(float *dpre, const float *att, const float *dot, int rows, int T, float scale) {
    size_t idx = trg_thread();
    if (idx >= (size_t)rows * T) return;
    size_t r = idx / T;
    int t2 = (int)(idx % T), t = (int)(r % T);
    dpre[idx] = t2 <= t ? att[idx] * (dpre[idx] - dot[r]) * scale : 0.0f;
}

__global__ void gelu_forward_kernel(float *out, const float *x, size_t n) {
    size_t i = trg_thread();
    if (i < n) out[i] = trk_gelu(x[i]);
}

__global__ void gelu_backward_kernel(float *dinp, const float *x, const float *dout, size_t n) {
    size_t i = trg_thread();
    if (i < n) dinp[i] = trk_gelu_back(x[i], dout[i]);
}

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    size_t i = trg_thread();
    if (i < n) out[i] = a[i] + b[i];
}

// The cross-entropy of trk_crossentropy_row, in the steps of the softmax:
// one thread per row, the max of the logits in order.
__global__ void crossentropy_max_kernel(float *mx, const float *logits, int BT, int V, int Vp) {
    size_t r = trg_thread();
    if (r >= (size_t)BT) return;
    const float *l = logits + r * Vp;
    float m = -3.4e38f;
#pragma unroll 8
    for (int i = 0; i < V; i++) m = trk_max(m, l[i]);
    mx[r] = m;
}

// One thread per (row, lane j): exp(l - max) of i = j, j+32, ... < V, and their sum in order.
__global__ void crossentropy_exp_kernel(float *probs, float *lanes, const float *logits, const float *mx, int BT, int V, int Vp) {
    size_t idx = trg_thread();
    if (idx >= (size_t)BT * TRK_LANES) return;
    size_t r = idx / TRK_LANES;
    int j = (int)(idx % TRK_LANES);
    const float *l = logits + r * Vp;
    float *p = probs + r * Vp, m = mx[r], sum = 0.0f;
    for (int i = j; i < V; i += TRK_LANES) {
        p[i] = tr_expf(l[i] - m);
        sum = sum + p[i];
    }
    lanes[idx] = sum;
}

// One thread per row: the loss, and 1 / the sum for the probabilities.
__global__ void crossentropy_loss_kernel(float *losses, float *inv, float *lanes, const float *logits, const float *mx,
                                         const int32_t *targets, int BT, int Vp) {
    size_t r = trg_thread();
    if (r >= (size_t)BT) return;
    float sum = trk_tree32(lanes + r * TRK_LANES);
    inv[r] = 1.0f / sum;
    losses[r] = targets[r] < 0 ? 0.0f : tr_logf(sum) - (logits[r * Vp + targets[r]] - mx[r]);
}

// One thread per element: the probabilities, 0 in the padding.
__global__ void crossentropy_norm_kernel(float *probs, const float *inv, int BT, int V, int Vp) {
    size_t idx = trg_thread();
    if (idx >= (size_t)BT * Vp) return;
    int i = (int)(idx % Vp);
    probs[idx] = i < V ? probs[idx] * inv[idx / Vp] : 0.0f;
}

__global__ void crossentropy_backward_kernel(float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT, int V, int Vp) {
    size_t idx = trg_thread();
    if (idx >= (size_t)BT * Vp) return;
    int r = (int)(idx / Vp), i = (int)(idx % Vp);
    dlogits[idx] = i < V ? trk_dlogit(probs[idx], i == targets[r], trk_target_dloss(targets[r], dloss)) : 0.0f;
}

// ----------------------------------------------------------------------------
// Kernel launchers

#define THREADS 256
static unsigned blocks_for(size_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }

// Whether gemm_kernel can load every run of every tile as one aligned
// float4 (FAST): K a multiple of its k tile, each batch's operands 16-byte
// aligned with rows of a multiple of 4, and a transposed operand's n a
// multiple of 4 (rows past n are then clamped in whole float4s).
static bool gemm_fast(const tr_gemm_args &g, const trg_batch &bt) {
    return g.K % GT_K == 0 && (uintptr_t)g.a % 16 == 0 && (uintptr_t)g.b % 16 == 0 && g.lda % 4 == 0 && g.ldb % 4 == 0 &&
           (bt.a_outer | bt.a_inner | bt.b_outer | bt.b_inner) % 4 == 0 && (!g.ta || g.M % 4 == 0) && (!g.tb || g.N % 4 == 0);
}

static void gemm_batched(const tr_gemm_args &g, const trg_batch &bt, int count) {
    static void (*const variants[8])(tr_gemm_args, trg_batch) = {
        gemm_kernel<false, false, false>, gemm_kernel<false, false, true>, gemm_kernel<false, true, false>, gemm_kernel<false, true, true>,
        gemm_kernel<true, false, false>,  gemm_kernel<true, false, true>,  gemm_kernel<true, true, false>,  gemm_kernel<true, true, true>};
    void (*gemm_kernel)(tr_gemm_args, trg_batch) = variants[!!g.ta * 4 + !!g.tb * 2 + gemm_fast(g, bt)]; // its name for TRG_PROFILE
    dim3 grid((g.N + GT_N - 1) / GT_N, (g.M + GT_M - 1) / GT_M, count);
    TRG_LAUNCH_SYNC(gemm_kernel, grid, GT_THREADS, g, bt);
}

static void gemm(const tr_gemm_args &g) {
    trg_batch one = {1, 1, 0, 0, 0, 0, 0, 0, TRG_FULL};
    gemm_batched(g, one, 1);
}

// mx8 scratch: both operands of the largest linear GEMM, quantized.
typedef struct {
    int8_t *qa, *qb;
    float *sa, *sb;
    char refused[128]; // why this build cannot run mx8 (trg_run then fails), else empty
} trg_mx;

// The model's matrix products in its contract (mx8 when mx is set); mx8
// blocks restart every kseg along K.
static void matmul(const trg_mx *mx, const tr_gemm_args &g, int kseg) {
    if (!mx->qa) {
        gemm(g);
        return;
    }
    int nb = trk_mx_blocks(g.K, kseg), parts = TR_MX_PARTS(g.mx_slices);
    TRG_LAUNCH(mx_quant_kernel, blocks_for((size_t)g.M * nb * parts), THREADS, mx->qa, mx->sa, g.a, g.lda, g.ta, g.M, g.K, kseg, nb,
               g.mx_slices, 0);
    TRG_LAUNCH(mx_quant_kernel, blocks_for((size_t)g.N * nb * parts), THREADS, mx->qb, mx->sb, g.b, g.ldb, g.tb, g.N, g.K, kseg, nb,
               g.mx_slices, 1);
    dim3 grid((g.N + MX_TILE - 1) / MX_TILE, (g.M + MX_TILE - 1) / MX_TILE);
    TRG_LAUNCH_SYNC(mx_gemm_kernel, grid, MX_THREADS, g, nb * parts, mx->qa, mx->sa, mx->qb, mx->sb);
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N, int C) {
    TRG_LAUNCH(layernorm_forward_kernel, blocks_for(N), THREADS, out, mean, rstd, inp, w, b, N, C);
}

static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int N, int C) {
    TRG_LAUNCH(layernorm_backward_dinp_kernel, blocks_for(N), THREADS, dinp, dout, inp, w, mean, rstd, N, C);
    TRG_LAUNCH_SYNC(layernorm_backward_dw_kernel, (C + CH_COLS - 1) / CH_COLS, CH_THREADS, dw, db, dout, inp, mean, rstd, N, C);
}

static void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
    TRG_LAUNCH(rmsnorm_forward_kernel, blocks_for(N), THREADS, out, rstd, inp, w, N, C, eps);
}

static void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd, int N, int C) {
    TRG_LAUNCH(rmsnorm_backward_dinp_kernel, blocks_for(N), THREADS, dinp, dout, inp, w, rstd, N, C);
    TRG_LAUNCH_SYNC(rmsnorm_backward_dw_kernel, (C + CH_COLS - 1) / CH_COLS, CH_THREADS, dw, dout, inp, rstd, N, C);
}

// Scratch for the row-wise steps: two floats and 32 lanes per row of
// attention (B*NH*T rows) or of logits (B*T).
typedef struct {
    float *max, *val, *lanes;
} trg_rows;

// Attention of B sequences (qkv rows of QKVD = C + 2 KV hs floats): att
// (B, NH, T, T) the probabilities, out (B*T, C).
static void attention_forward(float *out, float *att, trg_rows sc, const float *qkv, int B, int T, int C, int NH, int KV) {
    int hs = C / NH, rows = B * NH * T;
    size_t stride = (size_t)C + 2 * (size_t)KV * hs, seq = (size_t)T * stride, tt = (size_t)T * T;
    float scale = 1.0f / trk_sqrt((float)hs);
    // scores(t, t2) = q(t) . k(t2)
    tr_gemm_args qk = {T, T, hs, qkv, (int)stride, qkv + C, (int)stride, att, T, NULL, 0, 0, 0};
    trg_batch qb = {NH, NH / KV, seq, (size_t)hs, seq, (size_t)hs, NH * tt, tt, TRG_N_UPTO_M};
    gemm_batched(qk, qb, B * NH);
    TRG_LAUNCH(softmax_max_kernel, blocks_for(rows), THREADS, sc.max, att, rows, T, scale);
    TRG_LAUNCH(softmax_exp_kernel, blocks_for((size_t)rows * TRK_LANES), THREADS, att, sc.lanes, sc.max, rows, T, scale);
    TRG_LAUNCH(softmax_inv_kernel, blocks_for(rows), THREADS, sc.val, sc.lanes, rows);
    TRG_LAUNCH(softmax_norm_kernel, blocks_for((size_t)rows * T), THREADS, att, sc.val, rows, T);
    // out(t) = sum over t2 <= t of a(t, t2) v(t2)
    tr_gemm_args ov = {T, hs, T, att, T, qkv + C + (size_t)KV * hs, (int)stride, out, C, NULL, 0, 0, 1};
    trg_batch ob = {NH, NH / KV, NH * tt, tt, seq, (size_t)hs, (size_t)T * C, (size_t)hs, TRG_K_UPTO_M};
    gemm_batched(ov, ob, B * NH);
}

// Its gradient into dqkv from dout (B*T, C): dq of each query head, and dk
// and dv of each key head chained over the heads of its group in order.
// dpre (B, NH, T, T): scratch.
static void attention_backward(float *dqkv, float *dpre, trg_rows sc, const float *dout, const float *att, const float *qkv,
                               int B, int T, int C, int NH, int KV) {
    int hs = C / NH, rows = B * NH * T, group = NH / KV;
    size_t stride = (size_t)C + 2 * (size_t)KV * hs, seq = (size_t)T * stride, tt = (size_t)T * T;
    float scale = 1.0f / trk_sqrt((float)hs);
    const float *k = qkv + C, *v = qkv + C + (size_t)KV * hs;
    // datt(t, t2) = dy(t) . v(t2), then dpre
    tr_gemm_args da = {T, T, hs, dout, C, v, (int)stride, dpre, T, NULL, 0, 0, 0};
    trg_batch db = {NH, group, (size_t)T * C, (size_t)hs, seq, (size_t)hs, NH * tt, tt, TRG_N_UPTO_M};
    gemm_batched(da, db, B * NH);
    TRG_LAUNCH(attention_dot_lanes_kernel, blocks_for((size_t)rows * TRK_LANES), THREADS, sc.lanes, att, dpre, rows, T);
    TRG_LAUNCH(attention_dot_kernel, blocks_for(rows), THREADS, sc.val, sc.lanes, rows);
    TRG_LAUNCH(attention_dpre_kernel, blocks_for((size_t)rows * T), THREADS, dpre, att, sc.val, rows, T, scale);
    // dq(t) = sum over t2 <= t of dpre(t, t2) k(t2)
    tr_gemm_args dq = {T, hs, T, dpre, T, k, (int)stride, dqkv, (int)stride, NULL, 0, 0, 1};
    trg_batch qb = {NH, group, NH * tt, tt, seq, (size_t)hs, seq, (size_t)hs, TRG_K_UPTO_M};
    gemm_batched(dq, qb, B * NH);
    // dk(t2) = sum over heads, then t >= t2, of dpre(t, t2) q(t); dv likewise with a and dy
    for (int j = 0; j < group; j++) {
        tr_gemm_args dk = {T, hs, T, dpre + (size_t)j * tt, T, qkv + (size_t)j * hs, (int)stride, dqkv + C, (int)stride, NULL, j > 0, 1, 1};
        tr_gemm_args dv = {T, hs, T, att + (size_t)j * tt, T, dout + (size_t)j * hs, C, dqkv + C + (size_t)KV * hs, (int)stride, NULL, j > 0, 1, 1};
        trg_batch kb = {KV, 1, NH * tt, group * tt, seq, (size_t)group * hs, seq, (size_t)hs, TRG_K_FROM_M};
        trg_batch vb = {KV, 1, NH * tt, group * tt, (size_t)T * C, (size_t)group * hs, seq, (size_t)hs, TRG_K_FROM_M};
        gemm_batched(dk, kb, B * KV);
        gemm_batched(dv, vb, B * KV);
    }
}

// probs (BT, Vp) and losses (BT) of logits (BT, Vp) (trk_crossentropy_row).
static void crossentropy_forward(float *probs, float *losses, trg_rows sc, const float *logits, const int32_t *targets,
                                 int BT, int V, int Vp) {
    TRG_LAUNCH(crossentropy_max_kernel, blocks_for(BT), THREADS, sc.max, logits, BT, V, Vp);
    TRG_LAUNCH(crossentropy_exp_kernel, blocks_for((size_t)BT * TRK_LANES), THREADS, probs, sc.lanes, logits, sc.max, BT, V, Vp);
    TRG_LAUNCH(crossentropy_loss_kernel, blocks_for(BT), THREADS, losses, sc.val, sc.lanes, logits, sc.max, targets, BT, Vp);
    TRG_LAUNCH(crossentropy_norm_kernel, blocks_for((size_t)BT * Vp), THREADS, probs, sc.val, BT, V, Vp);
}

// Device scratch that grows on demand, its contents dropped (trg_grow).
typedef struct {
    void *p;
    size_t bytes;
} trg_scratch;

// Tensor parallelism (trg_tp_attach): the ranks of a group, the leader
// first, step in lockstep as fibers of the calling thread (trg_group).
enum { TRG_MAX_TP = 8, TRG_TP_STACK = 8 << 20 }; // a thread's stack: a first launch may load (or JIT) modules
typedef struct {
    int n;                      // ranks
    trg_model *rank[TRG_MAX_TP];
    ucontext_t main, ctx[TRG_MAX_TP];
    char *stacks;               // n of TRG_TP_STACK bytes
    const std::function<int(trg_model *)> *body;
    int cur, rc[TRG_MAX_TP], done[TRG_MAX_TP];
    // The gather each rank stopped at: columns [0, cols) of rows of out
    // (row stride ld), whose slices the ranks computed (trg_part).
    float *out[TRG_MAX_TP];
    int ld[TRG_MAX_TP], rows[TRG_MAX_TP], cols[TRG_MAX_TP];
} trg_tp;

struct trg_model {
    tr_config cfg;
    int device;             // the CUDA ordinal; every entry point makes it current
    trg_tp *tp;             // its tensor-parallel group (the leader's, shared), or NULL
    int rank;               // its rank in tp: it computes slice rank of each split GEMM
    int levels;             // shard_grads' buffers
    float *shard_grads;     // (levels x N) the shard tree's partial sums above grads (../layout.h)
    size_t num_params;
    size_t offsets[TR_MAX_TENSORS]; // tr_param_layout (../layout.h)
    float *params, *grads;  // (N) device: the weights the forward pass sees, the last step's gradients
    float *adam_m, *adam_v; // (N) device AdamW moments, allocated on first upload
    float *delta, *lookahead; // (N) DeMo momentum or SparseLoCo error feedback, DeMo lookahead point: on first use
    float *pending;           // (N) DeMo's pending update (overlap): on first upload
    float *anchor, *anchor_m, *anchor_v; // (N) a SparseLoCo round's start: on first use
    float *dct[257];        // DCT-II matrices (D then D^T) by size, built on first use
    trg_scratch work, work_u, ent; // DeMo and SparseLoCo: tensor-sized floats and indices, payload entries
    float *norm_part, *h_norm_part; // (TRK_NORM_BLOCK blocks of N) the gradient norm's block sums, device and host
    float *dwte_emb;        // (Vp*C) the embedding's share of wte's gradient (model.c)
    float *acts, *dacts;    // device, the architecture's activation layouts (../layout.h) for act_cfg
    tr_config act_cfg;      // cfg, of one layer when recomputing (acts holds one layer's)
    float *resid;           // recompute: (L, B*T, C) each layer's output, the residual stream; else NULL
    float *dpre;            // (B, NH, T, T) attention backward
    trg_rows rows;          // (B*NH*T) rows of scratch
    const void *pinned[2];  // host buffers page-locked by trg_pin
    int pinned_ok[2];
    float *rope_cos, *rope_sin; // llama: (T, hs/2) device
    int32_t *tokens, *targets; // (B*T) device
    trg_mx mx;              // mx8: quantized operands (tr_mx_operand_codes), else all NULL
    float *h_losses;        // (B*T) host
    cudaError_t err;
    char name[256];
};

// ----------------------------------------------------------------------------
// Tensor parallelism. Every rank of a group runs the whole forward and
// backward on its own copy of the weights and activations, except that each
// linear layer's GEMMs are split along their outputs' N: rank r computes
// output columns [trg_part(N, r), trg_part(N, r + 1)) of the forward and of
// the input gradient, then the ranks gather each other's columns; and rows
// [trg_part(OC, r), ...) of the weight gradient, which the leader gathers
// once the step is done (trg_tp_grads). An output is then one chain over
// the whole K wherever it is computed, so any group gives one device's bits.

static int trg_ranks(const trg_model *g) { return g->tp ? g->tp->n : 1; }

// The first of slice r of n split over R ranks: whole float4s while they go.
static int trg_part(int n, int r, int R) { return r >= R ? n : (int)((long)(n / 4) * r / R) * 4; }

static thread_local trg_tp *trg_tp_now; // the group whose fiber runs, for trg_tp_main

static void trg_tp_main(void) {
    trg_tp *tp = trg_tp_now;
    int r = tp->cur;
    tp->rc[r] = (*tp->body)(tp->rank[r]);
    tp->done[r] = 1; // then uc_link returns to trg_group
}

// Columns [0, cols) of out (rows of ld floats) are split over g's group:
// it hands its slice to the others and waits for theirs (trg_tp_gather).
static void trg_gather(trg_model *g, float *out, int ld, int rows, int cols) {
    trg_tp *tp = g->tp;
    if (!tp) return;
    int r = g->rank;
    tp->out[r] = out;
    tp->ld[r] = ld;
    tp->rows[r] = rows;
    tp->cols[r] = cols;
    swapcontext(&tp->ctx[r], &tp->main);
}

// The pitched copy of width floats of rows rows (pitch ld) from src on
// device sd to dst on dd.
static cudaError_t trg_copy_rows(float *dst, int dd, const float *src, int sd, size_t ld, size_t width, size_t rows) {
    cudaMemcpy3DPeerParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr((void *)src, ld * sizeof(float), width * sizeof(float), rows);
    p.srcDevice = sd;
    p.dstPtr = make_cudaPitchedPtr(dst, ld * sizeof(float), width * sizeof(float), rows);
    p.dstDevice = dd;
    p.extent = make_cudaExtent(width * sizeof(float), rows, 1);
    return cudaMemcpy3DPeer(&p);
}

// Waits for every rank's device: what was launched there is done.
static cudaError_t trg_tp_sync(trg_tp *tp) {
    cudaError_t e = cudaSuccess;
    for (int r = 0; r < tp->n && e == cudaSuccess; r++)
        if ((e = cudaSetDevice(tp->rank[r]->device)) == cudaSuccess) e = cudaDeviceSynchronize();
    return e;
}

// Every rank stopped at the same gather: each slice goes to every other rank.
static int trg_tp_gather(trg_tp *tp) {
    trg_model *lead = tp->rank[0];
    for (int r = 1; r < tp->n; r++)
        if (tp->ld[r] != tp->ld[0] || tp->rows[r] != tp->rows[0] || tp->cols[r] != tp->cols[0]) return TR_EDEVICE; // out of step: a bug
    if ((lead->err = trg_tp_sync(tp)) != cudaSuccess) return TR_EDEVICE;
    for (int s = 0; s < tp->n; s++) {
        int c0 = trg_part(tp->cols[0], s, tp->n), c1 = trg_part(tp->cols[0], s + 1, tp->n);
        for (int d = 0; d < tp->n && c1 > c0; d++) {
            if (d == s) continue;
            lead->err = trg_copy_rows(tp->out[d] + c0, tp->rank[d]->device, tp->out[s] + c0, tp->rank[s]->device, (size_t)tp->ld[0],
                                      (size_t)(c1 - c0), (size_t)tp->rows[0]);
            if (lead->err != cudaSuccess) return TR_EDEVICE;
        }
    }
    return (lead->err = trg_tp_sync(tp)) == cudaSuccess ? TR_OK : TR_EDEVICE;
}

// Runs body on every rank of g's group in lockstep (on g alone without one):
// each rank is a fiber that runs until its next gather; once all stand
// there, the gather is done and they go on. Real devices still overlap:
// a fiber's launches are queued when it yields.
static int trg_group(trg_model *g, const std::function<int(trg_model *)> &body) {
    trg_tp *tp = g->tp;
    if (!tp) return body(g);
    tp->body = &body;
    for (int r = 0; r < tp->n; r++) {
        tp->done[r] = tp->rc[r] = 0;
        getcontext(&tp->ctx[r]);
        tp->ctx[r].uc_stack.ss_sp = tp->stacks + (size_t)r * TRG_TP_STACK;
        tp->ctx[r].uc_stack.ss_size = TRG_TP_STACK;
        tp->ctx[r].uc_link = &tp->main;
        makecontext(&tp->ctx[r], trg_tp_main, 0);
    }
    trg_tp *outer = trg_tp_now;
    int rc = TR_OK;
    for (;;) {
        int done = 0;
        for (int r = 0; r < tp->n; r++) {
            if ((g->err = cudaSetDevice(tp->rank[r]->device)) != cudaSuccess) { rc = TR_EDEVICE; goto out; }
            tp->cur = r;
            trg_tp_now = tp;
            swapcontext(&tp->main, &tp->ctx[r]);
            done += tp->done[r];
        }
        for (int r = 0; r < tp->n; r++) // a rank that failed ends the group: the others are left at their gather
            if (tp->rc[r]) {
                if (r) g->err = tp->rank[r]->err;
                rc = tp->rc[r];
                goto out;
            }
        if (done == tp->n) break;
        if (done || (rc = trg_tp_gather(tp))) { rc = rc ? rc : TR_EDEVICE; break; }
    }
out:
    trg_tp_now = outer;
    if (cudaSetDevice(g->device) != cudaSuccess && rc == TR_OK) rc = TR_EDEVICE;
    return rc;
}

// The matrices whose gradient rows the ranks split: the 3-d tensors
// (count matrices of rows x cols) and the lm head (wte when tied).
static int trg_split_tensor(const tr_config *c, int i, int shape[3]) {
    int nd = tr_param_shape(c, i, shape), head = tr_is_llama(c) ? (int)(c->untied ? TR_L_lmhead : TR_L_wte) : (int)TR_P_wte;
    if (i == head) {
        shape[2] = shape[1];
        shape[1] = shape[0];
        shape[0] = 1;
        return 1;
    }
    return nd == 3;
}

// After a step, the leader takes each rank's rows of the split weight
// gradients (the rest of every rank's gradients is the leader's own bits).
static int trg_tp_grads(trg_model *g) {
    trg_tp *tp = g->tp;
    if ((g->err = trg_tp_sync(tp)) != cudaSuccess) return TR_EDEVICE;
    for (int i = 0; i < tr_tensor_count(&g->cfg); i++) {
        int sh[3];
        if (!trg_split_tensor(&g->cfg, i, sh)) continue;
        size_t pitch = (size_t)sh[1] * sh[2];
        for (int r = 1; r < tp->n; r++) {
            int o0 = trg_part(sh[1], r, tp->n), o1 = trg_part(sh[1], r + 1, tp->n);
            size_t at = g->offsets[i] + (size_t)o0 * sh[2];
            if (o1 > o0 && (g->err = trg_copy_rows(g->grads + at, g->device, tp->rank[r]->grads + at, tp->rank[r]->device, pitch,
                                                   (size_t)(o1 - o0) * sh[2], (size_t)sh[0])) != cudaSuccess)
                return TR_EDEVICE;
        }
    }
    if ((g->err = trg_tp_sync(tp)) != cudaSuccess || (g->err = cudaSetDevice(g->device)) != cudaSuccess) return TR_EDEVICE;
    return TR_OK;
}

// out(BT, OC; row stride ldo) = inp(BT, IC; ldi) w(OC, IC)^T + bias(OC):
// this rank's columns, then the group's.
static void linear_forward(trg_model *g, float *out, int ldo, const float *inp, int ldi, const float *w, const float *bias,
                           int BT, int IC, int OC) {
    int R = trg_ranks(g), o0 = trg_part(OC, g->rank, R), o1 = trg_part(OC, g->rank + 1, R);
    tr_gemm_args a = {BT, o1 - o0, IC, inp, ldi, w + (size_t)o0 * IC, IC, out + o0, ldo, bias ? bias + o0 : NULL, 0, 0, 0};
    if (o1 > o0) matmul(&g->mx, a, IC);
    trg_gather(g, out, ldo, BT, OC);
}

// dinp(BT, IC) = dout w (accumulate: on from dinp), dw(OC, IC) += dout^T inp,
// dbias(OC) += column sums of dout (row stride ldd); rows are sequences of
// T tokens (mx8 blocks of dw's K stay within one). In a group: dinp's
// columns as linear_forward's, dw's rows of this rank only, dbias whole.
static void linear_backward(trg_model *g, float *dinp, int accumulate, float *dw, float *dbias, const float *dout, int ldd,
                            const float *inp, int ldi, const float *w, int BT, int T, int IC, int OC) {
    int R = trg_ranks(g), i0 = trg_part(IC, g->rank, R), i1 = trg_part(IC, g->rank + 1, R);
    int o0 = trg_part(OC, g->rank, R), o1 = trg_part(OC, g->rank + 1, R);
    tr_gemm_args gi = {BT, i1 - i0, OC, dout, ldd, w + i0, IC, dinp + i0, IC, NULL, accumulate, 0, 1, TR_MX_DINP_SLICES};
    tr_gemm_args gw = {o1 - o0, IC, BT, dout + o0, ldd, inp, ldi, dw + (size_t)o0 * IC, IC, NULL, 1, 1, 1};
    if (i1 > i0) matmul(&g->mx, gi, OC);
    if (o1 > o0) matmul(&g->mx, gw, T);
    if (dbias) TRG_LAUNCH_SYNC(bias_backward_kernel, (OC + CH_COLS - 1) / CH_COLS, CH_THREADS, dbias, dout, ldd, BT, OC);
    trg_gather(g, dinp, IC, BT, IC);
}

// ----------------------------------------------------------------------------
// Model: the architectures as gpt.c and llama.c run them.

// Activation recompute (tr_config.recompute): the device keeps each
// layer's input, the residual stream (resid), and one layer's other
// activations (slot 0); backward runs each layer's forward again before its
// backward, the same launches on the same inputs, so the same bits.
// Without it every layer keeps its own (slot l), except attention's
// probabilities, of which one layer's are kept (../layout.h).
static size_t trg_layer_slot(const trg_model *g, int l) { return g->resid ? 0 : (size_t)l; }

// The residual stream after layer l (-1: the embeddings), BTC floats a layer.
static float *trg_stream(const trg_model *g, float *encoded, float *residual3, int l, size_t BTC) {
    return l < 0 ? encoded : (g->resid ? g->resid : residual3) + (size_t)l * BTC;
}

static void gpt_layer_forward(trg_model *g, const tr_params *p, const tr_acts *a, int l, int B, int T) {
    int C = g->cfg.channels, NH = g->cfg.heads;
    size_t BT = (size_t)B * T, s = trg_layer_slot(g, l);
    const float *residual = trg_stream(g, a->encoded, a->residual3, l - 1, BT * C);
    float *ln1 = a->ln1 + s * BT * C, *qkv = a->qkv + s * BT * 3 * C, *atty = a->atty + s * BT * C;
    float *att = a->att, *res2 = a->residual2 + s * BT * C, *ln2 = a->ln2 + s * BT * C;
    float *fch = a->fch + s * BT * 4 * C, *fchg = a->fch_gelu + s * BT * 4 * C, *res3 = trg_stream(g, a->encoded, a->residual3, l, BT * C);
    layernorm_forward(ln1, a->ln1_mean + s * BT, a->ln1_rstd + s * BT, residual, p->ln1w + l * C, p->ln1b + l * C, (int)BT, C);
    linear_forward(g, qkv, 3 * C, ln1, C, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, (int)BT, C, 3 * C);
    attention_forward(atty, att, g->rows, qkv, B, T, C, NH, NH);
    linear_forward(g, res3, C, atty, C, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, (int)BT, C, C);
    TRG_LAUNCH(add_kernel, blocks_for(BT * C), THREADS, res2, residual, res3, BT * C);
    layernorm_forward(ln2, a->ln2_mean + s * BT, a->ln2_rstd + s * BT, res2, p->ln2w + l * C, p->ln2b + l * C, (int)BT, C);
    linear_forward(g, fch, 4 * C, ln2, C, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, (int)BT, C, 4 * C);
    TRG_LAUNCH(gelu_forward_kernel, blocks_for(BT * 4 * C), THREADS, fchg, fch, BT * 4 * C);
    linear_forward(g, res3, C, fchg, 4 * C, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, (int)BT, 4 * C, C);
    TRG_LAUNCH(add_kernel, blocks_for(BT * C), THREADS, res3, res2, res3, BT * C);
}

static const float *gpt_forward(trg_model *g, float *w, int B, int T) {
    int L = g->cfg.layers, C = g->cfg.channels, Vp = g->cfg.padded_vocab, V = g->cfg.vocab;
    size_t BT = (size_t)B * T;
    tr_params pv = tr_param_views(w, g->offsets), *p = &pv;
    tr_acts av, *a = &av;
    tr_act_layout(&g->act_cfg, B, T, g->acts, a);
    TRG_LAUNCH(encoder_forward_kernel, blocks_for(BT * C), THREADS, a->encoded, g->tokens, p->wte, p->wpe, (int)BT, T, C);
    for (int l = 0; l < L; l++) gpt_layer_forward(g, p, a, l, B, T);
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, trg_stream(g, a->encoded, a->residual3, L - 1, BT * C), p->lnfw, p->lnfb, (int)BT, C);
    linear_forward(g, a->logits, Vp, a->lnf, C, p->wte, NULL, (int)BT, C, Vp);
    crossentropy_forward(a->probs, a->losses, g->rows, a->logits, g->targets, (int)BT, V, Vp);
    return a->losses;
}

static void gpt_backward(trg_model *g, float *w, float *gw, float dloss, int B, int T) {
    int L = g->cfg.layers, C = g->cfg.channels, NH = g->cfg.heads, Vp = g->cfg.padded_vocab, V = g->cfg.vocab;
    size_t BT = (size_t)B * T;
    tr_params pv = tr_param_views(w, g->offsets), grv = tr_param_views(gw, g->offsets), *p = &pv, *gr = &grv;
    tr_acts av, *a = &av;
    tr_dacts dv, *d = &dv;
    tr_act_layout(&g->act_cfg, B, T, g->acts, a);
    tr_dact_layout(&g->cfg, B, T, g->dacts, d);
    TRG_LAUNCH(crossentropy_backward_kernel, blocks_for(BT * Vp), THREADS, d->dlogits, a->probs, g->targets, dloss, (int)BT, V, Vp);
    linear_backward(g, d->dln, 0, gr->wte, NULL, d->dlogits, Vp, a->lnf, C, p->wte, (int)BT, T, C, Vp);
    cudaMemsetAsync(d->dres, 0, sizeof(float) * BT * C);
    layernorm_backward(d->dres, gr->lnfw, gr->lnfb, d->dln, trg_stream(g, a->encoded, a->residual3, L - 1, BT * C), p->lnfw, a->lnf_mean,
                       a->lnf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        if (g->resid) gpt_layer_forward(g, p, a, l, B, T); // this layer's activations again (attention's too)
        size_t s = trg_layer_slot(g, l);
        const float *residual = trg_stream(g, a->encoded, a->residual3, l - 1, BT * C);
        const float *ln1 = a->ln1 + s * BT * C, *qkv = a->qkv + s * BT * 3 * C, *atty = a->atty + s * BT * C;
        const float *res2 = a->residual2 + s * BT * C, *ln2 = a->ln2 + s * BT * C;
        const float *fch = a->fch + s * BT * 4 * C, *fchg = a->fch_gelu + s * BT * 4 * C;
        linear_backward(g, d->dfch_gelu, 0, gr->fcprojw + (size_t)l * C * 4 * C, gr->fcprojb + l * C, d->dres, C, fchg, 4 * C,
                        p->fcprojw + (size_t)l * C * 4 * C, (int)BT, T, 4 * C, C);
        TRG_LAUNCH(gelu_backward_kernel, blocks_for(BT * 4 * C), THREADS, d->dfch, fch, d->dfch_gelu, BT * 4 * C);
        linear_backward(g, d->dln, 0, gr->fcw + (size_t)l * 4 * C * C, gr->fcb + l * 4 * C, d->dfch, 4 * C, ln2, C,
                        p->fcw + (size_t)l * 4 * C * C, (int)BT, T, C, 4 * C);
        layernorm_backward(d->dres, gr->ln2w + l * C, gr->ln2b + l * C, d->dln, res2, p->ln2w + l * C,
                           a->ln2_mean + s * BT, a->ln2_rstd + s * BT, (int)BT, C);
        linear_backward(g, d->datty, 0, gr->attprojw + (size_t)l * C * C, gr->attprojb + l * C, d->dres, C, atty, C,
                        p->attprojw + (size_t)l * C * C, (int)BT, T, C, C);
        // This layer's probabilities again, as forward computed them (it
        // also writes atty's same bits): one layer's are kept.
        if (!g->resid) attention_forward((float *)atty, a->att, g->rows, qkv, B, T, C, NH, NH);
        attention_backward(d->dqkv, g->dpre, g->rows, d->datty, a->att, qkv, B, T, C, NH, NH);
        linear_backward(g, d->dln, 0, gr->qkvw + (size_t)l * 3 * C * C, gr->qkvb + l * 3 * C, d->dqkv, 3 * C, ln1, C,
                        p->qkvw + (size_t)l * 3 * C * C, (int)BT, T, C, 3 * C);
        layernorm_backward(d->dres, gr->ln1w + l * C, gr->ln1b + l * C, d->dln, residual, p->ln1w + l * C,
                           a->ln1_mean + s * BT, a->ln1_rstd + s * BT, (int)BT, C);
    }
    TRG_LAUNCH(encoder_backward_kernel, blocks_for(C), THREADS, g->dwte_emb, gr->wpe, d->dres, g->tokens, (int)BT, T, C);
}

static void llama_layer_forward(trg_model *g, const tr_llama_params *p, const tr_llama_acts *a, int l, int B, int T) {
    const tr_config *c = &g->cfg;
    int C = c->channels, NH = c->heads, KV = c->kv_heads, H = c->hidden;
    int KVD = tr_kv_dim(c), QKVD = C + 2 * KVD;
    size_t BT = (size_t)B * T, s = trg_layer_slot(g, l);
    const float *residual = trg_stream(g, a->encoded, a->residual3, l - 1, BT * C);
    float *rms1 = a->rms1 + s * BT * C, *qkv = a->qkv + s * BT * QKVD, *atty = a->atty + s * BT * C;
    float *att = a->att, *res2 = a->residual2 + s * BT * C, *rms2 = a->rms2 + s * BT * C;
    float *gate = a->gate + s * BT * H, *up = a->up + s * BT * H, *hmid = a->hmid + s * BT * H;
    float *res3 = trg_stream(g, a->encoded, a->residual3, l, BT * C);
    rmsnorm_forward(rms1, a->rms1_rstd + s * BT, residual, p->rms1w + l * C, (int)BT, C, tr_rms_eps(c));
    linear_forward(g, qkv, QKVD, rms1, C, p->wq + (size_t)l * C * C, TR_LAYER(p->bq, l, C), (int)BT, C, C);
    linear_forward(g, qkv + C, QKVD, rms1, C, p->wk + (size_t)l * KVD * C, TR_LAYER(p->bk, l, KVD), (int)BT, C, KVD);
    linear_forward(g, qkv + C + KVD, QKVD, rms1, C, p->wv + (size_t)l * KVD * C, TR_LAYER(p->bv, l, KVD), (int)BT, C, KVD);
    TRG_LAUNCH(rope_kernel, blocks_for(BT * (NH + KV)), THREADS, qkv, g->rope_cos, g->rope_sin, (int)BT, T, C, NH, KV, 0);
    attention_forward(atty, att, g->rows, qkv, B, T, C, NH, KV);
    linear_forward(g, res3, C, atty, C, p->wo + (size_t)l * C * C, NULL, (int)BT, C, C);
    TRG_LAUNCH(add_kernel, blocks_for(BT * C), THREADS, res2, residual, res3, BT * C);
    rmsnorm_forward(rms2, a->rms2_rstd + s * BT, res2, p->rms2w + l * C, (int)BT, C, tr_rms_eps(c));
    linear_forward(g, gate, H, rms2, C, p->wgate + (size_t)l * H * C, NULL, (int)BT, C, H);
    linear_forward(g, up, H, rms2, C, p->wup + (size_t)l * H * C, NULL, (int)BT, C, H);
    TRG_LAUNCH(swiglu_forward_kernel, blocks_for(BT * H), THREADS, hmid, gate, up, BT * H);
    linear_forward(g, res3, C, hmid, H, p->wdown + (size_t)l * C * H, NULL, (int)BT, H, C);
    TRG_LAUNCH(add_kernel, blocks_for(BT * C), THREADS, res3, res2, res3, BT * C);
}

static const float *llama_forward(trg_model *g, float *w, int B, int T) {
    const tr_config *c = &g->cfg;
    int L = c->layers, C = c->channels, Vp = c->padded_vocab, V = c->vocab;
    size_t BT = (size_t)B * T;
    tr_llama_params p = tr_llama_views(c, w, g->offsets);
    tr_llama_acts a;
    tr_llama_act_layout(&g->act_cfg, B, T, g->acts, &a);
    TRG_LAUNCH(encoder_forward_kernel, blocks_for(BT * C), THREADS, a.encoded, g->tokens, p.wte, (const float *)NULL, (int)BT, T, C);
    for (int l = 0; l < L; l++) llama_layer_forward(g, &p, &a, l, B, T);
    rmsnorm_forward(a.rmsf, a.rmsf_rstd, trg_stream(g, a.encoded, a.residual3, L - 1, BT * C), p.rmsfw, (int)BT, C, tr_rms_eps(c));
    linear_forward(g, a.logits, Vp, a.rmsf, C, p.lmhead, NULL, (int)BT, C, Vp);
    crossentropy_forward(a.probs, a.losses, g->rows, a.logits, g->targets, (int)BT, V, Vp);
    return a.losses;
}

static void llama_backward(trg_model *g, float *w, float *gw, float dloss, int B, int T) {
    const tr_config *c = &g->cfg;
    int L = c->layers, C = c->channels, NH = c->heads, KV = c->kv_heads, H = c->hidden, Vp = c->padded_vocab, V = c->vocab;
    int KVD = tr_kv_dim(c), QKVD = C + 2 * KVD;
    size_t BT = (size_t)B * T;
    tr_llama_params p = tr_llama_views(c, w, g->offsets), gr = tr_llama_views(c, gw, g->offsets);
    tr_llama_acts a;
    tr_llama_dacts d;
    tr_llama_act_layout(&g->act_cfg, B, T, g->acts, &a);
    tr_llama_dact_layout(c, B, T, g->dacts, &d);
    TRG_LAUNCH(crossentropy_backward_kernel, blocks_for(BT * Vp), THREADS, d.dlogits, a.probs, g->targets, dloss, (int)BT, V, Vp);
    linear_backward(g, d.dln, 0, gr.lmhead, NULL, d.dlogits, Vp, a.rmsf, C, p.lmhead, (int)BT, T, C, Vp);
    cudaMemsetAsync(d.dres, 0, sizeof(float) * BT * C);
    rmsnorm_backward(d.dres, gr.rmsfw, d.dln, trg_stream(g, a.encoded, a.residual3, L - 1, BT * C), p.rmsfw, a.rmsf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        if (g->resid) llama_layer_forward(g, &p, &a, l, B, T); // as in gpt_backward
        size_t s = trg_layer_slot(g, l);
        const float *residual = trg_stream(g, a.encoded, a.residual3, l - 1, BT * C);
        const float *rms1 = a.rms1 + s * BT * C, *qkv = a.qkv + s * BT * QKVD, *atty = a.atty + s * BT * C;
        const float *res2 = a.residual2 + s * BT * C, *rms2 = a.rms2 + s * BT * C;
        const float *gate = a.gate + s * BT * H, *up = a.up + s * BT * H, *hmid = a.hmid + s * BT * H;
        linear_backward(g, d.dhmid, 0, gr.wdown + (size_t)l * C * H, NULL, d.dres, C, hmid, H, p.wdown + (size_t)l * C * H, (int)BT, T, H, C);
        TRG_LAUNCH(swiglu_backward_kernel, blocks_for(BT * H), THREADS, d.dgate, d.dup, gate, up, d.dhmid, BT * H);
        linear_backward(g, d.dln, 0, gr.wup + (size_t)l * H * C, NULL, d.dup, H, rms2, C, p.wup + (size_t)l * H * C, (int)BT, T, C, H);
        linear_backward(g, d.dln, 1, gr.wgate + (size_t)l * H * C, NULL, d.dgate, H, rms2, C, p.wgate + (size_t)l * H * C, (int)BT, T, C, H);
        rmsnorm_backward(d.dres, gr.rms2w + l * C, d.dln, res2, p.rms2w + l * C, a.rms2_rstd + s * BT, (int)BT, C);
        linear_backward(g, d.datty, 0, gr.wo + (size_t)l * C * C, NULL, d.dres, C, atty, C, p.wo + (size_t)l * C * C, (int)BT, T, C, C);
        if (!g->resid) attention_forward((float *)atty, a.att, g->rows, qkv, B, T, C, NH, KV); // as in gpt_backward
        attention_backward(d.dqkv, g->dpre, g->rows, d.datty, a.att, qkv, B, T, C, NH, KV);
        TRG_LAUNCH(rope_kernel, blocks_for(BT * (NH + KV)), THREADS, d.dqkv, g->rope_cos, g->rope_sin, (int)BT, T, C, NH, KV, 1);
        linear_backward(g, d.dln, 0, gr.wq + (size_t)l * C * C, TR_LAYER(gr.bq, l, C), d.dqkv, QKVD, rms1, C, p.wq + (size_t)l * C * C,
                        (int)BT, T, C, C);
        linear_backward(g, d.dln, 1, gr.wk + (size_t)l * KVD * C, TR_LAYER(gr.bk, l, KVD), d.dqkv + C, QKVD, rms1, C,
                        p.wk + (size_t)l * KVD * C, (int)BT, T, C, KVD);
        linear_backward(g, d.dln, 1, gr.wv + (size_t)l * KVD * C, TR_LAYER(gr.bv, l, KVD), d.dqkv + C + KVD, QKVD, rms1, C,
                        p.wv + (size_t)l * KVD * C, (int)BT, T, C, KVD);
        rmsnorm_backward(d.dres, gr.rms1w + l * C, d.dln, residual, p.rms1w + l * C, a.rms1_rstd + s * BT, (int)BT, C);
    }
    TRG_LAUNCH(encoder_backward_kernel, blocks_for(C), THREADS, g->dwte_emb, (float *)NULL, d.dres, g->tokens, (int)BT, T, C);
}

// ----------------------------------------------------------------------------
// API

#define CK(call)                                     \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess) { g->err = e_; return TR_EDEVICE; } \
    } while (0)

// Every entry point runs on its model's device, whichever host thread calls
// it (the current device is per thread; data parallelism steps each device
// from a thread of its own).
#define TRG_USE(g) CK(cudaSetDevice((g)->device))

extern "C" int trg_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

extern "C" const char *trg_device_name(const trg_model *g) { return g ? g->name : ""; }

extern "C" int trg_device_memory(int device, size_t *total, char *name, size_t name_len) {
    size_t free_b;
    cudaDeviceProp prop;
    if (!total || !name || name_len < 1 || device < 0 || device >= trg_device_count()) return TR_EINVAL;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, total) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return TR_EDEVICE;
    snprintf(name, name_len, "%s", prop.name);
    return TR_OK;
}
extern "C" const char *trg_last_error(const trg_model *g) {
    return !g ? "" : g->mx.refused[0] ? g->mx.refused : cudaGetErrorString(g->err);
}

extern "C" void trg_destroy(trg_model *g) {
    if (!g) return;
    trg_prof_print();
    if (g->tp) { // one member gone dissolves its group
        trg_tp *tp = g->tp;
        for (int r = 0; r < tp->n; r++) {
            tp->rank[r]->tp = NULL;
            tp->rank[r]->rank = 0;
        }
        free(tp->stacks);
        free(tp);
    }
    for (int i = 0; i < 2; i++)
        if (g->pinned_ok[i]) cudaHostUnregister((void *)g->pinned[i]);
    cudaSetDevice(g->device);
    cudaFree(g->params); cudaFree(g->grads); cudaFree(g->shard_grads); cudaFree(g->dwte_emb); cudaFree(g->acts); cudaFree(g->resid); cudaFree(g->dacts);
    cudaFree(g->dpre); cudaFree(g->rows.max); cudaFree(g->rows.val); cudaFree(g->rows.lanes); cudaFree(g->rope_cos); cudaFree(g->rope_sin); cudaFree(g->tokens); cudaFree(g->targets);
    cudaFree(g->mx.qa); cudaFree(g->mx.qb); cudaFree(g->mx.sa); cudaFree(g->mx.sb);
    cudaFree(g->adam_m); cudaFree(g->adam_v); cudaFree(g->norm_part);
    cudaFree(g->delta); cudaFree(g->lookahead); cudaFree(g->anchor); cudaFree(g->anchor_m); cudaFree(g->anchor_v); cudaFree(g->pending);
    for (int i = 0; i < 257; i++) cudaFree(g->dct[i]);
    cudaFree(g->work.p); cudaFree(g->work_u.p); cudaFree(g->ent.p);
    cudaFreeHost(g->h_losses); cudaFreeHost(g->h_norm_part);
    free(g);
}

extern "C" int trg_create(const tr_config *cfg, int device, int levels, trg_model **out) {
    if (!cfg || !out || device < 0 || device >= trg_device_count() || levels < 0 || levels >= TR_MAX_SHARD_LEVELS) return TR_EINVAL;
    *out = NULL;
    trg_model *g = (trg_model *)calloc(1, sizeof *g);
    if (!g) return TR_ENOMEM;
    g->cfg = *cfg;
    g->device = device;
    g->levels = levels;
    size_t T = cfg->seq_len, half = (size_t)cfg->channels / cfg->heads / 2;
    size_t sizes[TR_MAX_TENSORS];
    size_t off = tr_param_layout(cfg, sizes, g->offsets);
    g->num_params = off;
    size_t B = cfg->micro_batch, BT = B * T;
    float *table = NULL;
    cudaDeviceProp prop;
    int rc = TR_EDEVICE;
#define GALLOC(ptr, bytes) do { if ((g->err = cudaMalloc((void **)&(ptr), (bytes))) != cudaSuccess) goto fail; } while (0)
    if ((g->err = cudaSetDevice(device)) != cudaSuccess) goto fail;
    if ((g->err = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) goto fail;
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    GALLOC(g->params, sizeof(float) * off);
    GALLOC(g->grads, sizeof(float) * off);
    if (levels) GALLOC(g->shard_grads, sizeof(float) * off * levels);
    GALLOC(g->dwte_emb, sizeof(float) * sizes[TR_P_wte]);
    g->act_cfg = *cfg;
    if (cfg->recompute) {
        g->act_cfg.layers = 1;
        GALLOC(g->resid, sizeof(float) * cfg->layers * BT * cfg->channels);
    }
    GALLOC(g->acts, sizeof(float) * tr_gpu_act_floats(&g->act_cfg, (int)B, (int)T));
    GALLOC(g->dacts, sizeof(float) * tr_act_floats(cfg, (int)B, (int)T, 1));
    GALLOC(g->dpre, sizeof(float) * tr_att_rows(cfg) * T);
    GALLOC(g->rows.max, sizeof(float) * tr_att_rows(cfg));
    GALLOC(g->rows.val, sizeof(float) * tr_att_rows(cfg));
    GALLOC(g->rows.lanes, sizeof(float) * tr_att_rows(cfg) * TRK_LANES);
    GALLOC(g->tokens, sizeof(int32_t) * BT);
    GALLOC(g->targets, sizeof(int32_t) * BT);
    if (cfg->arith == TR_ARITH_MX8) {
        size_t qa, qb;
        tr_mx_operand_codes(cfg, &qa, &qb);
        GALLOC(g->mx.qa, qa);
        GALLOC(g->mx.qb, qb);
        GALLOC(g->mx.sa, sizeof(float) * qa / TRK_MX_BLOCK);
        GALLOC(g->mx.sb, sizeof(float) * qb / TRK_MX_BLOCK);
        cudaFuncAttributes fa; // the architecture mx_gemm_kernel was compiled for (a failure is left to the launches)
        if (cudaFuncGetAttributes(&fa, mx_gemm_kernel) != cudaSuccess) cudaGetLastError();
        else if (fa.ptxVersion < 80)
            snprintf(g->mx.refused, sizeof g->mx.refused, "mx8 needs sm_80 or newer (mma.sync s8); this library was built for compute_%d",
                     fa.ptxVersion);
    }
    GALLOC(g->norm_part, sizeof(float) * trk_norm_blocks(off));
    if ((g->err = cudaMallocHost((void **)&g->h_losses, sizeof(float) * BT)) != cudaSuccess) goto fail;
    if ((g->err = cudaMallocHost((void **)&g->h_norm_part, sizeof(float) * trk_norm_blocks(off))) != cudaSuccess) goto fail;
    if (tr_is_llama(cfg)) { // the rotary tables, built on the host as the CPU path builds them
        GALLOC(g->rope_cos, sizeof(float) * T * half);
        GALLOC(g->rope_sin, sizeof(float) * T * half);
        if (!(table = (float *)malloc(sizeof(float) * 2 * T * half))) { g->err = cudaErrorMemoryAllocation; goto fail; }
        trk_rope_table(table, table + T * half, (int)T, (int)(2 * half), cfg);
        if ((g->err = cudaMemcpy(g->rope_cos, table, sizeof(float) * T * half, cudaMemcpyHostToDevice)) != cudaSuccess ||
            (g->err = cudaMemcpy(g->rope_sin, table + T * half, sizeof(float) * T * half, cudaMemcpyHostToDevice)) != cudaSuccess)
            goto fail;
        free(table);
        table = NULL;
    }
#undef GALLOC
    *out = g;
    return TR_OK;
fail:
    if (g->err == cudaErrorMemoryAllocation) rc = TR_ENOMEM;
    free(table);
    trg_destroy(g);
    return rc;
}

// Page-locks a host buffer on its first copy, so that copies run at the
// bus's speed rather than through a staging buffer (the trainer's weights
// and gradients, which live until trg_destroy). A buffer that cannot be
// locked is remembered and copied as before.
static void trg_pin(trg_model *g, const void *p, size_t bytes) {
    for (int i = 0; i < 2; i++) {
        if (g->pinned[i] == p) return;
        if (!g->pinned[i]) {
            g->pinned[i] = p;
            g->pinned_ok[i] = cudaHostRegister((void *)p, bytes, cudaHostRegisterDefault) == cudaSuccess;
            if (!g->pinned_ok[i]) cudaGetLastError(); // not sticky: clear it
            return;
        }
    }
}

static float **trg_slot(trg_model *g, int buf) {
    switch (buf) {
    case TRG_PARAMS: return &g->params;
    case TRG_GRADS: return &g->grads;
    case TRG_ADAM_M: return &g->adam_m;
    case TRG_ADAM_V: return &g->adam_v;
    case TRG_DELTA: return &g->delta;
    case TRG_LOOKAHEAD: return &g->lookahead;
    case TRG_ANCHOR: return &g->anchor;
    case TRG_ANCHOR_M: return &g->anchor_m;
    case TRG_ANCHOR_V: return &g->anchor_v;
    case TRG_PENDING: return &g->pending;
    default: return NULL;
    }
}

// The device buffer buf (TRG_*) of nparams floats; all but the weights and
// gradients are allocated on first use when alloc is set, else NULL until then.
static int trg_buffer(trg_model *g, int buf, size_t nparams, int alloc, float **out) {
    if (!g || nparams != g->num_params) return TR_EINVAL;
    float **p = trg_slot(g, buf);
    if (!p) return TR_EINVAL;
    if (!*p && alloc) {
        if ((g->err = cudaSetDevice(g->device)) != cudaSuccess) return TR_EDEVICE;
        if ((g->err = cudaMalloc((void **)p, sizeof(float) * nparams)) != cudaSuccess) {
            *p = NULL;
            return g->err == cudaErrorMemoryAllocation ? TR_ENOMEM : TR_EDEVICE;
        }
    }
    if (!*p) return TR_EINVAL;
    *out = *p;
    return TR_OK;
}

extern "C" int trg_upload(trg_model *g, int buf, const float *host, size_t nparams) {
    float *d;
    int rc = host ? trg_buffer(g, buf, nparams, 1, &d) : TR_EINVAL;
    if (rc) return rc;
    TRG_USE(g);
    if (buf == TRG_PARAMS || buf == TRG_GRADS) trg_pin(g, host, sizeof(float) * nparams);
    CK(TRG_TIMED_COPY("copy to device", d, host, sizeof(float) * nparams, cudaMemcpyHostToDevice));
    return TR_OK;
}

extern "C" int trg_download(trg_model *g, int buf, float *host, size_t nparams) {
    float *d;
    int rc = host ? trg_buffer(g, buf, nparams, 0, &d) : TR_EINVAL;
    if (rc) return rc;
    TRG_USE(g);
    if (buf == TRG_PARAMS || buf == TRG_GRADS) trg_pin(g, host, sizeof(float) * nparams);
    CK(TRG_TIMED_COPY("copy to host", host, d, sizeof(float) * nparams, cudaMemcpyDeviceToHost));
    return TR_OK;
}

extern "C" int trg_copy(trg_model *g, int dst, int src) {
    float *s, *d;
    int rc = g ? trg_buffer(g, src, g->num_params, 0, &s) : TR_EINVAL;
    if (rc) return rc;
    TRG_USE(g);
    if ((rc = trg_buffer(g, dst, g->num_params, 1, &d))) return rc;
    CK(TRG_TIMED_COPY("copy on device", d, s, sizeof(float) * g->num_params, cudaMemcpyDeviceToDevice));
    return TR_OK;
}

// Runs the micro-batches of sequences [b0, b1) at the device weights w,
// their losses chained onto *sum; into gw (zeroed first, then wte's
// embedding share added) when it is set.
static int trg_chain(trg_model *g, float *w, float *gw, const int32_t *tokens, const int32_t *targets, int b0, int b1,
                     int t, float dloss, float *sum) {
    size_t wte_n = (size_t)g->cfg.padded_vocab * g->cfg.channels; // wte is tensor 0 in both layouts
    if (gw) {
        CK(cudaMemset(gw, 0, sizeof(float) * g->num_params));
        CK(cudaMemset(g->dwte_emb, 0, sizeof(float) * wte_n));
    }
    int llama = tr_is_llama(&g->cfg);
    for (; b0 < b1; b0 += g->cfg.micro_batch) {
        int B = b1 - b0 < g->cfg.micro_batch ? b1 - b0 : g->cfg.micro_batch;
        size_t BT = (size_t)B * t;
        CK(cudaMemcpy(g->tokens, tokens + (size_t)b0 * t, sizeof(int32_t) * BT, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g->targets, targets + (size_t)b0 * t, sizeof(int32_t) * BT, cudaMemcpyHostToDevice));
        const float *losses = llama ? llama_forward(g, w, B, t) : gpt_forward(g, w, B, t);
        if (gw) {
            if (llama) llama_backward(g, w, gw, dloss, B, t);
            else gpt_backward(g, w, gw, dloss, B, t);
        }
        CK(cudaGetLastError());
        CK(cudaMemcpy(g->h_losses, losses, sizeof(float) * BT, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < BT; i++) *sum = *sum + g->h_losses[i]; // the CPU's chain
    }
    if (gw) {
        TRG_LAUNCH(add_kernel, blocks_for(wte_n), THREADS, gw, gw, g->dwte_emb, wte_n);
        CK(cudaGetLastError());
    }
    return TR_OK;
}

// The shard tree's partial sum at stack position k: grads, then shard_grads.
static float *trg_level(trg_model *g, int k) { return k ? g->shard_grads + (size_t)(k - 1) * g->num_params : g->grads; }

extern "C" int trg_step(trg_model *g, int w, const int32_t *tokens, const int32_t *targets, int n, int t, int first,
                        int count, float *sum) {
    float *wp;
    int S = g ? tr_shards(&g->cfg) : 0;
    int rc = g && (w == TRG_PARAMS || w == TRG_LOOKAHEAD) ? trg_buffer(g, w, g->num_params, 0, &wp) : TR_EINVAL;
    if (rc) return rc;
    if (!tokens || !targets || !sum || n < 1 || t < 1 || t > g->cfg.seq_len || count < 1 || first < 0 || count > S ||
        first > S - count || first % count || (count & (count - 1)) || tr_shard_levels(count) - 1 > g->levels)
        return TR_EINVAL;
    for (int r = 1; r < trg_ranks(g); r++) // the ranks' own weights (trg_copy_peer) and tree buffers
        if (trg_buffer(g->tp->rank[r], w, g->num_params, 0, &wp) || tr_shard_levels(count) - 1 > g->tp->rank[r]->levels) return TR_EINVAL;
    if (g->mx.refused[0]) return TR_EDEVICE;
    TRG_USE(g);
    float dloss = trk_loss_scale(trk_loss_count(targets, (size_t)n * t));
    rc = trg_group(g, [&](trg_model *r) {
        float *rw, part[TR_MAX_SHARD_LEVELS];
        int depth = 0, rc = trg_buffer(r, w, r->num_params, 0, &rw);
        for (int i = 0; rc == TR_OK && i < count; i++) {
            int s = first + i;
            part[depth] = 0.0f;
            if ((rc = trg_chain(r, rw, trg_level(r, depth), tokens, targets, tr_shard_first(n, S, s), tr_shard_first(n, S, s + 1), t,
                                dloss, &part[depth])))
                return rc;
            depth++;
            for (int k = tr_tree_merges(i); k > 0; k--, depth--) {
                float *l = trg_level(r, depth - 2);
                TRG_LAUNCH(add_kernel, blocks_for(r->num_params), THREADS, l, l, trg_level(r, depth - 1), r->num_params);
                part[depth - 2] = part[depth - 2] + part[depth - 1];
            }
        }
        if (rc == TR_OK && r == g) *sum = part[0];
        return rc;
    });
    if (rc == TR_OK && g->tp) rc = trg_tp_grads(g);
    if (rc) return rc;
    CK(cudaGetLastError());
    return TR_OK;
}

extern "C" int trg_join(trg_model *g, const trg_model *right) {
    if (!g || !right || right->num_params != g->num_params || g->levels < 1) return TR_EINVAL;
    TRG_USE(g);
    float *r = trg_level(g, 1);
    CK(cudaMemcpyPeer(r, g->device, right->grads, right->device, sizeof(float) * g->num_params));
    TRG_LAUNCH(add_kernel, blocks_for(g->num_params), THREADS, g->grads, g->grads, r, g->num_params);
    CK(cudaGetLastError());
    return TR_OK;
}

extern "C" int trg_copy_peer(trg_model *dst, int dbuf, const trg_model *src, int sbuf) {
    float *s, *d;
    int rc = dst && src ? trg_buffer((trg_model *)src, sbuf, dst->num_params, 0, &s) : TR_EINVAL;
    if (rc || (rc = trg_buffer(dst, dbuf, dst->num_params, 1, &d))) return rc;
    trg_model *g = dst;
    TRG_USE(g);
    CK(cudaMemcpyPeer(d, dst->device, s, src->device, sizeof(float) * dst->num_params));
    return TR_OK;
}

extern "C" int trg_tp_attach(trg_model *g, trg_model *const *ranks, int n) {
    if (!g || g->tp || n < 1 || n + 1 > TRG_MAX_TP || !ranks) return TR_EINVAL;
    for (int r = 0; r < n; r++)
        if (!ranks[r] || ranks[r] == g || ranks[r]->tp || ranks[r]->num_params != g->num_params ||
            memcmp(&ranks[r]->cfg, &g->cfg, sizeof g->cfg))
            return TR_EINVAL;
    trg_tp *tp = (trg_tp *)calloc(1, sizeof *tp);
    if (!tp || !(tp->stacks = (char *)malloc((size_t)(n + 1) * TRG_TP_STACK))) {
        free(tp);
        return TR_ENOMEM;
    }
    tp->n = n + 1;
    tp->rank[0] = g;
    for (int r = 0; r < n; r++) {
        tp->rank[r + 1] = ranks[r];
        ranks[r]->tp = tp;
        ranks[r]->rank = r + 1;
    }
    g->tp = tp;
    return TR_OK;
}

extern "C" int trg_eval(trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!g || !tokens || !targets || !loss || n < 1 || t < 1 || t > g->cfg.seq_len) return TR_EINVAL;
    if (g->mx.refused[0]) return TR_EDEVICE;
    for (int r = 1; r < trg_ranks(g); r++)
        if (!g->tp->rank[r]->params) return TR_EINVAL;
    TRG_USE(g);
    float total = 0.0f;
    int rc = trg_group(g, [&](trg_model *r) {
        float part = 0.0f;
        int rc = trg_chain(r, r->params, NULL, tokens, targets, 0, n, t, 0.0f, &part);
        if (r == g) total = part;
        return rc;
    });
    if (rc == TR_OK) *loss = trk_loss_mean(total, trk_loss_count(targets, (size_t)n * t));
    return rc;
}

extern "C" int trg_activations(const trg_model *g, float *out, size_t len) {
    if (!g || !out || len > tr_gpu_act_floats(&g->act_cfg, g->cfg.micro_batch, g->cfg.seq_len)) return TR_EINVAL;
    return cudaSetDevice(g->device) == cudaSuccess && cudaMemcpy(out, g->acts, sizeof(float) * len, cudaMemcpyDeviceToHost) == cudaSuccess
               ? TR_OK : TR_EDEVICE;
}

// ----------------------------------------------------------------------------
// Optimizers on the device: AdamW, DeMo and SparseLoCo with adamw.c's,
// demo.c's and loco.c's arithmetic (kernels.h), on the weights, gradients
// and optimizer state that stay here across steps. Of DeMo and SparseLoCo
// only the selected entries leave the device, and only the clients'
// decoded entries come in.

// One thread per TRK_NORM_BLOCK block of the gradients: its sum of squares.
__global__ void grad_sumsq_kernel(float *part, const float *g, size_t n, size_t nb) {
    size_t b = trg_thread();
    if (b >= nb) return;
    size_t i0 = b * TRK_NORM_BLOCK;
    part[b] = trk_sumsq(g + i0, n - i0 < TRK_NORM_BLOCK ? n - i0 : TRK_NORM_BLOCK);
}

__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, size_t n, trk_adamw_args a) {
    size_t i = trg_thread();
    if (i < n) trk_adamw(p + i, m + i, v + i, g[i], &a);
}

// The gradients' clip scale (demo.c's tr_grad_scale). The blocks' sums come
// to the host (4 bytes per 4096 gradients), which adds them in order as the
// CPU path does, and refuses NaN or Inf (TR_EINVAL).
static int trg_grad_scale(trg_model *g, float clip, float *scale) {
    size_t n = g->num_params, nb = trk_norm_blocks(n);
    TRG_LAUNCH(grad_sumsq_kernel, blocks_for(nb), THREADS, g->norm_part, g->grads, n, nb);
    CK(cudaGetLastError());
    CK(cudaMemcpy(g->h_norm_part, g->norm_part, sizeof(float) * nb, cudaMemcpyDeviceToHost));
    float norm;
    if (!trk_norm_finish(g->h_norm_part, nb, &norm)) return TR_EINVAL;
    *scale = trk_clip_scale(norm, clip);
    return TR_OK;
}

extern "C" int trg_adamw(trg_model *g, const tr_adamw *hp, uint64_t t) {
    if (!g || !hp || t < 1 || !g->adam_m || !g->adam_v) return TR_EINVAL;
    TRG_USE(g);
    float gscale;
    int rc = trg_grad_scale(g, hp->clip_norm, &gscale);
    if (rc) return rc;
    trk_adamw_args a = {hp->lr, hp->beta1, hp->beta2, hp->eps, hp->weight_decay, 0.0f, 0.0f, gscale};
    trk_adamw_bias(hp->beta1, hp->beta2, t, &a.c1, &a.c2);
    TRG_LAUNCH(adamw_kernel, blocks_for(g->num_params), THREADS, g->params, g->adam_m, g->adam_v, g->grads, g->num_params, a);
    CK(cudaGetLastError());
    return TR_OK;
}

// DeMo and SparseLoCo: elementwise kernels over n entries, and per-chunk
// kernels (one thread per chunk of a tensor's 2-D view, which reads and
// writes only its chunk, its scratch and its entries).

__global__ void demo_momentum_kernel(float *d, const float *gr, size_t n, float decay, float lrs) {
    size_t i = trg_thread();
    if (i < n) d[i] = trk_demo_momentum(d[i], gr[i], decay, lrs);
}

// One element of a chunked DCT stage (demo.c's tr_dct_tensor): the chain
// with row i of the table over its chunk's column segment, or along_rows
// over its chunk's row segment, i being its place in the chunk.
__global__ void dct_kernel(float *out, const float *in, const float *tab, int rows, int cols, int n, int along_rows) {
    size_t idx = trg_thread();
    if (idx >= (size_t)rows * cols) return;
    int r = (int)(idx / cols), c = (int)(idx % cols);
    if (along_rows) {
        int i = r % n;
        out[idx] = trk_dot(0.0f, in + (size_t)(r - i) * cols + c, (size_t)cols, tab + (size_t)i * n, 1, n);
    } else {
        int i = c % n;
        out[idx] = trk_dot(0.0f, in + (size_t)r * cols + (c - i), 1, tab + (size_t)i * n, 1, n);
    }
}

// Chunk b's scratch: blk (cr*cc) and best (k) floats, ia (2*cr*cc) indices
// when some k needs the merge sort, else NULL.
__global__ void demo_select_kernel(tr_demo_tensor x, const float *y, float *blk, float *best, uint32_t *ia, uint32_t *sel,
                                   float *val) {
    size_t b = trg_thread();
    if (b >= x.nchunks) return;
    size_t n = (size_t)x.cr * x.cc, k = (size_t)x.k;
    trk_demo_select(&x, y, b, blk + b * n, best + b * k, ia ? ia + 2 * b * n : NULL, sel + b * k, val + b * k);
}

__global__ void chunk_put_kernel(float *y, tr_demo_tensor x, const uint32_t *sel, const float *val) {
    size_t b = trg_thread();
    if (b < x.nchunks) trk_chunk_put(y, &x, b, sel + b * x.k, val + b * x.k);
}

// a -= b (DeMo's error feedback)
__global__ void sub_kernel(float *a, const float *b, size_t n) {
    size_t i = trg_thread();
    if (i < n) a[i] -= b[i];
}

// cnt: cr*cc per chunk, or NULL (trk_chunk_sum).
__global__ void chunk_sum_kernel(float *y, tr_demo_tensor x, int n, const uint32_t *idx, const float *val, size_t stride,
                                 uint32_t *cnt) {
    size_t b = trg_thread();
    if (b < x.nchunks) trk_chunk_sum(y, &x, b, n, idx, val, stride, cnt ? cnt + b * x.cr * x.cc : NULL);
}

__global__ void demo_step_kernel(float *p, const float *u, size_t n, float wdf, float lr) {
    size_t i = trg_thread();
    if (i < n) p[i] = trk_demo_step(p[i], u[i], wdf, lr);
}

__global__ void lookahead_kernel(float *la, const float *p, const float *d, size_t n, float lr) {
    size_t i = trg_thread();
    if (i < n) la[i] = trk_lookahead(p[i], d[i], lr);
}

// pend: the round trained from x0 less it (shifted), else NULL.
__global__ void loco_feedback_kernel(float *e, const float *x0, const float *pend, const float *x, size_t n, float decay) {
    size_t i = trg_thread();
    if (i < n) e[i] = trk_loco_feedback(e[i], pend ? trk_loco_start(x0[i], pend[i]) : x0[i], x[i], decay);
}

__global__ void loco_start_kernel(float *x, const float *x0, const float *pend, size_t n) {
    size_t i = trg_thread();
    if (i < n) x[i] = trk_loco_start(x0[i], pend[i]);
}

// Scratch as demo_select_kernel's; e is the tensor's view.
__global__ void loco_select_kernel(tr_demo_tensor x, float *e, int vb, float *blk, float *best, uint32_t *ia, uint32_t *sel,
                                   uint32_t *code, float *scale) {
    size_t b = trg_thread();
    if (b >= x.nchunks) return;
    size_t n = (size_t)x.cr * x.cc, k = (size_t)x.k;
    scale[b] = trk_loco_select(&x, e, b, vb, blk + b * n, best + b * k, ia ? ia + 2 * b * n : NULL, sel + b * k, code + b * k);
}

__global__ void loco_outer_kernel(float *p, const float *u, size_t n, float lr) {
    size_t i = trg_thread();
    if (i < n) p[i] = trk_loco_outer(p[i], u[i], lr);
}

// s holds at least bytes (grown when short, its contents dropped).
static int trg_grow(trg_model *g, trg_scratch *s, size_t bytes) {
    if (s->bytes >= bytes) return TR_OK;
    cudaFree(s->p);
    s->p = NULL;
    s->bytes = 0;
    if ((g->err = cudaMalloc(&s->p, bytes)) != cudaSuccess) {
        s->p = NULL;
        return g->err == cudaErrorMemoryAllocation ? TR_ENOMEM : TR_EDEVICE;
    }
    s->bytes = bytes;
    return TR_OK;
}

// The DCT matrices of size n (trk_dct_table), built on the host and
// uploaded on first use.
static int trg_dct_table(trg_model *g, int n, const float **out) {
    if (!g->dct[n]) {
        size_t bytes = sizeof(float) * 2 * (size_t)n * n;
        float *h = (float *)malloc(bytes);
        if (!h) return TR_ENOMEM;
        trk_dct_table(h, n);
        if ((g->err = cudaMalloc((void **)&g->dct[n], bytes)) == cudaSuccess)
            g->err = cudaMemcpy(g->dct[n], h, bytes, cudaMemcpyHostToDevice);
        free(h);
        if (g->err != cudaSuccess) {
            cudaFree(g->dct[n]);
            g->dct[n] = NULL;
            return g->err == cudaErrorMemoryAllocation ? TR_ENOMEM : TR_EDEVICE;
        }
    }
    *out = g->dct[n];
    return TR_OK;
}

// out = the chunked DCT of the tensor view in (inverse: its inverse) in
// tr_dct_tensor's two stages, along the columns of every chunk, then along
// the rows, each skipped for edge 1; s: scratch. out aliases neither.
static int trg_dct(trg_model *g, const tr_demo_tensor *x, const float *in, float *out, float *s, int inverse) {
    size_t numel = (size_t)x->rows * x->cols;
    const float *z = in, *tab;
    int rc;
    if (x->cc > 1) {
        if ((rc = trg_dct_table(g, x->cc, &tab))) return rc;
        float *zb = x->cr > 1 ? s : out;
        TRG_LAUNCH(dct_kernel, blocks_for(numel), THREADS, zb, in, tab + (inverse ? (size_t)x->cc * x->cc : 0), x->rows,
                   x->cols, x->cc, 0);
        z = zb;
    }
    if (x->cr == 1) {
        if (z != out) CK(cudaMemcpy(out, z, sizeof(float) * numel, cudaMemcpyDeviceToDevice));
        return TR_OK;
    }
    if ((rc = trg_dct_table(g, x->cr, &tab))) return rc;
    TRG_LAUNCH(dct_kernel, blocks_for(numel), THREADS, out, z, tab + (inverse ? (size_t)x->cr * x->cr : 0), x->rows, x->cols,
               x->cr, 1);
    return TR_OK;
}

// The layout of hp's chunks, its sizes, and the selection's index scratch:
// 2 per element of the largest tensor when some k needs the merge sort.
static int trg_chunks(const trg_model *g, int chunk, int topk, tr_demo_tensor *t, tr_chunk_sizes *z, size_t *sort_u) {
    int nt = tr_chunk_layout(&g->cfg, chunk, topk, t);
    *z = tr_chunk_totals(t, nt);
    *sort_u = 0;
    for (int i = 0; i < nt; i++)
        if (t[i].k > TRK_TOPK_SMALL) *sort_u = 2 * z->max_tensor;
    return nt;
}

extern "C" int trg_demo_generate(trg_model *g, const tr_demo *hp, uint32_t *idx, float *val) {
    if (!g || !hp || !idx || !val || !g->delta) return TR_EINVAL;
    TRG_USE(g);
    tr_demo_tensor t[TR_MAX_TENSORS];
    tr_chunk_sizes z;
    size_t sort_u, T;
    int nt = trg_chunks(g, hp->chunk, hp->topk, t, &z, &sort_u);
    T = z.max_tensor;
    float gscale;
    int rc = trg_grad_scale(g, hp->clip_norm, &gscale);
    if (rc || (rc = trg_grow(g, &g->work, sizeof(float) * (3 * T + z.entries))) || (rc = trg_grow(g, &g->work_u, 4 * sort_u)) ||
        (rc = trg_grow(g, &g->ent, 8 * z.entries)))
        return rc;
    float *Y = (float *)g->work.p, *S = Y + T, *E = S + T, *best = E + T;
    uint32_t *ia = sort_u ? (uint32_t *)g->work_u.p : NULL, *sel = (uint32_t *)g->ent.p;
    float *sv = (float *)(sel + z.entries);
    TRG_LAUNCH(demo_momentum_kernel, blocks_for(g->num_params), THREADS, g->delta, g->grads, g->num_params, hp->decay,
               hp->lr * gscale);
    size_t first = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor x = t[ti];
        size_t numel = (size_t)x.rows * x.cols;
        float *d = g->delta + x.offset;
        // transform, select (the chunks copied to S), then the error feedback
        if ((rc = trg_dct(g, &x, d, Y, S, 0))) return rc;
        TRG_LAUNCH(demo_select_kernel, blocks_for(x.nchunks), THREADS, x, Y, S, best, ia, sel + first, sv + first);
        CK(cudaMemset(Y, 0, sizeof(float) * numel));
        TRG_LAUNCH(chunk_put_kernel, blocks_for(x.nchunks), THREADS, Y, x, sel + first, sv + first);
        if ((rc = trg_dct(g, &x, Y, E, S, 1))) return rc;
        TRG_LAUNCH(sub_kernel, blocks_for(numel), THREADS, d, E, numel);
        first += x.nchunks * x.k;
    }
    CK(cudaGetLastError());
    CK(TRG_TIMED_COPY("copy to host", idx, sel, sizeof(uint32_t) * z.entries, cudaMemcpyDeviceToHost));
    CK(TRG_TIMED_COPY("copy to host", val, sv, sizeof(float) * z.entries, cudaMemcpyDeviceToHost));
    return TR_OK;
}

// The n clients' entries (E each) into g->ent: indices, then values.
static int trg_entries(trg_model *g, int n, size_t E, const uint32_t *idx, const float *val, uint32_t **di, float **dv) {
    size_t all = (size_t)(n > 0 ? n : 1) * E;
    int rc = trg_grow(g, &g->ent, 8 * all);
    if (rc) return rc;
    *di = (uint32_t *)g->ent.p;
    *dv = (float *)(*di + all);
    if (n > 0) {
        CK(TRG_TIMED_COPY("copy to device", *di, idx, sizeof(uint32_t) * n * E, cudaMemcpyHostToDevice));
        CK(TRG_TIMED_COPY("copy to device", *dv, val, sizeof(float) * n * E, cudaMemcpyHostToDevice));
    }
    return TR_OK;
}

extern "C" int trg_demo_apply(trg_model *g, const tr_demo *hp, int n, const uint32_t *idx, const float *val) {
    if (!g || !hp || n < 0 || (n > 0 && (!idx || !val))) return TR_EINVAL;
    TRG_USE(g);
    tr_demo_tensor t[TR_MAX_TENSORS];
    tr_chunk_sizes z;
    size_t sort_u, T;
    int nt = trg_chunks(g, hp->chunk, hp->topk, t, &z, &sort_u);
    T = z.max_tensor;
    uint32_t *di;
    float *dv;
    int rc = trg_grow(g, &g->work, sizeof(float) * 3 * T);
    if (rc || (rc = trg_grow(g, &g->work_u, 4 * T)) || (rc = trg_entries(g, n, z.entries, idx, val, &di, &dv))) return rc;
    float *Y = (float *)g->work.p, *S = Y + T, *U = S + T;
    float wdf = 1.0f - hp->lr * hp->weight_decay;
    size_t first = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor x = t[ti];
        size_t numel = (size_t)x.rows * x.cols;
        CK(cudaMemset(Y, 0, sizeof(float) * numel));
        TRG_LAUNCH(chunk_sum_kernel, blocks_for(x.nchunks), THREADS, Y, x, n, di + first, dv + first, z.entries,
                   (uint32_t *)g->work_u.p);
        if ((rc = trg_dct(g, &x, Y, U, S, 1))) return rc;
        TRG_LAUNCH(demo_step_kernel, blocks_for(numel), THREADS, g->params + x.offset, U, numel, wdf, hp->lr);
        first += x.nchunks * x.k;
    }
    CK(cudaGetLastError());
    return TR_OK;
}

extern "C" int trg_lookahead(trg_model *g, int src, float lr) {
    float *la, *d = g && (src == TRG_DELTA || src == TRG_PENDING) ? *trg_slot(g, src) : NULL;
    int rc = d ? trg_buffer(g, TRG_LOOKAHEAD, g->num_params, 1, &la) : TR_EINVAL;
    if (rc) return rc;
    TRG_USE(g);
    TRG_LAUNCH(lookahead_kernel, blocks_for(g->num_params), THREADS, la, g->params, d, g->num_params, lr);
    CK(cudaGetLastError());
    return TR_OK;
}

extern "C" int trg_loco_start(trg_model *g) {
    if (!g || !g->anchor || !g->pending) return TR_EINVAL;
    TRG_USE(g);
    TRG_LAUNCH(loco_start_kernel, blocks_for(g->num_params), THREADS, g->params, g->anchor, g->pending, g->num_params);
    CK(cudaGetLastError());
    return TR_OK;
}

extern "C" int trg_loco_generate(trg_model *g, const tr_loco *hp, int shifted, uint32_t *sel, uint32_t *code, float *scale) {
    if (!g || !hp || !sel || !code || !scale || !g->delta || !g->anchor || (shifted && !g->pending)) return TR_EINVAL;
    TRG_USE(g);
    tr_demo_tensor t[TR_MAX_TENSORS];
    tr_chunk_sizes z;
    size_t sort_u, T;
    int nt = trg_chunks(g, hp->chunk, hp->topk, t, &z, &sort_u);
    T = z.max_tensor;
    int rc = trg_grow(g, &g->work, sizeof(float) * (T + z.entries));
    if (rc || (rc = trg_grow(g, &g->work_u, 4 * sort_u)) || (rc = trg_grow(g, &g->ent, 8 * z.entries + 4 * z.chunks))) return rc;
    float *blk = (float *)g->work.p, *best = blk + T;
    uint32_t *ia = sort_u ? (uint32_t *)g->work_u.p : NULL, *dsel = (uint32_t *)g->ent.p, *dcode = dsel + z.entries;
    float *dscale = (float *)(dcode + z.entries);
    TRG_LAUNCH(loco_feedback_kernel, blocks_for(g->num_params), THREADS, g->delta, g->anchor, shifted ? g->pending : NULL,
               g->params, g->num_params, hp->decay);
    size_t first = 0, cfirst = 0; // the tensor's first entry and first chunk
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor x = t[ti];
        TRG_LAUNCH(loco_select_kernel, blocks_for(x.nchunks), THREADS, x, g->delta + x.offset, hp->value_bits, blk, best, ia,
                   dsel + first, dcode + first, dscale + cfirst);
        first += x.nchunks * x.k;
        cfirst += x.nchunks;
    }
    CK(cudaGetLastError());
    CK(TRG_TIMED_COPY("copy to host", sel, dsel, sizeof(uint32_t) * z.entries, cudaMemcpyDeviceToHost));
    CK(TRG_TIMED_COPY("copy to host", code, dcode, sizeof(uint32_t) * z.entries, cudaMemcpyDeviceToHost));
    CK(TRG_TIMED_COPY("copy to host", scale, dscale, sizeof(float) * z.chunks, cudaMemcpyDeviceToHost));
    return TR_OK;
}

extern "C" int trg_loco_apply(trg_model *g, const tr_loco *hp, int n, const uint32_t *idx, const float *val) {
    if (!g || !hp || n < 1 || !idx || !val) return TR_EINVAL;
    TRG_USE(g);
    tr_demo_tensor t[TR_MAX_TENSORS];
    tr_chunk_sizes z;
    size_t sort_u;
    int nt = trg_chunks(g, hp->chunk, hp->topk, t, &z, &sort_u);
    uint32_t *di;
    float *dv;
    int rc = trg_grow(g, &g->work, sizeof(float) * z.max_tensor);
    if (rc || (rc = trg_grow(g, &g->work_u, 4 * z.max_tensor)) || (rc = trg_entries(g, n, z.entries, idx, val, &di, &dv))) return rc;
    float *acc = (float *)g->work.p;
    size_t first = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor x = t[ti];
        size_t numel = (size_t)x.rows * x.cols;
        CK(cudaMemset(acc, 0, sizeof(float) * numel));
        TRG_LAUNCH(chunk_sum_kernel, blocks_for(x.nchunks), THREADS, acc, x, n, di + first, dv + first, z.entries,
                   (uint32_t *)g->work_u.p);
        TRG_LAUNCH(loco_outer_kernel, blocks_for(numel), THREADS, g->params + x.offset, acc, numel, trk_loco_rate(hp->outer_lr, n));
        first += x.nchunks * x.k;
    }
    CK(cudaGetLastError());
    return TR_OK;
}

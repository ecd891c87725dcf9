// internal.h: what the trainer's C files share: the model struct, the GEMM
// entry point and small helpers. Not part of the API (that is trainer.h).
#ifndef TR_INTERNAL_H
#define TR_INTERNAL_H

// ISO C mode (-std=c11, which defines __STRICT_ANSI__) makes GCC default to
// -ffp-contract=off: no fused multiply-add, so the bits do not depend on -march.
// (cgo does not accept -ffp-contract=off itself.)
#if !defined(__STRICT_ANSI__) || defined(__FAST_MATH__)
#error "the numeric contract needs -std=c11 and no -ffast-math"
#endif

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "mathfn.h"
#include "trainer.h"

#define TR_MAX_THREADS 256

typedef struct {
    int M, N, K;
    const float *a; int lda; // (M, K) rows
    const float *b; int ldb; // (N, K) rows
    float *out; int ldo;     // (M, N)
    const float *bias;       // (N) or NULL: base = bias[n]
    int accumulate;          // 1: base = out[m][n] (bias ignored)
} tr_gemm_args;

// Eight float lanes: the unit of every fixed-order dot product.
typedef float v8f __attribute__((vector_size(32)));


static inline __attribute__((always_inline)) v8f tr_load8(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) v8f tr_load_tail(const float *p, int n) {
    v8f v = {0};
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
}

static inline __attribute__((always_inline)) float tr_hsum8(v8f v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// The same lane order as the tiled kernels, for edges and single products.
static inline __attribute__((always_inline)) float tr_dot8(const float *a, const float *b, int K) {
    v8f acc = {0};
    int k = 0;
    for (; k + 8 <= K; k += 8) acc += tr_load8(a + k) * tr_load8(b + k);
    if (k < K) acc += tr_load_tail(a + k, K - k) * tr_load_tail(b + k, K - k);
    return tr_hsum8(acc);
}

typedef void (*tr_gemm_fn)(const tr_gemm_args *, int nthreads);

struct tr_model {
    tr_config cfg;
    int nthreads;
    int isa;
    tr_gemm_fn gemm;
    size_t sizes[TR_NUM_TENSORS];   // tr_param_layout (layout.h)
    size_t offsets[TR_NUM_TENSORS];
    size_t num_params;

    float *params;    // (N) master weights, identical on every replica
    float *grads;     // (N) gradients of the last tr_step
    int have_grads;
    float *lookahead; // (N) x - lr*sign(delta) when DeMo lookahead is on, else NULL
    int lookahead_on;

    float *adam_m, *adam_v; // (N) each, allocated on first AdamW step
    uint64_t adam_t;
    float *delta;           // (N) DeMo momentum or SparseLoCo error feedback, allocated on first generate
    float demo_lr;          // lr of the last DeMo apply (for the lookahead)
    uint64_t step;          // optimizer steps taken

    float *act_mem;   // activations for micro_batch x seq_len (tr_act_layout)
    float *dact_mem;  // (tr_dact_layout)
    float *scratch_w; // (max(4C*C, C*Vp)) transposed weights
    float *scratch_o; // (max(4C, Vp) * B*T) transposed output gradients
    float *scratch_i; // (4C * B*T) transposed inputs
    float *row_buf;   // (TR_MAX_THREADS, 2*maxT) attention backward rows
    float *dct[257];  // DCT-II matrices (D then D^T) by size, built on first use
    float *demo_buf;  // (4, demo_buf_len) tensor-sized DeMo buffers
    // A SparseLoCo round in progress (tr_loco_begin): the weights, AdamW
    // moments and counters at its start.
    int in_round;
    float *anchor, *anchor_m, *anchor_v; // (N) each; moments NULL when there were none
    int anchor_moments, anchor_lookahead;
    uint64_t anchor_step, anchor_adam_t;
    size_t demo_buf_len;
};

// gemm.c
int tr_isa_pick(int want);
tr_gemm_fn tr_isa_kernel(int isa);
// gpt.c
void tr_transpose(const tr_model *m, float *dst, const float *src, int rows, int cols);
// demo.c, shared with loco.c: the chunked 2-D views of the parameter tensors
// (tr_chunk_layout), top-k selection and the grad clipping scale.
typedef struct {
    int rows, cols;  // 2-D view of the parameter tensor
    int cr, cc;      // chunk edges
    int k;           // coefficients per chunk
    int width;       // index bytes: 1, 2 or 4
    size_t nchunks;
    size_t offset;   // into the flat parameter array
} tr_demo_tensor;
int tr_largest_divisor(int n, int cap);
void tr_chunk_layout(const tr_model *m, int chunk, int topk, tr_demo_tensor t[TR_NUM_TENSORS]);
size_t tr_max_chunk(const tr_demo_tensor *t);
// Top-k of one chunk by |y|, ties by lower index: a sorted list for small k,
// a stable merge sort (idx, tmp: n scratch each) otherwise.
#define TR_TOPK_SMALL 64
void tr_topk_small(const float *y, int n, int k, uint32_t *out, float *best);
void tr_topk_sort(const float *y, int n, int k, uint32_t *idx, uint32_t *tmp, uint32_t *out);
int tr_grad_scale(tr_model *m, float clip, float *scale);
int tr_lookahead_alloc(tr_model *m);
void tr_demo_refresh_lookahead(tr_model *m, int on);

// Offset of in-chunk index ix of chunk b inside the (rows, cols) tensor.
static inline size_t tr_chunk_pos(const tr_demo_tensor *x, size_t b, uint32_t ix) {
    size_t bcols = (size_t)(x->cols / x->cc);
    size_t r = (b / bcols) * x->cr + ix / x->cc, c = (b % bcols) * x->cc + ix % x->cc;
    return r * x->cols + c;
}

// Little-endian byte helpers for the payload and state formats.
static inline void tr_put_u16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tr_put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline uint32_t tr_get_u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t tr_get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline void tr_put_f32(uint8_t *p, float f) { tr_put_u32(p, tr_f2bits(f)); }
static inline float tr_get_f32(const uint8_t *p) { return tr_bits2f(tr_get_u32(p)); }

#endif

// kernels.h: the arithmetic of numeric contract v2, written once for both
// backends. gcc compiles it into the CPU layers (layers.c, once per ISA
// level) and nvcc into the GPU kernels (cuda/model.cu); cuda/emu runs those
// GPU kernels on the host, which is how CPU = GPU is tested without a GPU.
//
// The contract (README.md, "Numeric contract"):
//   * a dot product (GEMM element, attention score, attention-weighted sum)
//     is one chain: acc = base; acc = fma(x[k], y[k], acc) for k = 0, 1, ...
//     with base the bias, the previous value (accumulating) or 0. The chain
//     runs on across micro-batches, so gradients do not depend on them.
//   * a row reduction (LayerNorm and RMSNorm statistics, softmax sums) is 32 lanes,
//     lane j taking elements j, j+32, ... in order, then the fixed tree of
//     trk_tree32: what a warp does with xor shuffles and 4 AVX2 or 2 AVX-512
//     registers do with adds.
//   * a column reduction over tokens (bias, norm and embedding gradients,
//     the loss) is one chain in token order from the previous value.
//   * exp, log, tanh come from mathfn.h: + - * / sqrt only.
// fma is IEEE fused multiply-add, one rounding: FFMA on the GPU, vfmadd on
// x86 with FMA, glibc's correctly rounded fmaf elsewhere, so every ISA level
// gives the same bits.
#ifndef TR_KERNELS_H
#define TR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "mathfn.h"

#ifdef __CUDACC__
#define TRK static __forceinline__ __host__ __device__
#else
// ISO mode (-std=c11 or -std=c++17, which define __STRICT_ANSI__) makes GCC
// default to -ffp-contract=off: no fma but the explicit ones. cgo does not
// accept -ffp-contract=off itself.
#if !defined(__STRICT_ANSI__) || defined(__FAST_MATH__)
#error "the numeric contract needs -std=c11 (or c++17) and no -ffast-math"
#endif
// Always inlined, so that a caller compiled for AVX2 or AVX-512 (layers.c)
// turns fma into one instruction.
#define TRK static inline __attribute__((always_inline))
#endif

TRK float trk_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}

TRK float trk_sqrt(float x) {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(x);
#else
    return __builtin_sqrtf(x);
#endif
}

TRK float trk_max(float a, float b) { return b > a ? b : a; }

// ----------------------------------------------------------------------------
// Reductions

#define TRK_LANES 32

// Lane j adds lane j + w for w = 16, 8, 4, 2, 1; returns lane 0.
TRK float trk_tree32(float *p) {
    for (int w = TRK_LANES / 2; w > 0; w >>= 1)
        for (int j = 0; j < w; j++) p[j] = p[j] + p[j + w];
    return p[0];
}

TRK void trk_lanes_zero(float *p) {
    for (int j = 0; j < TRK_LANES; j++) p[j] = 0.0f;
}

// sum of x[0..n)
TRK float trk_sum(const float *x, int n) {
    float p[TRK_LANES];
    trk_lanes_zero(p);
    int i = 0;
    for (; i + TRK_LANES <= n; i += TRK_LANES)
        for (int j = 0; j < TRK_LANES; j++) p[j] = p[j] + x[i + j];
    for (int j = 0; i + j < n; j++) p[j] = p[j] + x[i + j];
    return trk_tree32(p);
}

// sum of x[i] * y[i] over i < n, lanes of fma chains
TRK float trk_sum_products(const float *x, const float *y, int n) {
    float p[TRK_LANES];
    trk_lanes_zero(p);
    int i = 0;
    for (; i + TRK_LANES <= n; i += TRK_LANES)
        for (int j = 0; j < TRK_LANES; j++) p[j] = trk_fma(x[i + j], y[i + j], p[j]);
    for (int j = 0; i + j < n; j++) p[j] = trk_fma(x[i + j], y[i + j], p[j]);
    return trk_tree32(p);
}

// base + x[0]*y[0] + x[1]*y[1] + ... as one chain, strides sx and sy.
TRK float trk_dot(float base, const float *x, size_t sx, const float *y, size_t sy, int n) {
    float acc = base;
    for (int k = 0; k < n; k++) acc = trk_fma(x[k * sx], y[k * sy], acc);
    return acc;
}

// ----------------------------------------------------------------------------
// GEMM: out(M,N) = base + A(M,K) B(N,K)^T, every element one chain over k.

typedef struct {
    int M, N, K;
    const float *a; int lda; // (M, K) rows, or (K, M) rows when ta
    const float *b; int ldb; // (N, K) rows, or (K, N) rows when tb
    float *out; int ldo;     // (M, N)
    const float *bias;       // (N) or NULL: base = bias[n], else 0
    int accumulate;          // 1: base = out[m][n] (bias ignored)
    int ta, tb;
    int mx_slices;           // mx8: TR_MX_SLICE_A and/or TR_MX_SLICE_B (layout.h), else 0
} tr_gemm_args;

TRK float trk_gemm_a(const tr_gemm_args *g, int m, int k) {
    return g->ta ? g->a[(size_t)k * g->lda + m] : g->a[(size_t)m * g->lda + k];
}

TRK float trk_gemm_b(const tr_gemm_args *g, int n, int k) {
    return g->tb ? g->b[(size_t)k * g->ldb + n] : g->b[(size_t)n * g->ldb + k];
}

TRK float trk_gemm_base(const tr_gemm_args *g, int m, int n) {
    if (g->accumulate) return g->out[(size_t)m * g->ldo + n];
    return g->bias ? g->bias[n] : 0.0f;
}

// One element: the reference every GEMM kernel must equal bit for bit.
TRK void trk_gemm_element(const tr_gemm_args *g, int m, int n) {
    float acc = trk_gemm_base(g, m, n);
    for (int k = 0; k < g->K; k++) acc = trk_fma(trk_gemm_a(g, m, k), trk_gemm_b(g, n, k), acc);
    g->out[(size_t)m * g->ldo + n] = acc;
}

// ----------------------------------------------------------------------------
// Numeric contract v3 ("mx8", README.md): the same GEMMs with block-scaled
// int8 operands. Along K, each row of A and each row of B (as trk_gemm_a
// and trk_gemm_b read them) is cut into blocks of 32; a block that would
// cross a segment boundary (a multiple of kseg: one sequence's tokens, for
// weight gradients) ends there and is padded with zeros, so micro-batches of
// whole sequences never split a block. A block is stored as q[32] in
// [-127, 127] and a scale 2^e (trk_mx_scale); element x is q * 2^e with
//   q = round half to even (clamp(x * 2^-e, -127, 127)).
// Then out = base; for each block in order:
//   out = fma((float)(sum of qa*qb, exact in int32: < 2^24), sa * sb, out).
// sa * sb is exact (e in [-63, 63], or down to -71 for second slices: a
// power of two of at least 2^-134), so each block is one rounding, and
// every chip with an int8 dot product (VNNI, AMX, dp4a, mma s8) gives the
// same bits.

#define TRK_MX_BLOCK 32
#define TRK_MX_EMIN (-63)
#define TRK_MX_EMAX 63

// The exponent e of a block whose largest |x| has the bits amax (sign
// cleared): the least e in [EMIN, EMAX] with amax * 2^-e <= 127 (at EMAX the
// codes saturate instead), or TRK_MX_NONFINITE when the block holds a NaN or
// an infinity (its scale is then NaN, its codes 0). The integer max of the
// |x| bits is the float max, and puts NaN and inf on top.
#define TRK_MX_NONFINITE 1000
TRK int trk_mx_exp(uint32_t amax) {
    if (amax >= 0x7f800000u) return TRK_MX_NONFINITE;
    int e = (int)(amax >> 23) - 127 - 6; // floor(log2 amax) - 6: amax * 2^-e in [64, 128)
    e = e < TRK_MX_EMIN ? TRK_MX_EMIN : e > TRK_MX_EMAX ? TRK_MX_EMAX : e;
    if (e < TRK_MX_EMAX && tr_bits2f(amax) * tr_pow2i(-e) > 127.0f) e++;
    return e;
}

TRK float trk_mx_scale(int e) { return e == TRK_MX_NONFINITE ? tr_bits2f(0x7fc00000u) : tr_pow2i(e); }

// The code of x in a block of exponent e (finite): round half to even of
// the clamped x * 2^-e. Both steps are exact but the rounding, done by
// adding and subtracting 1.5 * 2^23 (|y| <= 127).
TRK int trk_mx_code(float x, int e) {
#ifdef __CUDA_ARCH__
    float y = __fmul_rn(x, tr_pow2i(-e));
    y = y > 127.0f ? 127.0f : y < -127.0f ? -127.0f : y;
    return (int)__fadd_rn(__fadd_rn(y, 12582912.0f), -12582912.0f);
#else
    float y = x * tr_pow2i(-e);
    y = y > 127.0f ? 127.0f : y < -127.0f ? -127.0f : y;
    return (int)((y + 12582912.0f) - 12582912.0f);
#endif
}

// One block step of an output chain.
TRK float trk_mx_step(float acc, int32_t dot, float sa, float sb) { return trk_fma((float)dot, sa * sb, acc); }

// Blocks of a K-long row in segments of kseg: each segment has
// ceil(kseg/32) blocks, the last segment ceil((K % kseg)/32) when partial.
TRK int trk_mx_seg_blocks(int kseg) { return (kseg + TRK_MX_BLOCK - 1) / TRK_MX_BLOCK; }
TRK int trk_mx_blocks(int K, int kseg) {
    int full = K / kseg, rest = K % kseg;
    return full * trk_mx_seg_blocks(kseg) + trk_mx_seg_blocks(rest);
}

// Block b of a row as [k0, k1).
TRK void trk_mx_block_range(int b, int K, int kseg, int *k0, int *k1) {
    int per = trk_mx_seg_blocks(kseg), seg = b / per;
    *k0 = seg * kseg + (b % per) * TRK_MX_BLOCK;
    int end = (seg + 1) * kseg < K ? (seg + 1) * kseg : K;
    *k1 = *k0 + TRK_MX_BLOCK < end ? *k0 + TRK_MX_BLOCK : end;
}

// Two slices, for the GEMMs that need more than 8 bits (README): a block of
// exponent e also gets second codes q2 = code of the residual x - q1 * 2^e
// at exponent e - 8 (the residual is exact, and at most 2^(e-1), so q2 uses
// the whole range). A GEMM with an operand in two slices runs each block
// as parts, in this order: (a1, b1), (a1, b2) when B has two slices, (a2,
// b1) when A has; each part is one block step of an ordinary mx8 GEMM (its
// own dot and fma), and a2 * b2 is left out. So every kernel runs it as an
// mx8 GEMM of TR_MX_PARTS times the blocks. (The slices' names, the
// parts and which GEMMs take two slices are in layout.h, which sizes the
// scratch for them.)

// Which slice (0: first, 1: second) side b_side takes in part j.
TRK int trk_mx_part_slice(int slices, int b_side, int j) {
    if (j == 0) return 0;
    if (j == 1 && slices & TR_MX_SLICE_B) return b_side;
    return !b_side;
}

// The second code of x, whose first is q1 in a block of exponent e (finite).
TRK int trk_mx_code2(float x, int q1, int e) {
#ifdef __CUDA_ARCH__
    return trk_mx_code(__fsub_rn(x, __fmul_rn((float)q1, tr_pow2i(e))), e - 8);
#else
    return trk_mx_code(x - (float)q1 * tr_pow2i(e), e - 8);
#endif
}

// Quantizes block b of row m of A (b_side 0) or row n of B (b_side 1),
// slice 0 or 1: codes into q[0..32) (zeros past the block's end), returns
// the scale.
TRK float trk_mx_quant_block(const tr_gemm_args *g, int b_side, int row, int b, int kseg, int slice, int8_t *q) {
    int k0, k1;
    trk_mx_block_range(b, g->K, kseg, &k0, &k1);
    uint32_t amax = 0;
    for (int k = k0; k < k1; k++) {
        uint32_t u = tr_f2bits(b_side ? trk_gemm_b(g, row, k) : trk_gemm_a(g, row, k)) & 0x7fffffffu;
        amax = u > amax ? u : amax;
    }
    int e = trk_mx_exp(amax);
    for (int k = 0; k < TRK_MX_BLOCK; k++) {
        float x = k0 + k < k1 ? (b_side ? trk_gemm_b(g, row, k0 + k) : trk_gemm_a(g, row, k0 + k)) : 0.0f;
        int c = e == TRK_MX_NONFINITE ? 0 : trk_mx_code(x, e);
        q[k] = (int8_t)(e == TRK_MX_NONFINITE || !slice ? c : trk_mx_code2(x, c, e));
    }
    return trk_mx_scale(e == TRK_MX_NONFINITE || !slice ? e : e - 8);
}

// One element of the mx8 GEMM: the reference every mx8 kernel must equal.
TRK void trk_mx_gemm_element(const tr_gemm_args *g, int kseg, int m, int n) {
    float acc = trk_gemm_base(g, m, n);
    int8_t qa[TRK_MX_BLOCK], qb[TRK_MX_BLOCK];
    for (int b = 0; b < trk_mx_blocks(g->K, kseg); b++)
        for (int j = 0; j < TR_MX_PARTS(g->mx_slices); j++) {
            float sa = trk_mx_quant_block(g, 0, m, b, kseg, trk_mx_part_slice(g->mx_slices, 0, j), qa);
            float sb = trk_mx_quant_block(g, 1, n, b, kseg, trk_mx_part_slice(g->mx_slices, 1, j), qb);
            int32_t dot = 0;
            for (int k = 0; k < TRK_MX_BLOCK; k++) dot += (int32_t)qa[k] * qb[k];
            acc = trk_mx_step(acc, dot, sa, sb);
        }
    g->out[(size_t)m * g->ldo + n] = acc;
}

// ----------------------------------------------------------------------------
// Layers, per row or per element (shapes as in gpt.c).

#define TRK_LN_EPS 1e-5f

// One row of LayerNorm: o = (x - mean) * rstd * w + b.
TRK void trk_layernorm_row(float *o, float *mean, float *rstd, const float *x, const float *w, const float *b, int C) {
    float mu = trk_sum(x, C) / (float)C;
    float p[TRK_LANES];
    trk_lanes_zero(p);
    int i = 0;
    for (; i + TRK_LANES <= C; i += TRK_LANES)
        for (int j = 0; j < TRK_LANES; j++) { float d = x[i + j] - mu; p[j] = trk_fma(d, d, p[j]); }
    for (int j = 0; i + j < C; j++) { float d = x[i + j] - mu; p[j] = trk_fma(d, d, p[j]); }
    float rs = 1.0f / trk_sqrt(trk_tree32(p) / (float)C + TRK_LN_EPS);
    for (int k = 0; k < C; k++) o[k] = trk_fma((x[k] - mu) * rs, w[k], b[k]);
    *mean = mu;
    *rstd = rs;
}

// One row of the LayerNorm input gradient: dx += (dn - mean(dn) - norm * mean(dn*norm)) * rstd, dn = w*dy.
TRK void trk_layernorm_back_row(float *dx, const float *dy, const float *x, const float *w, float mu, float rs, int C) {
    float pm[TRK_LANES], pn[TRK_LANES];
    trk_lanes_zero(pm);
    trk_lanes_zero(pn);
    int i = 0;
    for (; i + TRK_LANES <= C; i += TRK_LANES)
        for (int j = 0; j < TRK_LANES; j++) {
            float norm = (x[i + j] - mu) * rs, dn = w[i + j] * dy[i + j];
            pm[j] = pm[j] + dn;
            pn[j] = trk_fma(dn, norm, pn[j]);
        }
    for (int j = 0; i + j < C; j++) {
        float norm = (x[i + j] - mu) * rs, dn = w[i + j] * dy[i + j];
        pm[j] = pm[j] + dn;
        pn[j] = trk_fma(dn, norm, pn[j]);
    }
    float dmean = trk_tree32(pm) / (float)C, dnm = trk_tree32(pn) / (float)C;
    for (int k = 0; k < C; k++) {
        float norm = (x[k] - mu) * rs, dn = w[k] * dy[k];
        dx[k] = trk_fma(trk_fma(-norm, dnm, dn - dmean), rs, dx[k]);
    }
}

// One token's step of the LayerNorm weight and bias gradient chains.
TRK void trk_layernorm_dw_step(float *sw, float *sb, float x, float mu, float rs, float dy) {
    *sw = trk_fma((x - mu) * rs, dy, *sw);
    *sb = *sb + dy;
}

#define TRK_GELU_SCALE 0.7978845608f // sqrt(2/pi)

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
TRK float trk_gelu(float v) {
    float th = tr_tanhf(TRK_GELU_SCALE * trk_fma(0.044715f * v * v, v, v));
    return 0.5f * v * (1.0f + th);
}

TRK float trk_gelu_back(float v, float d) {
    float th = tr_tanhf(TRK_GELU_SCALE * trk_fma(0.044715f * v * v, v, v));
    float sech2 = trk_fma(-th, th, 1.0f);
    float local = trk_fma(0.5f * v * sech2 * TRK_GELU_SCALE, trk_fma(3.0f * 0.044715f * v, v, 1.0f), 0.5f * (1.0f + th));
    return local * d;
}

// Causal softmax of one attention row in place: a[0..t] holds the scaled
// scores; afterwards a[0..T) holds the probabilities (0 above the diagonal).
TRK void trk_softmax_causal(float *a, int t, int T) {
    float mx = -3.4e38f;
    for (int t2 = 0; t2 <= t; t2++) mx = trk_max(mx, a[t2]);
    for (int t2 = 0; t2 <= t; t2++) a[t2] = tr_expf(a[t2] - mx);
    float inv = 1.0f / trk_sum(a, t + 1); // the sum is at least 1 (the max's term)
    for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
}

// Where the q, k and v of a token sit in a qkv row (QKVD floats): q of head
// h at h*hs, then the KV key heads, then the KV value heads; query head h
// reads kv head h / (NH/KV). GPT-2 is the case KV = NH.
typedef struct {
    int hs, kvh;        // head size, kv head of the query head
    size_t stride;      // QKVD
    size_t q, k, v;     // offsets of this head's q, k and v in a row
} trk_heads;

TRK trk_heads trk_head_offsets(int h, int C, int NH, int KV) {
    trk_heads o;
    o.hs = C / NH;
    o.kvh = h / (NH / KV);
    o.stride = (size_t)C + 2 * (size_t)KV * o.hs;
    o.q = (size_t)h * o.hs;
    o.k = (size_t)C + (size_t)o.kvh * o.hs;
    o.v = (size_t)C + (size_t)KV * o.hs + (size_t)o.kvh * o.hs;
    return o;
}

// One query row of attention for head h of sequence b at position t:
// a(T) = softmax of q.k/sqrt(hs) over t2 <= t, out(hs) = sum_t2 a[t2] v[t2].
TRK void trk_attention_row(float *out, float *a, const float *qkv, int b, int t, int h, int T, int C, int NH, int KV) {
    trk_heads o = trk_head_offsets(h, C, NH, KV);
    int hs = o.hs;
    float scale = 1.0f / trk_sqrt((float)hs);
    const float *seq = qkv + (size_t)b * T * o.stride, *q = seq + (size_t)t * o.stride + o.q;
    for (int t2 = 0; t2 <= t; t2++) a[t2] = trk_dot(0.0f, q, 1, seq + (size_t)t2 * o.stride + o.k, 1, hs) * scale;
    trk_softmax_causal(a, t, T);
    for (int i = 0; i < hs; i++) out[i] = trk_dot(0.0f, a, 1, seq + o.v + i, o.stride, t + 1);
}

// Its backward (layers_isa.h; model.cu's attention_backward): datt[t2] =
// dy.v[t2] and dpre[t2] = a[t2] (datt[t2] - sum(a*datt)) scale for t2 <= t,
// dq = chain of dpre[t2] k[t2] over t2 <= t; dk and dv of a key head are
// chains over the query heads of its group in order, and within a head over
// the queries t >= t2 in order.

// ----------------------------------------------------------------------------
// Llama's layers.

// One row of RMSNorm: o = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps)
// (tr_rms_eps: the config's).
TRK void trk_rmsnorm_row(float *o, float *rstd, const float *x, const float *w, int C, float eps) {
    float rs = 1.0f / trk_sqrt(trk_sum_products(x, x, C) / (float)C + eps);
    for (int i = 0; i < C; i++) o[i] = x[i] * rs * w[i];
    *rstd = rs;
}

// One row of the RMSNorm input gradient: dx += rstd (w dy) - x rstd^3 mean(w dy x).
TRK void trk_rmsnorm_back_row(float *dx, const float *dy, const float *x, const float *w, float rs, int C) {
    float p[TRK_LANES];
    trk_lanes_zero(p);
    int i = 0;
    for (; i + TRK_LANES <= C; i += TRK_LANES)
        for (int j = 0; j < TRK_LANES; j++) p[j] = trk_fma(w[i + j] * dy[i + j], x[i + j], p[j]);
    for (int j = 0; i + j < C; j++) p[j] = trk_fma(w[i + j] * dy[i + j], x[i + j], p[j]);
    float k = rs * rs * rs * (trk_tree32(p) / (float)C);
    for (int c = 0; c < C; c++) dx[c] = trk_fma(-x[c], k, trk_fma(rs, w[c] * dy[c], dx[c]));
}

// One token's step of the RMSNorm weight gradient chain.
TRK void trk_rmsnorm_dw_step(float *sw, float x, float rs, float dy) { *sw = trk_fma(x * rs, dy, *sw); }

// Rotary embedding tables (T, hs/2) of config c: angle t * inv_i, inv_i =
// theta^(-2i/hs), built in double with mathfn.h's series (the same bits
// everywhere), then rounded. TR_ROPE_LLAMA3 scales the frequencies as
// Llama 3.1 does (transformers' rope_type "llama3"): wavelengths 2 pi /
// inv_i above orig_ctx / low_freq are divided by factor, those below
// orig_ctx / high_freq kept, and those between blended by s = (orig_ctx /
// wavelength - low_freq) / (high_freq - low_freq): (1 - s) inv / factor + s inv.
TRK void trk_rope_table(float *cosv, float *sinv, int T, int hs, const tr_config *c) {
    int half = hs / 2;
    double lt = tr_log_d((double)c->rope_theta), pi2 = 6.283185307179586;
    for (int i = 0; i < half; i++) {
        double inv = tr_exp_d(-(2.0 * i / hs) * lt);
        if (c->rope_scaling == TR_ROPE_LLAMA3) {
            double wl = pi2 / inv, orig = (double)c->rope_orig_ctx, f = c->rope_factor, lo = c->rope_low_freq, hi = c->rope_high_freq;
            if (wl > orig / lo) inv = inv / f;
            else if (!(wl < orig / hi)) {
                double s = (orig / wl - lo) / (hi - lo);
                inv = (1.0 - s) * inv / f + s * inv;
            }
        }
        for (int t = 0; t < T; t++) {
            cosv[(size_t)t * half + i] = (float)tr_cos((double)t * inv);
            sinv[(size_t)t * half + i] = (float)tr_sin((double)t * inv);
        }
    }
}

// Rotates one head vector x(hs) in place at the position whose table rows
// are cs and sn (hs/2 each), in the rotate-half pairing (i, i + hs/2).
TRK void trk_rope(float *x, const float *cs, const float *sn, int hs) {
    int half = hs / 2;
    for (int i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        x[i] = trk_fma(x1, cs[i], -(x2 * sn[i]));
        x[i + half] = trk_fma(x2, cs[i], x1 * sn[i]);
    }
}

// The gradient of trk_rope: the inverse rotation of dy, in place.
TRK void trk_rope_back(float *d, const float *cs, const float *sn, int hs) {
    int half = hs / 2;
    for (int i = 0; i < half; i++) {
        float d1 = d[i], d2 = d[i + half];
        d[i] = trk_fma(d1, cs[i], d2 * sn[i]);
        d[i + half] = trk_fma(d2, cs[i], -(d1 * sn[i]));
    }
}

// SwiGLU: h = silu(g) * u, silu(g) = g / (1 + e^-g).
TRK float trk_swiglu(float g, float u) { return g / (1.0f + tr_expf(-g)) * u; }

TRK void trk_swiglu_back(float g, float u, float dh, float *dg, float *du) {
    float s = 1.0f / (1.0f + tr_expf(-g)), sg = g * s;
    *du = dh * sg;
    *dg = dh * u * trk_fma(sg, 1.0f - s, s);
}

// Cross-entropy of one row: p(Vp) = softmax over the first V logits (0 on
// the padding); returns -ln p[target] = ln(sum) - (l[target] - max).
TRK float trk_crossentropy_row(float *p, const float *l, int target, int V, int Vp) {
    float mx = -3.4e38f;
    for (int i = 0; i < V; i++) mx = trk_max(mx, l[i]);
    for (int i = 0; i < V; i++) p[i] = tr_expf(l[i] - mx);
    float sum = trk_sum(p, V), inv = 1.0f / sum;
    for (int i = 0; i < V; i++) p[i] = p[i] * inv;
    for (int i = V; i < Vp; i++) p[i] = 0.0f;
    return target < 0 ? 0.0f : tr_logf(sum) - (l[target] - mx);
}

TRK float trk_dlogit(float p, int is_target, float dloss) { return (p - (is_target ? 1.0f : 0.0f)) * dloss; }

// A row's share of the mean loss: none for an ignored target (TR_IGNORE),
// whose row then adds exact zeros to every gradient.
TRK float trk_target_dloss(int target, float dloss) { return target < 0 ? 0.0f : dloss; }

// What the mean loss divides by: the n targets that are trained, all of them
// without a loss mask; (float)k rounds as (float)B * (float)T did before
// masks, so pretraining's bits are unchanged.
TRK float trk_loss_count(const int32_t *targets, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += targets[i] >= 0;
    return (float)k;
}

// The gradient scale and the mean of a loss sum over count targets.
TRK float trk_loss_scale(float count) { return count > 0.0f ? 1.0f / count : 0.0f; }
TRK float trk_loss_mean(float sum, float count) { return count > 0.0f ? sum / count : 0.0f; }

// ----------------------------------------------------------------------------
// Optimizers: AdamW's arithmetic, for adamw.c on the host and the optimizer
// kernels at the end of cuda/model.cu.

// The gradient norm sums squares in blocks of this many entries, each block
// one chain in order, then the blocks' sums in order (trk_norm_finish).
#define TRK_NORM_BLOCK 4096

TRK size_t trk_norm_blocks(size_t n) { return (n + TRK_NORM_BLOCK - 1) / TRK_NORM_BLOCK; }

// Sum of squares of x[0..n), one chain.
TRK float trk_sumsq(const float *x, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

// The norm from the blocks' sums; 0 (and no *norm) for NaN or Inf gradients.
TRK int trk_norm_finish(const float *part, size_t nb, float *norm) {
    float s = 0.0f;
    for (size_t b = 0; b < nb; b++) s += part[b];
    if (!(s - s == 0.0f)) return 0;
    *norm = trk_sqrt(s);
    return 1;
}

// Multiplier for the gradients: 1, or clip/norm when the norm exceeds clip (> 0).
TRK float trk_clip_scale(float norm, float clip) { return (clip > 0.0f && norm > clip) ? clip / norm : 1.0f; }

// Step t's bias corrections 1 - beta^t, beta^t by repeated multiplication
// (no pow() from a math library in the contract).
TRK void trk_adamw_bias(float beta1, float beta2, uint64_t t, float *c1, float *c2) {
    float b1t = 1.0f, b2t = 1.0f;
    for (uint64_t i = 0; i < t && (b1t > 0.0f || b2t > 0.0f); i++) { b1t *= beta1; b2t *= beta2; }
    *c1 = 1.0f - b1t;
    *c2 = 1.0f - b2t;
}

// One AdamW step's constants: hyperparameters, bias corrections, clip scale.
typedef struct {
    float lr, b1, b2, eps, wd, c1, c2, gscale;
} trk_adamw_args;

// AdamW on one element: moments m, v and weight p from gradient g.
TRK void trk_adamw(float *p, float *m, float *v, float g, const trk_adamw_args *a) {
    g = g * a->gscale;
    float mm = a->b1 * *m + (1.0f - a->b1) * g;
    float vv = a->b2 * *v + (1.0f - a->b2) * g * g;
    *m = mm;
    *v = vv;
    float mh = mm / a->c1, vh = vv / a->c2;
    *p -= a->lr * (mh / (trk_sqrt(vh) + a->eps) + a->wd * *p);
}

// ----------------------------------------------------------------------------
// DeMo and SparseLoCo: their arithmetic per element, or per chunk of the
// 2-D views (layout.h's tr_chunk_layout), for demo.c and loco.c on the host
// and the optimizer kernels at the end of cuda/model.cu. A chunked DCT is
// two products with the DCT matrix (trk_dct_table), each element one GEMM
// chain from 0 (trk_dot): through the GEMM kernels on the host, one thread
// per element on the GPU.

// Offset of in-chunk index ix of chunk b inside the (rows, cols) view.
TRK size_t trk_chunk_pos(const tr_demo_tensor *x, size_t b, uint32_t ix) {
    size_t bcols = (size_t)(x->cols / x->cc);
    size_t r = (b / bcols) * x->cr + ix / x->cc, c = (b % bcols) * x->cc + ix % x->cc;
    return r * x->cols + c;
}

// The orthonormal DCT-II of size n, D[i][j] = s_i cos(pi (2j+1) i / 2n),
// s_0 = sqrt(1/n), s_i = sqrt(2/n), into d (n*n), followed by D^T (n*n);
// built in double with mathfn.h's cosine, on the host.
TRK void trk_dct_table(float *d, int n) {
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < n; i++) {
        double q = (i == 0 ? 1.0 : 2.0) / n;
#ifdef __CUDA_ARCH__
        double s = __dsqrt_rn(q);
#else
        double s = __builtin_sqrt(q);
#endif
        for (int j = 0; j < n; j++) {
            float v = (float)(s * tr_cos(pi * (2 * j + 1) * i / (2.0 * n)));
            d[(size_t)i * n + j] = v;
            d[(size_t)n * n + (size_t)j * n + i] = v;
        }
    }
}

// Top-k of one chunk y (n entries): indices ordered by |y| descending, ties
// by lower index. k small: a sorted list (best: k floats), where an element
// must beat the current k-th strictly.
#define TRK_TOPK_SMALL 64
TRK void trk_topk_small(const float *y, int n, int k, uint32_t *out, float *best) {
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        float a = y[i] < 0 ? -y[i] : y[i];
        if (cnt == k && !(a > best[k - 1])) continue;
        int pos = cnt < k ? cnt++ : k - 1;
        while (pos > 0 && a > best[pos - 1]) { best[pos] = best[pos - 1]; out[pos] = out[pos - 1]; pos--; }
        best[pos] = a;
        out[pos] = (uint32_t)i;
    }
}

// k large: a stable bottom-up merge sort of all indices (idx, tmp: n each).
TRK void trk_topk_sort(const float *y, int n, int k, uint32_t *idx, uint32_t *tmp, uint32_t *out) {
    for (int i = 0; i < n; i++) idx[i] = (uint32_t)i;
    uint32_t *src = idx, *dst = tmp;
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                float fa = y[src[a]], fb = y[src[b]];
                fa = fa < 0 ? -fa : fa;
                fb = fb < 0 ? -fb : fb;
                dst[o++] = fb > fa ? src[b++] : src[a++]; // stable: equal keys keep index order
            }
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        uint32_t *t = src; src = dst; dst = t;
    }
    for (int i = 0; i < k; i++) out[i] = src[i];
}

// Chunk b of the view y copied to blk (cr*cc, row-major), and its top-k
// in-chunk indices into sel (k). Scratch: best (k floats) for a small k, ia
// (2*cr*cc) otherwise.
TRK void trk_chunk_topk(const tr_demo_tensor *x, const float *y, size_t b, float *blk, float *best, uint32_t *ia,
                        uint32_t *sel) {
    const float *src = y + trk_chunk_pos(x, b, 0);
    for (int i = 0; i < x->cr; i++)
        for (int j = 0; j < x->cc; j++) blk[i * x->cc + j] = src[(size_t)i * x->cols + j];
    int n = x->cr * x->cc;
    if (x->k <= TRK_TOPK_SMALL) trk_topk_small(blk, n, x->k, sel, best);
    else trk_topk_sort(blk, n, x->k, ia, ia + n, sel);
}

TRK float trk_sign(float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f; }

// DeMo's momentum: delta = decay * delta + lrs * g, lrs the lr times the
// clip scale.
TRK float trk_demo_momentum(float d, float g, float decay, float lrs) { return decay * d + lrs * g; }

// DeMo's selection in chunk b of the transformed momentum y: in-chunk
// indices sel and coefficients val (k each); scratch as trk_chunk_topk's.
TRK void trk_demo_select(const tr_demo_tensor *x, const float *y, size_t b, float *blk, float *best, uint32_t *ia,
                         uint32_t *sel, float *val) {
    trk_chunk_topk(x, y, b, blk, best, ia, sel);
    for (int e = 0; e < x->k; e++) val[e] = blk[sel[e]];
}

// The selected coefficients of chunk b written into the zeroed y (DeMo's
// error feedback transforms them back).
TRK void trk_chunk_put(float *y, const tr_demo_tensor *x, size_t b, const uint32_t *sel, const float *val) {
    for (int e = 0; e < x->k; e++) y[trk_chunk_pos(x, b, sel[e])] = val[e];
}

// The entries of n clients in chunk b added into the zeroed y, clients in
// the given order (client c's k entries of this chunk at idx, val + c *
// stride). With cnt (cr*cc scratch), DeMo's scatter-mean: each position is
// then divided by the number of clients that sent it.
TRK void trk_chunk_sum(float *y, const tr_demo_tensor *x, size_t b, int n, const uint32_t *idx, const float *val,
                       size_t stride, uint32_t *cnt) {
    int nn = x->cr * x->cc;
    if (cnt)
        for (int ix = 0; ix < nn; ix++) cnt[ix] = 0;
    for (int c = 0; c < n; c++)
        for (int e = 0; e < x->k; e++) {
            size_t ei = (size_t)c * stride + b * x->k + e, pos = trk_chunk_pos(x, b, idx[ei]);
            y[pos] = y[pos] + val[ei];
            if (cnt) cnt[idx[ei]]++;
        }
    if (cnt)
        for (int ix = 0; ix < nn; ix++)
            if (cnt[ix] > 1) {
                size_t pos = trk_chunk_pos(x, b, (uint32_t)ix);
                y[pos] = y[pos] / (float)cnt[ix];
            }
}

// DeMo's sign-SGD step from the transformed-back update u, wdf = 1 - lr*wd.
TRK float trk_demo_step(float p, float u, float wdf, float lr) { return p * wdf - lr * trk_sign(u); }

// The DeMo lookahead point: this client's own pending update leads.
TRK float trk_lookahead(float p, float d, float lr) { return p - lr * trk_sign(d); }

// SparseLoCo's code of v against the chunk scale s in vb bits (32: the f32
// itself). |v| <= s, so v/s is in [-1, 1] exactly (correct rounding cannot
// pass 1) and t in [0, L].
TRK uint32_t trk_loco_code(float v, float s, int vb) {
    if (vb == 32) return tr_f2bits(v);
    uint32_t L = (1u << vb) - 1;
    if (!(s > 0.0f)) return 0;
    float t = (v / s + 1.0f) * 0.5f * (float)L + 0.5f;
    return t >= (float)L ? L : (uint32_t)t;
}

// The value a code decodes to: s * (2q - L) / L.
TRK float trk_loco_value(uint32_t q, float s, int vb) {
    if (vb == 32) return tr_bits2f(q);
    float L = (float)((1u << vb) - 1);
    return s * (((float)(2 * q) - L) / L);
}

// Where an overlapped SparseLoCo round trains from: the replica's weights x
// less p, this client's own share of the outer step still to come.
TRK float trk_loco_start(float x, float p) { return x - p; }

// The outer step's rate in a round applying n payloads (of n members, for
// the own share): outer_lr is the rate summed over members, so each payload
// weighs outer_lr / n, and no entry moves past the mean of its senders
// (rate 1): the union of n members' top-k entries grows with n, and a rate
// that does not fall with it makes overlapped rounds diverge (README.md,
// "A stable outer step").
TRK float trk_loco_rate(float outer_lr, int n) { return n > 0 && outer_lr < (float)n ? outer_lr / (float)n : 1.0f; }

// That share of one decoded entry v.
TRK float trk_loco_share(float v, float lr) { return lr * v; }

// SparseLoCo's error feedback takes the pseudo-gradient: e = decay * e + (x0 - x).
TRK float trk_loco_feedback(float e, float x0, float x, float decay) { return decay * e + (x0 - x); }

// SparseLoCo's selection in chunk b of the error feedback e (the tensor's
// view): in-chunk indices sel and codes code (k each) against the returned
// scale, max |selected|; e keeps what the decoded values miss. Scratch as
// trk_chunk_topk's.
TRK float trk_loco_select(const tr_demo_tensor *x, float *e, size_t b, int vb, float *blk, float *best, uint32_t *ia,
                          uint32_t *sel, uint32_t *code) {
    trk_chunk_topk(x, e, b, blk, best, ia, sel);
    float s = 0.0f;
    for (int j = 0; j < x->k; j++) {
        float a = blk[sel[j]] < 0 ? -blk[sel[j]] : blk[sel[j]];
        if (a > s) s = a;
    }
    for (int j = 0; j < x->k; j++) {
        uint32_t q = trk_loco_code(blk[sel[j]], s, vb);
        code[j] = q;
        size_t pos = trk_chunk_pos(x, b, sel[j]);
        e[pos] = e[pos] - trk_loco_value(q, s, vb);
    }
    return s;
}

// SparseLoCo's outer step from the scatter-mean u of the clients' decoded
// entries (each position's sum over the payloads that hold it, divided by
// their count: trk_chunk_sum with counts).
TRK float trk_loco_outer(float p, float u, float lr) { return p - lr * u; }

#endif

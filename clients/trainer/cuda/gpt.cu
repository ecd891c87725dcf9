// gpt.cu: the GPT forward and backward on the GPU, mirroring gpt.c layer by
// layer (shapes in comments there).
//
// Determinism: no atomics. Every output element is produced by one thread
// with a sequential loop, or by one block/warp with a fixed reduction tree,
// and grid sizes depend only on the problem shape, never on the number of
// SMs, so two runs on the same GPU give the same bits. Built with
// --fmad=false so products and sums round like the CPU path (results still
// differ from the CPU in summation order, by ~1e-6 relative).

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../layout.h"
#include "../mathfn.h"
#include "trainer_cuda.h"

// ----------------------------------------------------------------------------
// CUDA kernels

// out(BT,C) = wte[tok] + wpe[t]
__global__ void encoder_forward_kernel(float *out, const int32_t *tok, const float *wte, const float *wpe, int BT, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)BT * C) return;
    int bt = (int)(idx / C), i = (int)(idx % C);
    out[idx] = wte[(size_t)tok[bt] * C + i] + wpe[(size_t)(bt % T) * C + i];
}

// One thread per channel, positions in order: no two threads touch one element.
__global__ void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int BT, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= C) return;
    for (int bt = 0; bt < BT; bt++) {
        float d = dout[(size_t)bt * C + i];
        dwte[(size_t)tok[bt] * C + i] += d;
        dwpe[(size_t)(bt % T) * C + i] += d;
    }
}

// Sum over a warp with a fixed tree; the result is broadcast from lane 0 so
// every lane holds the same bits.
__device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return __shfl_sync(0xffffffffu, v, 0);
}

__device__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
    return __shfl_sync(0xffffffffu, v, 0);
}

// One warp per row.
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += x[i];
    float mu = warp_sum(s) / C;
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) { float d = x[i] - mu; v += d * d; }
    float rs = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
    float *o = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32) o[i] = (x[i] - mu) * rs * w[i] + b[i];
    if (lane == 0) { mean[row] = mu; rstd[row] = rs; }
}

// dinp(N,C) += ..., one warp per row.
__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                               const float *mean, const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    float mu = mean[row], rs = rstd[row];
    float dm = 0.0f, dn = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float norm = (x[i] - mu) * rs, d = w[i] * dy[i];
        dm += d;
        dn += d * norm;
    }
    dm = warp_sum(dm) / C;
    dn = warp_sum(dn) / C;
    float *dx = dinp + (size_t)row * C;
    for (int i = lane; i < C; i += 32) {
        float norm = (x[i] - mu) * rs, d = w[i] * dy[i];
        dx[i] += (d - dm - norm * dn) * rs;
    }
}

// dw(C) += sum_r norm*dout, db(C) += sum_r dout: one thread per channel, rows in order.
__global__ void layernorm_backward_dw_kernel(float *dw, float *db, const float *dout, const float *inp,
                                             const float *mean, const float *rstd, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int r = 0; r < N; r++) {
        float dy = dout[(size_t)r * C + i];
        sw += (inp[(size_t)r * C + i] - mean[r]) * rstd[r] * dy;
        sb += dy;
    }
    dw[i] = dw[i] + sw;
    db[i] = db[i] + sb;
}

// out(M,N) = base + A(M,K) * B(N,K)^T, 64x64 tiles, 256 threads with 4x4
// outputs each; every output sums k = 0, 1, 2, ... in order.
#define GT 64
#define GK 16
__global__ void gemm_nt_kernel(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                               float *out, int ldo, const float *bias, int accumulate) {
    __shared__ float As[GK][GT + 1];
    __shared__ float Bs[GK][GT + 1];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int m0 = blockIdx.y * GT, n0 = blockIdx.x * GT;
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += GK) {
        for (int l = threadIdx.x; l < GT * GK; l += blockDim.x) {
            int r = l / GK, kk = l % GK, gk = k0 + kk;
            As[kk][r] = (m0 + r < M && gk < K) ? A[(size_t)(m0 + r) * lda + gk] : 0.0f;
            Bs[kk][r] = (n0 + r < N && gk < K) ? B[(size_t)(n0 + r) * ldb + gk] : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < GK; kk++) {
            float a[4], b[4];
            for (int i = 0; i < 4; i++) a[i] = As[kk][ty + 16 * i];
            for (int j = 0; j < 4; j++) b[j] = Bs[kk][tx + 16 * j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m >= M || n >= N) continue;
            float *o = out + (size_t)m * ldo + n;
            if (accumulate) *o = *o + acc[i][j];
            else if (bias) *o = bias[n] + acc[i][j];
            else *o = acc[i][j];
        }
}

// dst(cols, rows) = src(rows, cols)^T
__global__ void transpose_kernel(float *dst, const float *src, int rows, int cols) {
    __shared__ float tile[32][33];
    int c = blockIdx.x * 32 + threadIdx.x, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y)
        if (r0 + j < rows && c < cols) tile[j][threadIdx.x] = src[(size_t)(r0 + j) * cols + c];
    __syncthreads();
    int r = r0 + threadIdx.x, c0 = blockIdx.x * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y)
        if (c0 + j < cols && r < rows) dst[(size_t)(c0 + j) * rows + r] = tile[threadIdx.x][j];
}

// dbias(OC) += column sums of dout(BT,OC): one thread per column, rows in order.
__global__ void bias_backward_kernel(float *dbias, const float *dout, int BT, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = 0.0f;
    for (int r = 0; r < BT; r++) s += dout[(size_t)r * OC + o];
    dbias[o] = dbias[o] + s;
}

// att(B,NH,T,T) = q.k * scale on and below the diagonal, 0 above.
__global__ void attention_scores_kernel(float *att, const float *qkv, int B, int T, int C, int NH) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * NH * T * T) return;
    int t2 = (int)(idx % T), t = (int)((idx / T) % T), h = (int)((idx / ((size_t)T * T)) % NH), b = (int)(idx / ((size_t)NH * T * T));
    int hs = C / NH;
    if (t2 > t) { att[idx] = 0.0f; return; }
    const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs, *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
    float s = 0.0f;
    for (int i = 0; i < hs; i++) s += q[i] * k[i];
    att[idx] = s * (1.0f / sqrtf((float)hs));
}

// Causal softmax of each att row, one warp per row.
__global__ void attention_softmax_kernel(float *att, int rows, int T) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    float *a = att + (size_t)row * T;
    float mx = -3.4e38f;
    for (int i = lane; i <= t; i += 32) mx = fmaxf(mx, a[i]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int i = lane; i <= t; i += 32) { float e = tr_expf(a[i] - mx); a[i] = e; s += e; }
    float inv = 1.0f / warp_sum(s);
    for (int i = lane; i <= t; i += 32) a[i] *= inv;
}

// out(B,T,C): out[b,t,h,i] = sum_{t2<=t} att[b,h,t,t2] v[b,t2,h,i]
__global__ void attention_values_kernel(float *out, const float *att, const float *qkv, int B, int T, int C, int NH) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * C) return;
    int c = (int)(idx % C), t = (int)((idx / C) % T), b = (int)(idx / ((size_t)C * T));
    int hs = C / NH, h = c / hs;
    const float *a = att + (((size_t)b * NH + h) * T + t) * T;
    float s = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) s += a[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + c];
    out[idx] = s;
}

// datt[b,h,t,t2] = dout[b,t,h,:] . v[b,t2,h,:]
__global__ void attention_datt_kernel(float *datt, const float *dout, const float *qkv, int B, int T, int C, int NH) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * NH * T * T) return;
    int t2 = (int)(idx % T), t = (int)((idx / T) % T), h = (int)((idx / ((size_t)T * T)) % NH), b = (int)(idx / ((size_t)NH * T * T));
    int hs = C / NH;
    if (t2 > t) { datt[idx] = 0.0f; return; }
    const float *dy = dout + ((size_t)b * T + t) * C + h * hs, *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
    float s = 0.0f;
    for (int i = 0; i < hs; i++) s += dy[i] * v[i];
    datt[idx] = s;
}

// dpre = att * (datt - sum(att*datt)) * scale, one warp per row.
__global__ void attention_dpre_kernel(float *dpre, const float *att, const float *datt, int rows, int T, float scale) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    const float *a = att + (size_t)row * T, *d = datt + (size_t)row * T;
    float s = 0.0f;
    for (int i = lane; i <= t; i += 32) s += a[i] * d[i];
    s = warp_sum(s);
    float *o = dpre + (size_t)row * T;
    for (int i = lane; i < T; i += 32) o[i] = i <= t ? a[i] * (d[i] - s) * scale : 0.0f;
}

// dqkv(B,T,3C): dq[t] = sum_{t2<=t} dpre[t,t2] k[t2]; dk[t2] = sum_{t>=t2} dpre[t,t2] q[t];
// dv[t2] = sum_{t>=t2} att[t,t2] dout[t]. One thread per element of dqkv.
__global__ void attention_dqkv_kernel(float *dqkv, const float *dpre, const float *att, const float *dout, const float *qkv,
                                      int B, int T, int C, int NH) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * 3 * C) return;
    int c3 = (int)(idx % (3 * C)), t = (int)((idx / (3 * C)) % T), b = (int)(idx / ((size_t)3 * C * T));
    int part = c3 / C, c = c3 % C, hs = C / NH, h = c / hs;
    const float *P = dpre + ((size_t)b * NH + h) * T * T, *A = att + ((size_t)b * NH + h) * T * T;
    float s = 0.0f;
    if (part == 0) {
        for (int t2 = 0; t2 <= t; t2++) s += P[(size_t)t * T + t2] * qkv[((size_t)b * T + t2) * 3 * C + C + c];
    } else if (part == 1) {
        for (int tq = t; tq < T; tq++) s += P[(size_t)tq * T + t] * qkv[((size_t)b * T + tq) * 3 * C + c];
    } else {
        for (int tq = t; tq < T; tq++) s += A[(size_t)tq * T + t] * dout[((size_t)b * T + tq) * C + c];
    }
    dqkv[idx] = s;
}

#define GELU_SCALE 0.7978845608f

__global__ void gelu_forward_kernel(float *out, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    out[i] = 0.5f * v * (1.0f + tr_tanhf(GELU_SCALE * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_backward_kernel(float *dinp, const float *x, const float *dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float th = tr_tanhf(GELU_SCALE * (v + 0.044715f * v * v * v));
    float local = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * v * v);
    dinp[i] = local * dout[i];
}

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// Softmax over the first V logits and the loss, one 256-thread block per row
// with a fixed shared-memory tree.
#define CE_THREADS 256
__global__ void crossentropy_forward_kernel(float *probs, float *losses, const float *logits, const int32_t *targets, int V, int Vp) {
    __shared__ float red[CE_THREADS];
    int r = blockIdx.x, tid = threadIdx.x;
    const float *l = logits + (size_t)r * Vp;
    float *p = probs + (size_t)r * Vp;
    float mx = -3.4e38f;
    for (int i = tid; i < V; i += CE_THREADS) mx = fmaxf(mx, l[i]);
    red[tid] = mx;
    __syncthreads();
    for (int s = CE_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
        __syncthreads();
    }
    mx = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = tid; i < V; i += CE_THREADS) { float e = tr_expf(l[i] - mx); p[i] = e; sum += e; }
    red[tid] = sum;
    __syncthreads();
    for (int s = CE_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = red[tid] + red[tid + s];
        __syncthreads();
    }
    sum = red[0];
    float inv = 1.0f / sum;
    for (int i = tid; i < Vp; i += CE_THREADS) p[i] = i < V ? p[i] * inv : 0.0f;
    if (tid == 0) losses[r] = tr_logf(sum) - (l[targets[r]] - mx);
}

__global__ void crossentropy_backward_kernel(float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT, int V, int Vp) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)BT * Vp) return;
    int r = (int)(idx / Vp), i = (int)(idx % Vp);
    dlogits[idx] = i < V ? (probs[idx] - (i == targets[r] ? 1.0f : 0.0f)) * dloss : 0.0f;
}

// ----------------------------------------------------------------------------
// Kernel launchers

static unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

static void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC) {
    dim3 grid((OC + GT - 1) / GT, (BT + GT - 1) / GT);
    gemm_nt_kernel<<<grid, 256>>>(BT, OC, C, inp, C, w, C, out, OC, bias, 0);
}

static void transpose(float *dst, const float *src, int rows, int cols) {
    dim3 grid((cols + 31) / 32, (rows + 31) / 32), block(32, 8);
    transpose_kernel<<<grid, block>>>(dst, src, rows, cols);
}

struct trg_model {
    tr_config cfg;
    size_t num_params;
    size_t offsets[TR_NUM_TENSORS]; // tr_param_layout (../layout.h)
    float *params, *grads;  // (N) device
    float *acts, *dacts;    // device, tr_act_layout / tr_dact_layout (../layout.h)
    float *sw, *so, *si;    // transposes
    float *datt, *dpre;     // (B, NH, T, T) attention backward
    int32_t *tokens, *targets; // (B*T) device
    float *h_losses;        // (B*T) host
    cudaError_t err;
    char name[256];
};

static void matmul_backward(trg_model *g, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, int BT, int C, int OC) {
    transpose(g->sw, w, OC, C); // (C, OC)
    dim3 gi((C + GT - 1) / GT, (BT + GT - 1) / GT);
    gemm_nt_kernel<<<gi, 256>>>(BT, C, OC, dout, OC, g->sw, OC, dinp, C, NULL, 0);
    transpose(g->so, dout, BT, OC); // (OC, BT)
    transpose(g->si, inp, BT, C);   // (C, BT)
    dim3 gw((C + GT - 1) / GT, (OC + GT - 1) / GT);
    gemm_nt_kernel<<<gw, 256>>>(OC, C, BT, g->so, BT, g->si, BT, dw, C, NULL, 1);
    if (dbias) bias_backward_kernel<<<blocks_for(OC, 256), 256>>>(dbias, dout, BT, OC);
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int N, int C) {
    layernorm_forward_kernel<<<blocks_for(N, 8), 256>>>(out, mean, rstd, inp, w, b, N, C);
}

static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int N, int C) {
    layernorm_backward_dinp_kernel<<<blocks_for(N, 8), 256>>>(dinp, dout, inp, w, mean, rstd, N, C);
    layernorm_backward_dw_kernel<<<blocks_for(C, 256), 256>>>(dw, db, dout, inp, mean, rstd, N, C);
}

// ----------------------------------------------------------------------------
// Model

// Parameter views (tr_params), activation buffers (tr_acts, tr_dacts) and
// their sizes come from ../layout.h, shared with gpt.c.

static void gpt_forward(trg_model *g, const tr_params *p, tr_acts *a, int B, int T) {
    int L = g->cfg.layers, C = g->cfg.channels, NH = g->cfg.heads, Vp = g->cfg.padded_vocab, V = g->cfg.vocab;
    size_t BT = (size_t)B * T, att_n = (size_t)B * NH * T * T;
    encoder_forward_kernel<<<blocks_for(BT * C, 256), 256>>>(a->encoded, g->tokens, p->wte, p->wpe, (int)BT, T, C);
    for (int l = 0; l < L; l++) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        float *att = a->att + l * att_n, *res2 = a->residual2 + l * BT * C, *ln2 = a->ln2 + l * BT * C;
        float *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C, *res3 = a->residual3 + l * BT * C;
        layernorm_forward(ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, residual, p->ln1w + l * C, p->ln1b + l * C, (int)BT, C);
        matmul_forward(qkv, ln1, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, (int)BT, C, 3 * C);
        attention_scores_kernel<<<blocks_for(att_n, 256), 256>>>(att, qkv, B, T, C, NH);
        attention_softmax_kernel<<<blocks_for((size_t)B * NH * T, 8), 256>>>(att, B * NH * T, T);
        attention_values_kernel<<<blocks_for(BT * C, 256), 256>>>(atty, att, qkv, B, T, C, NH);
        matmul_forward(res3, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, (int)BT, C, C);
        residual_forward_kernel<<<blocks_for(BT * C, 256), 256>>>(res2, residual, res3, BT * C);
        layernorm_forward(ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p->ln2w + l * C, p->ln2b + l * C, (int)BT, C);
        matmul_forward(fch, ln2, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, (int)BT, C, 4 * C);
        gelu_forward_kernel<<<blocks_for(BT * 4 * C, 256), 256>>>(fchg, fch, BT * 4 * C);
        matmul_forward(res3, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, (int)BT, 4 * C, C);
        residual_forward_kernel<<<blocks_for(BT * C, 256), 256>>>(res3, res2, res3, BT * C);
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (L - 1) * BT * C, p->lnfw, p->lnfb, (int)BT, C);
    matmul_forward(a->logits, a->lnf, p->wte, NULL, (int)BT, C, Vp);
    crossentropy_forward_kernel<<<(unsigned)BT, CE_THREADS>>>(a->probs, a->losses, a->logits, g->targets, V, Vp);
}

static void gpt_backward(trg_model *g, const tr_params *p, tr_params *gr, tr_acts *a, tr_dacts *d, float dloss, int B, int T) {
    int L = g->cfg.layers, C = g->cfg.channels, NH = g->cfg.heads, Vp = g->cfg.padded_vocab, V = g->cfg.vocab;
    size_t BT = (size_t)B * T, att_n = (size_t)B * NH * T * T;
    float scale = 1.0f / sqrtf((float)(C / NH));
    crossentropy_backward_kernel<<<blocks_for(BT * Vp, 256), 256>>>(d->dlogits, a->probs, g->targets, dloss, (int)BT, V, Vp);
    matmul_backward(g, d->dln, gr->wte, NULL, d->dlogits, a->lnf, p->wte, (int)BT, C, Vp);
    cudaMemsetAsync(d->dres, 0, sizeof(float) * BT * C);
    layernorm_backward(d->dres, gr->lnfw, gr->lnfb, d->dln, a->residual3 + (L - 1) * BT * C, p->lnfw, a->lnf_mean, a->lnf_rstd, (int)BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        const float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        const float *att = a->att + l * att_n, *res2 = a->residual2 + l * BT * C, *ln2 = a->ln2 + l * BT * C;
        const float *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C;
        matmul_backward(g, d->dfch_gelu, gr->fcprojw + (size_t)l * C * 4 * C, gr->fcprojb + l * C, d->dres, fchg,
                        p->fcprojw + (size_t)l * C * 4 * C, (int)BT, 4 * C, C);
        gelu_backward_kernel<<<blocks_for(BT * 4 * C, 256), 256>>>(d->dfch, fch, d->dfch_gelu, BT * 4 * C);
        matmul_backward(g, d->dln, gr->fcw + (size_t)l * 4 * C * C, gr->fcb + l * 4 * C, d->dfch, ln2,
                        p->fcw + (size_t)l * 4 * C * C, (int)BT, C, 4 * C);
        layernorm_backward(d->dres, gr->ln2w + l * C, gr->ln2b + l * C, d->dln, res2, p->ln2w + l * C,
                           a->ln2_mean + l * BT, a->ln2_rstd + l * BT, (int)BT, C);
        matmul_backward(g, d->datty, gr->attprojw + (size_t)l * C * C, gr->attprojb + l * C, d->dres, atty,
                        p->attprojw + (size_t)l * C * C, (int)BT, C, C);
        attention_datt_kernel<<<blocks_for(att_n, 256), 256>>>(g->datt, d->datty, qkv, B, T, C, NH);
        attention_dpre_kernel<<<blocks_for((size_t)B * NH * T, 8), 256>>>(g->dpre, att, g->datt, B * NH * T, T, scale);
        attention_dqkv_kernel<<<blocks_for(BT * 3 * C, 256), 256>>>(d->dqkv, g->dpre, att, d->datty, qkv, B, T, C, NH);
        matmul_backward(g, d->dln, gr->qkvw + (size_t)l * 3 * C * C, gr->qkvb + l * 3 * C, d->dqkv, ln1,
                        p->qkvw + (size_t)l * 3 * C * C, (int)BT, C, 3 * C);
        layernorm_backward(d->dres, gr->ln1w + l * C, gr->ln1b + l * C, d->dln, residual, p->ln1w + l * C,
                           a->ln1_mean + l * BT, a->ln1_rstd + l * BT, (int)BT, C);
    }
    encoder_backward_kernel<<<blocks_for(C, 256), 256>>>(gr->wte, gr->wpe, d->dres, g->tokens, (int)BT, T, C);
}

// ----------------------------------------------------------------------------
// API

#define CK(call)                                     \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess) { g->err = e_; return TR_EDEVICE; } \
    } while (0)

extern "C" int trg_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

extern "C" const char *trg_device_name(const trg_model *g) { return g ? g->name : ""; }
extern "C" const char *trg_last_error(const trg_model *g) { return g ? cudaGetErrorString(g->err) : ""; }

extern "C" void trg_destroy(trg_model *g) {
    if (!g) return;
    cudaFree(g->params); cudaFree(g->grads); cudaFree(g->acts); cudaFree(g->dacts);
    cudaFree(g->sw); cudaFree(g->so); cudaFree(g->si); cudaFree(g->datt); cudaFree(g->dpre);
    cudaFree(g->tokens); cudaFree(g->targets);
    cudaFreeHost(g->h_losses);
    free(g);
}

extern "C" int trg_create(const tr_config *cfg, trg_model **out) {
    if (!cfg || !out) return TR_EINVAL;
    *out = NULL;
    trg_model *g = (trg_model *)calloc(1, sizeof *g);
    if (!g) return TR_ENOMEM;
    g->cfg = *cfg;
    size_t T = cfg->seq_len, NH = cfg->heads;
    size_t off = tr_param_layout(cfg, NULL, g->offsets);
    g->num_params = off;
    size_t B = cfg->micro_batch, BT = B * T;
    size_t wmax, omax, imax;
    tr_scratch_floats(cfg, &wmax, &omax, &imax);
    cudaDeviceProp prop;
    int rc = TR_EDEVICE;
#define GALLOC(ptr, bytes) do { if ((g->err = cudaMalloc((void **)&(ptr), (bytes))) != cudaSuccess) goto fail; } while (0)
    if ((g->err = cudaSetDevice(0)) != cudaSuccess) goto fail;
    if ((g->err = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) goto fail;
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    GALLOC(g->params, sizeof(float) * off);
    GALLOC(g->grads, sizeof(float) * off);
    GALLOC(g->acts, sizeof(float) * tr_act_layout(cfg, (int)B, (int)T, NULL, NULL));
    GALLOC(g->dacts, sizeof(float) * tr_dact_layout(cfg, (int)B, (int)T, NULL, NULL));
    GALLOC(g->sw, sizeof(float) * wmax);
    GALLOC(g->so, sizeof(float) * omax);
    GALLOC(g->si, sizeof(float) * imax);
    GALLOC(g->datt, sizeof(float) * B * NH * T * T);
    GALLOC(g->dpre, sizeof(float) * B * NH * T * T);
    GALLOC(g->tokens, sizeof(int32_t) * BT);
    GALLOC(g->targets, sizeof(int32_t) * BT);
    if ((g->err = cudaMallocHost((void **)&g->h_losses, sizeof(float) * BT)) != cudaSuccess) goto fail;
#undef GALLOC
    *out = g;
    return TR_OK;
fail:
    if (g->err == cudaErrorMemoryAllocation) rc = TR_ENOMEM;
    trg_destroy(g);
    return rc;
}

// Runs the micro-batches; grads (host) receives the gradients when not NULL.
static int trg_run(trg_model *g, const float *weights, size_t nparams, const int32_t *tokens, const int32_t *targets,
                   int n, int t, float *grads, float *loss) {
    if (!g || !weights || !tokens || !targets || !loss || nparams != g->num_params || n < 1 || t < 1 || t > g->cfg.seq_len)
        return TR_EINVAL;
    CK(cudaMemcpy(g->params, weights, sizeof(float) * nparams, cudaMemcpyHostToDevice));
    if (grads) CK(cudaMemset(g->grads, 0, sizeof(float) * nparams));
    tr_params p = tr_param_views(g->params, g->offsets), gr = tr_param_views(g->grads, g->offsets);
    float dloss = 1.0f / ((float)n * (float)t), total = 0.0f;
    for (int b0 = 0; b0 < n; b0 += g->cfg.micro_batch) {
        int B = n - b0 < g->cfg.micro_batch ? n - b0 : g->cfg.micro_batch;
        size_t BT = (size_t)B * t;
        CK(cudaMemcpy(g->tokens, tokens + (size_t)b0 * t, sizeof(int32_t) * BT, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g->targets, targets + (size_t)b0 * t, sizeof(int32_t) * BT, cudaMemcpyHostToDevice));
        tr_acts a;
        tr_act_layout(&g->cfg, B, t, g->acts, &a);
        gpt_forward(g, &p, &a, B, t);
        if (grads) {
            tr_dacts d;
            tr_dact_layout(&g->cfg, B, t, g->dacts, &d);
            gpt_backward(g, &p, &gr, &a, &d, dloss, B, t);
        }
        CK(cudaGetLastError());
        CK(cudaMemcpy(g->h_losses, a.losses, sizeof(float) * BT, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < BT; i++) total += g->h_losses[i]; // same order as the CPU path
    }
    if (grads) CK(cudaMemcpy(grads, g->grads, sizeof(float) * nparams, cudaMemcpyDeviceToHost));
    *loss = total / ((float)n * (float)t);
    return TR_OK;
}

extern "C" int trg_step(trg_model *g, const float *weights, size_t nparams, const int32_t *tokens, const int32_t *targets,
                        int n, int t, float *grads, float *loss) {
    if (!grads) return TR_EINVAL;
    return trg_run(g, weights, nparams, tokens, targets, n, t, grads, loss);
}

extern "C" int trg_eval(trg_model *g, const float *weights, size_t nparams, const int32_t *tokens, const int32_t *targets,
                        int n, int t, float *loss) {
    return trg_run(g, weights, nparams, tokens, targets, n, t, NULL, loss);
}

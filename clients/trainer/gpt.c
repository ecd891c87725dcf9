// gpt.c: a GPT-2 style decoder (token + position embeddings, pre-LayerNorm,
// causal multi-head attention, GELU MLP, tied lm-head) trained in fp32 on the
// CPU. Each layer's forward and backward sit side by side, llm.c style.
//
// Determinism: every output element is computed by one thread, and every sum
// runs in a fixed order that depends on neither the thread count nor the ISA
// (see gemm_kernel.h for the matmuls). Build flags are pinned in trainer.go.

#include "internal.h"

// FP exceptions are never observed here, so GCC may vectorise the
// exp/tanh loops (GELU, softmax); no result changes (unlike -ffast-math).
#pragma GCC optimize("no-trapping-math")

// The parameter and activation layouts (tr_params, tr_acts, tr_dacts and
// their views) are in layout.h, shared with the CUDA path.

// ----------------------------------------------------------------------------
// Layers: forward and backward side by side.

// out(B,T,C) = wte[tok] + wpe[t]
static void encoder_forward(const tr_model *m, float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T) {
    int C = m->cfg.channels;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)tok[bt] * C, *pe = wpe + (size_t)(bt % T) * C;
        float *o = out + (size_t)bt * C;
        for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
    }
}

// Channels are split across threads; each element sums its positions in (b,t) order.
static void encoder_backward(const tr_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B, int T) {
    int C = m->cfg.channels;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < C; i++) {
        for (int bt = 0; bt < B * T; bt++) {
            float d = dout[(size_t)bt * C + i];
            dwte[(size_t)tok[bt] * C + i] += d;
            dwpe[(size_t)(bt % T) * C + i] += d;
        }
    }
}

// out(N,C) = (x - mean) * rstd * w + b per row.
static void layernorm_forward(const tr_model *m, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C) {
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float s = 0.0f;
        for (int i = 0; i < C; i++) s += x[i];
        float mu = s / C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) { float d = x[i] - mu; v += d * d; }
        v = v / C;
        float rs = 1.0f / __builtin_sqrtf(v + 1e-5f);
        float *o = out + (size_t)r * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - mu) * rs * w[i] + b[i];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

// dinp(N,C) += ..., dw(C) += sum_r norm*dout, db(C) += sum_r dout (rows in order).
static void layernorm_backward(const tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C) {
    #pragma omp parallel num_threads(m->nthreads)
    {
        #pragma omp for schedule(static)
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
            float mu = mean[r], rs = rstd[r];
            float dmean = 0.0f, dnm = 0.0f;
            for (int i = 0; i < C; i++) {
                float norm = (x[i] - mu) * rs;
                float dn = w[i] * dy[i];
                dmean += dn;
                dnm += dn * norm;
            }
            dmean = dmean / C;
            dnm = dnm / C;
            float *dx = dinp + (size_t)r * C;
            for (int i = 0; i < C; i++) {
                float norm = (x[i] - mu) * rs;
                float dn = w[i] * dy[i];
                dx[i] += (dn - dmean - norm * dnm) * rs;
            }
        }
        #pragma omp for schedule(static)
        for (int i = 0; i < C; i++) {
            float sw = 0.0f, sb = 0.0f;
            for (int r = 0; r < N; r++) {
                float dy = dout[(size_t)r * C + i];
                sw += (inp[(size_t)r * C + i] - mean[r]) * rstd[r] * dy;
                sb += dy;
            }
            dw[i] = dw[i] + sw;
            db[i] = db[i] + sb;
        }
    }
}

// dst(cols, rows) = src(rows, cols)^T, in cache blocks.
// One tile of dst(cols, rows) = src(rows, cols)^T: rows [r0, r1), columns
// [c0, c1). Whole 8x8 blocks go through registers (eight row loads, a
// shuffle network, eight column stores); the edges are copied one by one.
// Pure data movement, so every ISA gives the same bits.
#define TR_TRANSPOSE_TILE(NAME, TARGET)                                                                   \
    TARGET static void NAME(float *dst, const float *src, int rows, int cols, int r0, int r1, int c0, int c1) { \
        typedef int v8i __attribute__((vector_size(32)));                                                 \
        const v8i lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};                     \
        const v8i pl = {0, 1, 8, 9, 4, 5, 12, 13}, ph = {2, 3, 10, 11, 6, 7, 14, 15};                     \
        const v8i hl = {0, 1, 2, 3, 8, 9, 10, 11}, hh = {4, 5, 6, 7, 12, 13, 14, 15};                     \
        int r8 = r0 + ((r1 - r0) & ~7), c8 = c0 + ((c1 - c0) & ~7);                                       \
        for (int r = r0; r < r8; r += 8)                                                                  \
            for (int c = c0; c < c8; c += 8) {                                                            \
                v8f x[8], t[8], u[8];                                                                     \
                for (int i = 0; i < 8; i++) x[i] = tr_load8(src + (size_t)(r + i) * cols + c);          \
                for (int i = 0; i < 8; i += 2) {                                                          \
                    t[i] = __builtin_shuffle(x[i], x[i + 1], lo);                                         \
                    t[i + 1] = __builtin_shuffle(x[i], x[i + 1], hi);                                     \
                }                                                                                         \
                for (int i = 0; i < 8; i += 4)                                                            \
                    for (int j = 0; j < 2; j++) {                                                         \
                        u[i + 2 * j] = __builtin_shuffle(t[i + j], t[i + j + 2], pl);                     \
                        u[i + 2 * j + 1] = __builtin_shuffle(t[i + j], t[i + j + 2], ph);                 \
                    }                                                                                     \
                /* u[0..3] hold columns {0,4},{1,5},{2,6},{3,7} of rows 0-3, u[4..7] of rows 4-7 */     \
                for (int j = 0; j < 4; j++) {                                                             \
                    v8f a = __builtin_shuffle(u[j], u[j + 4], hl), b = __builtin_shuffle(u[j], u[j + 4], hh); \
                    memcpy(dst + (size_t)(c + j) * rows + r, &a, sizeof a);                               \
                    memcpy(dst + (size_t)(c + j + 4) * rows + r, &b, sizeof b);                           \
                }                                                                                         \
            }                                                                                             \
        for (int r = r0; r < r1; r++)                                                                     \
            for (int c = r < r8 ? c8 : c0; c < c1; c++) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c]; \
    }

TR_TRANSPOSE_TILE(tr_transpose_base, )
TR_TRANSPOSE_TILE(tr_transpose_avx2, __attribute__((target("avx2"))))

void tr_transpose(const tr_model *m, float *dst, const float *src, int rows, int cols) {
    const int TB = 64;
    int rb = (rows + TB - 1) / TB, cb = (cols + TB - 1) / TB, avx2 = m->isa >= TR_ISA_AVX2;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < rb; i++)
        for (int j = 0; j < cb; j++) {
            int r1 = (i + 1) * TB < rows ? (i + 1) * TB : rows, c1 = (j + 1) * TB < cols ? (j + 1) * TB : cols;
            if (avx2) tr_transpose_avx2(dst, src, rows, cols, i * TB, r1, j * TB, c1);
            else tr_transpose_base(dst, src, rows, cols, i * TB, r1, j * TB, c1);
        }
}

// out(BT,OC) = inp(BT,C) * w(OC,C)^T + bias(OC)
static void matmul_forward(const tr_model *m, float *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC) {
    tr_gemm_args g = {BT, OC, C, inp, C, w, C, out, OC, bias, 0};
    m->gemm(&g, m->nthreads);
}

// dinp(BT,C) = dout * w (overwritten); dw(OC,C) += dout^T * inp; dbias(OC) += column sums of dout.
static void matmul_backward(tr_model *m, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, int BT, int C, int OC) {
    tr_transpose(m, m->scratch_w, w, OC, C); // (C, OC)
    tr_gemm_args gi = {BT, C, OC, dout, OC, m->scratch_w, OC, dinp, C, NULL, 0};
    m->gemm(&gi, m->nthreads);
    tr_transpose(m, m->scratch_o, dout, BT, OC); // (OC, BT)
    tr_transpose(m, m->scratch_i, inp, BT, C);   // (C, BT)
    tr_gemm_args gw = {OC, C, BT, m->scratch_o, BT, m->scratch_i, BT, dw, C, NULL, 1};
    m->gemm(&gw, m->nthreads);
    if (dbias) {
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (int o = 0; o < OC; o++) {
            const float *row = m->scratch_o + (size_t)o * BT;
            float s = 0.0f;
            for (int i = 0; i < BT; i++) s += row[i];
            dbias[o] = dbias[o] + s;
        }
    }
}

// out(B,T,C) = causal softmax(q k^T / sqrt(hs)) v per head; att(B,NH,T,T) keeps the softmax.
static void attention_forward(const tr_model *m, float *out, float *att, const float *qkv, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads, hs = C / NH;
    int C3 = 3 * C;
    float scale = 1.0f / __builtin_sqrtf((float)hs);
    #pragma omp parallel for collapse(3) schedule(static) num_threads(m->nthreads)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float mx = -3.4e38f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                    float s = tr_dot8(q, k, hs) * scale;
                    a[t2] = s;
                    if (s > mx) mx = s;
                }
                for (int t2 = 0; t2 <= t; t2++) a[t2] = tr_expf(a[t2] - mx);
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) sum += a[t2];
                float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
                for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                    float w = a[t2];
                    for (int i = 0; i < hs; i++) o[i] += w * v[i];
                }
            }
}

// dqkv(B,T,3C) = gradient of attention_forward. Work is split by (b, h): each
// pair owns its slice of dqkv, and t runs in order inside it.
static void attention_backward(tr_model *m, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads, hs = C / NH;
    int C3 = 3 * C;
    float scale = 1.0f / __builtin_sqrtf((float)hs);
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * C3);
    #pragma omp parallel num_threads(m->nthreads)
    {
        float *datt = m->row_buf + (size_t)omp_get_thread_num() * 2 * m->cfg.seq_len;
        float *dpre = datt + m->cfg.seq_len;
        #pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                    const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
                    const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                    float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                    float s = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                        float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * C + h * hs;
                        float d = tr_dot8(dy, v, hs);
                        for (int i = 0; i < hs; i++) dv[i] += a[t2] * dy[i];
                        datt[t2] = d;
                        s += a[t2] * d;
                    }
                    for (int t2 = 0; t2 <= t; t2++) dpre[t2] = a[t2] * (datt[t2] - s) * scale;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *k = qkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                        float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + h * hs;
                        float g = dpre[t2];
                        for (int i = 0; i < hs; i++) { dq[i] += g * k[i]; dk[i] += g * q[i]; }
                    }
                }
    }
}

#define GELU_SCALE 0.7978845608f // sqrt(2/pi)

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Elementwise work goes to threads in blocks, so the inner loops vectorise.
#define TR_EW_BLOCK 4096

static void gelu_forward(const tr_model *m, float *out, const float *x, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * TR_EW_BLOCK;
        float *ob = out + b * TR_EW_BLOCK;
        int len = (int)(n - b * TR_EW_BLOCK < TR_EW_BLOCK ? n - b * TR_EW_BLOCK : TR_EW_BLOCK);
        for (int i = 0; i < len; i++) {
            float v = xb[i];
            float th = tr_tanhf(GELU_SCALE * (v + 0.044715f * v * v * v));
            ob[i] = 0.5f * v * (1.0f + th);
        }
    }
}

static void gelu_backward(const tr_model *m, float *dinp, const float *x, const float *dout, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * TR_EW_BLOCK, *db = dout + b * TR_EW_BLOCK;
        float *ob = dinp + b * TR_EW_BLOCK;
        int len = (int)(n - b * TR_EW_BLOCK < TR_EW_BLOCK ? n - b * TR_EW_BLOCK : TR_EW_BLOCK);
        for (int i = 0; i < len; i++) {
            float v = xb[i];
            float th = tr_tanhf(GELU_SCALE * (v + 0.044715f * v * v * v));
            float sech2 = 1.0f - th * th;
            float local = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * v * v);
            ob[i] = local * db[i];
        }
    }
}

static void residual_forward(const tr_model *m, float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// probs(BT,Vp) = softmax over the first V logits; losses(BT) = -ln probs[target].
static void crossentropy_forward(const tr_model *m, float *probs, float *losses, const float *logits, const int32_t *targets, int BT) {
    int V = m->cfg.vocab, Vp = m->cfg.padded_vocab;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int r = 0; r < BT; r++) {
        const float *l = logits + (size_t)r * Vp;
        float *p = probs + (size_t)r * Vp;
        float mx = -3.4e38f;
        for (int i = 0; i < V; i++) if (l[i] > mx) mx = l[i];
        for (int i = 0; i < V; i++) p[i] = tr_expf(l[i] - mx);
        float sum = 0.0f;
        for (int i = 0; i < V; i++) sum += p[i];
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++) p[i] *= inv;
        for (int i = V; i < Vp; i++) p[i] = 0.0f;
        // -ln p[target] = ln(sum) - (l - mx): no underflow for confident mistakes.
        losses[r] = tr_logf(sum) - (l[targets[r]] - mx);
    }
}

// dlogits(BT,Vp) = (probs - onehot(target)) * dloss; zero on padded columns.
static void crossentropy_backward(const tr_model *m, float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT) {
    int V = m->cfg.vocab, Vp = m->cfg.padded_vocab;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int r = 0; r < BT; r++) {
        const float *p = probs + (size_t)r * Vp;
        float *d = dlogits + (size_t)r * Vp;
        for (int i = 0; i < V; i++) d[i] = (p[i] - (i == targets[r] ? 1.0f : 0.0f)) * dloss;
        for (int i = V; i < Vp; i++) d[i] = 0.0f;
    }
}

// ----------------------------------------------------------------------------
// The model.

static void gpt_forward(tr_model *m, const tr_params *p, tr_acts *a, const int32_t *tok, const int32_t *tgt, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, Vp = m->cfg.padded_vocab;
    size_t BT = (size_t)B * T;
    encoder_forward(m, a->encoded, tok, p->wte, p->wpe, B, T);
    for (int l = 0; l < L; l++) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        float *att = a->att + (size_t)l * B * NH * T * T, *res2 = a->residual2 + l * BT * C;
        float *ln2 = a->ln2 + l * BT * C, *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C;
        float *res3 = a->residual3 + l * BT * C;
        layernorm_forward(m, ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, residual, p->ln1w + l * C, p->ln1b + l * C, BT, C);
        matmul_forward(m, qkv, ln1, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, BT, C, 3 * C);
        attention_forward(m, atty, att, qkv, B, T);
        // res3 doubles as scratch for the attention projection before it holds residual3.
        matmul_forward(m, res3, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, BT, C, C);
        residual_forward(m, res2, residual, res3, BT * C);
        layernorm_forward(m, ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p->ln2w + l * C, p->ln2b + l * C, BT, C);
        matmul_forward(m, fch, ln2, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, BT, C, 4 * C);
        gelu_forward(m, fchg, fch, BT * 4 * C);
        matmul_forward(m, res3, fchg, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, BT, 4 * C, C);
        residual_forward(m, res3, res2, res3, BT * C);
    }
    layernorm_forward(m, a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (L - 1) * BT * C, p->lnfw, p->lnfb, BT, C);
    matmul_forward(m, a->logits, a->lnf, p->wte, NULL, BT, C, Vp);
    crossentropy_forward(m, a->probs, a->losses, a->logits, tgt, BT);
}

static void gpt_backward(tr_model *m, const tr_params *p, tr_params *g, tr_acts *a, tr_dacts *d,
                         const int32_t *tok, const int32_t *tgt, float dloss, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, Vp = m->cfg.padded_vocab;
    size_t BT = (size_t)B * T;
    crossentropy_backward(m, d->dlogits, a->probs, tgt, dloss, BT);
    matmul_backward(m, d->dln, g->wte, NULL, d->dlogits, a->lnf, p->wte, BT, C, Vp);
    memset(d->dres, 0, sizeof(float) * BT * C);
    layernorm_backward(m, d->dres, g->lnfw, g->lnfb, d->dln, a->residual3 + (L - 1) * BT * C, p->lnfw,
                       a->lnf_mean, a->lnf_rstd, BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        const float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        const float *att = a->att + (size_t)l * B * NH * T * T, *res2 = a->residual2 + l * BT * C;
        const float *ln2 = a->ln2 + l * BT * C, *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C;
        // dres = d residual3 = d fcproj (and d residual2 through the skip connection)
        matmul_backward(m, d->dfch_gelu, g->fcprojw + (size_t)l * C * 4 * C, g->fcprojb + l * C, d->dres, fchg,
                        p->fcprojw + (size_t)l * C * 4 * C, BT, 4 * C, C);
        gelu_backward(m, d->dfch, fch, d->dfch_gelu, BT * 4 * C);
        matmul_backward(m, d->dln, g->fcw + (size_t)l * 4 * C * C, g->fcb + l * 4 * C, d->dfch, ln2,
                        p->fcw + (size_t)l * 4 * C * C, BT, C, 4 * C);
        layernorm_backward(m, d->dres, g->ln2w + l * C, g->ln2b + l * C, d->dln, res2, p->ln2w + l * C,
                           a->ln2_mean + l * BT, a->ln2_rstd + l * BT, BT, C);
        // dres = d residual2 = d attproj (and d residual)
        matmul_backward(m, d->datty, g->attprojw + (size_t)l * C * C, g->attprojb + l * C, d->dres, atty,
                        p->attprojw + (size_t)l * C * C, BT, C, C);
        attention_backward(m, d->dqkv, d->datty, qkv, att, B, T);
        matmul_backward(m, d->dln, g->qkvw + (size_t)l * 3 * C * C, g->qkvb + l * 3 * C, d->dqkv, ln1,
                        p->qkvw + (size_t)l * 3 * C * C, BT, C, 3 * C);
        layernorm_backward(m, d->dres, g->ln1w + l * C, g->ln1b + l * C, d->dln, residual, p->ln1w + l * C,
                           a->ln1_mean + l * BT, a->ln1_rstd + l * BT, BT, C);
    }
    encoder_backward(m, g->wte, g->wpe, d->dres, tok, B, T);
}

// Uniform in [0,1) from splitmix64; N(0,1) approximated by Irwin-Hall (12 uniforms),
// which needs no transcendental functions.
static uint64_t tr_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float tr_normal(uint64_t *s) {
    float sum = 0.0f;
    for (int i = 0; i < 12; i++) sum += (float)(tr_splitmix(s) >> 40) * (1.0f / 16777216.0f);
    return sum - 6.0f;
}

static int tr_config_check(const tr_config *c) {
    if (!c) return TR_EINVAL;
    if (c->vocab < 2 || c->padded_vocab < c->vocab || c->layers < 1 || c->channels < 8 || c->heads < 1 ||
        c->channels % c->heads != 0 || c->seq_len < 1 || c->micro_batch < 1)
        return TR_EINVAL;
    if (c->vocab > (1 << 24) || c->padded_vocab > (1 << 24) || c->layers > 1024 || c->channels > 65536 ||
        c->seq_len > 65536 || c->micro_batch > 65536)
        return TR_EINVAL;
    return TR_OK;
}

int tr_create(const tr_config *cfg, uint64_t seed, tr_model **out) {
    if (!out) return TR_EINVAL;
    *out = NULL;
    int rc = tr_config_check(cfg);
    if (rc) return rc;
    tr_model *m = calloc(1, sizeof *m);
    if (!m) return TR_ENOMEM;
    m->cfg = *cfg;
    size_t L = cfg->layers, C = cfg->channels, T = cfg->seq_len;
    size_t off = tr_param_layout(cfg, m->sizes, m->offsets);
    m->num_params = off;
    int B = cfg->micro_batch;
    size_t wmax, omax, imax;
    tr_scratch_floats(cfg, &wmax, &omax, &imax);
    m->nthreads = omp_get_num_procs();
    if (m->nthreads < 1) m->nthreads = 1;
    if (m->nthreads > TR_MAX_THREADS) m->nthreads = TR_MAX_THREADS;
    m->params = malloc(sizeof(float) * off);
    m->grads = calloc(off, sizeof(float));
    m->act_mem = malloc(sizeof(float) * tr_act_layout(cfg, B, (int)T, NULL, NULL));
    m->dact_mem = malloc(sizeof(float) * tr_dact_layout(cfg, B, (int)T, NULL, NULL));
    m->scratch_w = malloc(sizeof(float) * wmax);
    m->scratch_o = malloc(sizeof(float) * omax);
    m->scratch_i = malloc(sizeof(float) * imax);
    m->row_buf = malloc(sizeof(float) * 2 * T * (size_t)TR_MAX_THREADS);
    if (!m->params || !m->grads || !m->act_mem || !m->dact_mem || !m->scratch_w || !m->scratch_o || !m->scratch_i || !m->row_buf) {
        tr_destroy(m);
        return TR_ENOMEM;
    }
    m->isa = tr_isa_pick(TR_ISA_AUTO);
    m->gemm = tr_isa_kernel(m->isa);
    // GPT-2 initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2L),
    // LayerNorm weights 1, biases 0; padded vocabulary rows stay 0.
    uint64_t s = seed;
    float std = 0.02f, proj_std = 0.02f / __builtin_sqrtf(2.0f * L);
    memset(m->params, 0, sizeof(float) * off);
    for (int i = 0; i < TR_NUM_TENSORS; i++) {
        float *p = m->params + m->offsets[i];
        size_t n = m->sizes[i];
        if (i == TR_P_wte) n = (size_t)cfg->vocab * C;
        switch (i) {
        case TR_P_wte: case TR_P_wpe: case TR_P_qkvw: case TR_P_fcw:
            for (size_t j = 0; j < n; j++) p[j] = std * tr_normal(&s);
            break;
        case TR_P_attprojw: case TR_P_fcprojw:
            for (size_t j = 0; j < n; j++) p[j] = proj_std * tr_normal(&s);
            break;
        case TR_P_ln1w: case TR_P_ln2w: case TR_P_lnfw:
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
            break;
        default:
            break;
        }
    }
    *out = m;
    return TR_OK;
}

void tr_destroy(tr_model *m) {
    if (!m) return;
    free(m->params); free(m->grads); free(m->lookahead);
    free(m->adam_m); free(m->adam_v); free(m->delta);
    free(m->anchor); free(m->anchor_m); free(m->anchor_v);
    free(m->act_mem); free(m->dact_mem);
    free(m->scratch_w); free(m->scratch_o); free(m->scratch_i); free(m->row_buf); free(m->demo_buf);
    for (int i = 0; i < 257; i++) free(m->dct[i]);
    free(m);
}

int tr_set_threads(tr_model *m, int n) {
    if (!m || n < 1 || n > TR_MAX_THREADS) return TR_EINVAL;
    m->nthreads = n;
    return TR_OK;
}

int tr_set_isa(tr_model *m, int isa) {
    if (!m || isa < TR_ISA_AUTO || isa > TR_ISA_AVX512) return TR_EINVAL;
    m->isa = tr_isa_pick(isa);
    m->gemm = tr_isa_kernel(m->isa);
    return m->isa;
}

size_t tr_num_params(const tr_model *m) { return m ? m->num_params : 0; }

static int tr_check_batch(const tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t) {
    if (!m || !tokens || !targets || n < 1 || t < 1 || t > m->cfg.seq_len) return TR_EINVAL;
    size_t total = (size_t)n * t;
    for (size_t i = 0; i < total; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab || targets[i] < 0 || targets[i] >= m->cfg.vocab) return TR_EINVAL;
    return TR_OK;
}

// Weights the forward pass sees: the lookahead point under DeMo, else the master weights.
static float *tr_forward_weights(tr_model *m) { return m->lookahead_on ? m->lookahead : m->params; }

static float tr_sum_losses(const float *losses, int BT) {
    float s = 0.0f;
    for (int i = 0; i < BT; i++) s += losses[i];
    return s;
}

int tr_step(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    int rc = tr_check_batch(m, tokens, targets, n, t);
    if (rc) return rc;
    if (!loss) return TR_EINVAL;
    tr_params p = tr_param_views(tr_forward_weights(m), m->offsets);
    tr_params g = tr_param_views(m->grads, m->offsets);
    memset(m->grads, 0, sizeof(float) * m->num_params);
    float dloss = 1.0f / ((float)n * (float)t);
    float total = 0.0f;
    for (int b0 = 0; b0 < n; b0 += m->cfg.micro_batch) {
        int B = n - b0 < m->cfg.micro_batch ? n - b0 : m->cfg.micro_batch;
        tr_acts a;
        tr_dacts d;
        tr_act_layout(&m->cfg, B, t, m->act_mem, &a);
        tr_dact_layout(&m->cfg, B, t, m->dact_mem, &d);
        const int32_t *tok = tokens + (size_t)b0 * t, *tgt = targets + (size_t)b0 * t;
        gpt_forward(m, &p, &a, tok, tgt, B, t);
        total += tr_sum_losses(a.losses, B * t);
        gpt_backward(m, &p, &g, &a, &d, tok, tgt, dloss, B, t);
    }
    m->have_grads = 1;
    *loss = total / ((float)n * (float)t);
    return TR_OK;
}

int tr_eval(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    int rc = tr_check_batch(m, tokens, targets, n, t);
    if (rc) return rc;
    if (!loss) return TR_EINVAL;
    tr_params p = tr_param_views(m->params, m->offsets);
    float total = 0.0f;
    for (int b0 = 0; b0 < n; b0 += m->cfg.micro_batch) {
        int B = n - b0 < m->cfg.micro_batch ? n - b0 : m->cfg.micro_batch;
        tr_acts a;
        tr_act_layout(&m->cfg, B, t, m->act_mem, &a);
        gpt_forward(m, &p, &a, tokens + (size_t)b0 * t, targets + (size_t)b0 * t, B, t);
        total += tr_sum_losses(a.losses, B * t);
    }
    *loss = total / ((float)n * (float)t);
    return TR_OK;
}

int tr_get_grads(const tr_model *m, float *out, size_t len) {
    if (!m || !out || len != m->num_params) return TR_EINVAL;
    if (!m->have_grads) return TR_ENOGRAD;
    memcpy(out, m->grads, sizeof(float) * len);
    return TR_OK;
}

int tr_get_params(const tr_model *m, float *out, size_t len) {
    if (!m || !out || len != m->num_params) return TR_EINVAL;
    memcpy(out, m->params, sizeof(float) * len);
    return TR_OK;
}

int tr_set_params(tr_model *m, const float *in, size_t len) {
    if (!m || !in || len != m->num_params) return TR_EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!(in[i] - in[i] == 0.0f)) return TR_EINVAL; // NaN or Inf
    memcpy(m->params, in, sizeof(float) * len);
    m->lookahead_on = 0;
    m->have_grads = 0;
    m->in_round = 0; // new weights end a SparseLoCo round
    return TR_OK;
}

int tr_num_tensors(const tr_model *m) { return m ? TR_NUM_TENSORS : 0; }

int tr_tensor_info(const tr_model *m, int i, const char **name, int *ndim, int shape[3], size_t *offset) {
    if (!m || i < 0 || i >= TR_NUM_TENSORS || !name || !ndim || !shape || !offset) return TR_EINVAL;
    *name = tr_param_name(i);
    *ndim = tr_param_shape(&m->cfg, i, shape);
    *offset = m->offsets[i];
    return TR_OK;
}

int tr_gemm(tr_model *m, int M, int N, int K, const float *a, const float *b, float *out) {
    if (!m || !a || !b || !out || M < 1 || N < 1 || K < 1) return TR_EINVAL;
    tr_gemm_args g = {M, N, K, a, K, b, K, out, N, NULL, 0};
    m->gemm(&g, m->nthreads);
    return TR_OK;
}

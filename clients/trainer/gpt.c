// gpt.c: a GPT-2 style decoder (token + position embeddings, pre-LayerNorm,
// causal multi-head attention, GELU MLP, tied lm-head) trained in fp32 on the
// CPU. Each layer's forward and backward sit side by side, llm.c style.
//
// Determinism: every output element is computed by one thread, and every sum
// runs in a fixed order that depends on neither the thread count nor the ISA
// (see gemm_kernel.h for the matmuls). Build flags are pinned in trainer.go.

#include "internal.h"

// The parameter and activation layouts (tr_params, tr_acts, tr_dacts and
// their views) are in layout.h, shared with the CUDA path. The arithmetic of
// each layer is in kernels.h and layers_isa.h; here it is spread over threads.

// ----------------------------------------------------------------------------
// Layers: forward and backward side by side.

// Contiguous ranges of [0, n) for static scheduling: task i of tasks.
#define TR_RANGE(i, tasks, n, lo, hi)                          \
    int lo = (int)((long long)(n) * (i) / (tasks)),            \
        hi = (int)((long long)(n) * ((i) + 1) / (tasks))

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

// Channels are split across threads; each element chains its positions in
// (b,t) order, on from the previous micro-batch.
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

// Tasks per row-parallel layer: rows in contiguous ranges, a few per thread.
static int tr_row_tasks(const tr_model *m, int rows) { return rows < 4 * m->nthreads ? rows : 4 * m->nthreads; }

// Column tasks: blocks of 64 columns (whole vectors at every ISA level).
#define TR_COL_BLOCK 64

// out(N,C) = (x - mean) * rstd * w + b per row.
static void layernorm_forward(const tr_model *m, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C) {
    int tasks = tr_row_tasks(m, N);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, N, r0, r1);
        m->layers->ln_forward(out, mean, rstd, inp, w, b, r0, r1, C);
    }
}

// dinp(N,C) += ..., dw(C) and db(C) chain over the rows in order.
static void layernorm_backward(const tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                               const float *w, const float *mean, const float *rstd, int N, int C) {
    int tasks = tr_row_tasks(m, N), cblocks = (C + TR_COL_BLOCK - 1) / TR_COL_BLOCK;
    #pragma omp parallel num_threads(m->nthreads)
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < tasks; i++) {
            TR_RANGE(i, tasks, N, r0, r1);
            m->layers->ln_backward(dinp, dout, inp, w, mean, rstd, r0, r1, C);
        }
        #pragma omp for schedule(static)
        for (int cb = 0; cb < cblocks; cb++) {
            int c1 = (cb + 1) * TR_COL_BLOCK < C ? (cb + 1) * TR_COL_BLOCK : C;
            m->layers->ln_dw(dw, db, dout, inp, mean, rstd, N, C, cb * TR_COL_BLOCK, c1);
        }
    }
}

// dst(cols, rows) = src(rows, cols)^T, in cache blocks.
// One tile of dst(cols, rows) = src(rows, cols)^T: rows [r0, r1), columns
// [c0, c1). Whole 8x8 blocks go through registers (eight row loads, a
// shuffle network, eight column stores); the edges are copied one by one.
// Pure data movement, so every ISA gives the same bits.
typedef float v8f __attribute__((vector_size(32)));
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
                for (int i = 0; i < 8; i++) memcpy(&x[i], src + (size_t)(r + i) * cols + c, sizeof x[i]); \
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

static void tr_matmul(const tr_model *m, const tr_gemm_args *g) { tr_gemm_run(g, m->isa, m->nthreads, m->pack_buf); }

// out(BT,OC) = inp(BT,C) * w(OC,C)^T + bias(OC)
static void matmul_forward(const tr_model *m, float *out, const float *inp, const float *w, const float *bias, int BT, int C, int OC) {
    tr_gemm_args g = {BT, OC, C, inp, C, w, C, out, OC, bias, 0, 0, 0};
    tr_matmul(m, &g);
}

// dinp(BT,C) = dout * w (overwritten); dw(OC,C) += dout^T * inp and
// dbias(OC) += column sums of dout, chains over the rows in order.
static void matmul_backward(tr_model *m, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                           const float *w, int BT, int C, int OC) {
    tr_gemm_args gi = {BT, C, OC, dout, OC, w, C, dinp, C, NULL, 0, 0, 1};
    tr_gemm_args gw = {OC, C, BT, dout, OC, inp, C, dw, C, NULL, 1, 1, 1};
    tr_matmul(m, &gi);
    tr_matmul(m, &gw);
    if (!dbias) return;
    int cblocks = (OC + TR_COL_BLOCK - 1) / TR_COL_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int cb = 0; cb < cblocks; cb++) {
        int o1 = (cb + 1) * TR_COL_BLOCK < OC ? (cb + 1) * TR_COL_BLOCK : OC;
        m->layers->bias_backward(dbias, dout, BT, OC, cb * TR_COL_BLOCK, o1);
    }
}

// Attention scratch per thread: the transposed keys (or values) and a row.
static size_t tr_attn_floats(const tr_config *c) { return ((size_t)c->channels / c->heads + 1) * c->seq_len; }

// Grows the per-thread scratch (GEMM packing, attention) to n threads.
int tr_thread_scratch(tr_model *m, int n) {
    if (n <= m->scratch_threads) return TR_OK;
    float *a = realloc(m->attn_buf, sizeof(float) * tr_attn_floats(&m->cfg) * (size_t)n);
    if (a) m->attn_buf = a;
    float *p = realloc(m->pack_buf, sizeof(float) * TR_GEMM_PACK * (size_t)n);
    if (p) m->pack_buf = p;
    if (!a || !p) return TR_ENOMEM;
    m->scratch_threads = n;
    return TR_OK;
}

// out(B,T,C) = causal softmax(q k^T / sqrt(hs)) v per head; att(B,NH,T,T) keeps the softmax.
static void attention_forward(const tr_model *m, float *out, float *att, const float *qkv, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            m->layers->attention_forward(out, att, qkv, m->attn_buf + (size_t)omp_get_thread_num() * tr_attn_floats(&m->cfg),
                                         b, h, T, C, NH);
}

// dqkv(B,T,3C) = gradient of attention_forward, per (b, h).
static void attention_backward(tr_model *m, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T) {
    int C = m->cfg.channels, NH = m->cfg.heads, hs = C / NH;
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * 3 * C);
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float *s = m->attn_buf + (size_t)omp_get_thread_num() * tr_attn_floats(&m->cfg);
            m->layers->attention_backward(dqkv, dout, qkv, att, s, s + (size_t)hs * m->cfg.seq_len, b, h, T, C, NH);
        }
}

// Elementwise work goes to threads in blocks, so the inner loops vectorise.
#define TR_EW_BLOCK 4096

static void gelu_forward(const tr_model *m, float *out, const float *x, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t len = n - b * TR_EW_BLOCK < TR_EW_BLOCK ? n - b * TR_EW_BLOCK : TR_EW_BLOCK;
        m->layers->gelu_forward(out + b * TR_EW_BLOCK, x + b * TR_EW_BLOCK, len);
    }
}

static void gelu_backward(const tr_model *m, float *dinp, const float *x, const float *dout, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t len = n - b * TR_EW_BLOCK < TR_EW_BLOCK ? n - b * TR_EW_BLOCK : TR_EW_BLOCK;
        m->layers->gelu_backward(dinp + b * TR_EW_BLOCK, x + b * TR_EW_BLOCK, dout + b * TR_EW_BLOCK, len);
    }
}

static void residual_forward(const tr_model *m, float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// probs(BT,Vp) = softmax over the first V logits; losses(BT) = -ln probs[target].
static void crossentropy_forward(const tr_model *m, float *probs, float *losses, const float *logits, const int32_t *targets, int BT) {
    int tasks = tr_row_tasks(m, BT);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, BT, r0, r1);
        m->layers->ce_forward(probs, losses, logits, targets, r0, r1, m->cfg.vocab, m->cfg.padded_vocab);
    }
}

// dlogits(BT,Vp) = (probs - onehot(target)) * dloss; zero on padded columns.
static void crossentropy_backward(const tr_model *m, float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT) {
    int tasks = tr_row_tasks(m, BT);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, BT, r0, r1);
        m->layers->ce_backward(dlogits, probs, targets, dloss, r0, r1, m->cfg.vocab, m->cfg.padded_vocab);
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
    encoder_backward(m, m->dwte_emb, g->wpe, d->dres, tok, B, T);
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
    m->nthreads = omp_get_num_procs();
    if (m->nthreads < 1) m->nthreads = 1;
    if (m->nthreads > TR_MAX_THREADS) m->nthreads = TR_MAX_THREADS;
    m->params = malloc(sizeof(float) * off);
    m->grads = calloc(off, sizeof(float));
    m->dwte_emb = malloc(sizeof(float) * m->sizes[TR_P_wte]);
    m->act_mem = malloc(sizeof(float) * tr_act_layout(cfg, B, (int)T, NULL, NULL));
    m->dact_mem = malloc(sizeof(float) * tr_dact_layout(cfg, B, (int)T, NULL, NULL));
    if (!m->params || !m->grads || !m->dwte_emb || !m->act_mem || !m->dact_mem || tr_thread_scratch(m, m->nthreads)) {
        tr_destroy(m);
        return TR_ENOMEM;
    }
    m->isa = tr_isa_pick(TR_ISA_AUTO);
    m->layers = tr_layers_for(m->isa);
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
    free(m->params); free(m->grads); free(m->dwte_emb); free(m->lookahead);
    free(m->adam_m); free(m->adam_v); free(m->delta);
    free(m->anchor); free(m->anchor_m); free(m->anchor_v);
    free(m->act_mem); free(m->dact_mem);
    free(m->attn_buf); free(m->pack_buf); free(m->demo_buf);
    for (int i = 0; i < 257; i++) free(m->dct[i]);
    free(m);
}

int tr_set_threads(tr_model *m, int n) {
    if (!m || n < 1 || n > TR_MAX_THREADS) return TR_EINVAL;
    if (tr_thread_scratch(m, n)) return TR_ENOMEM;
    m->nthreads = n;
    return TR_OK;
}

int tr_set_isa(tr_model *m, int isa) {
    if (!m || isa < TR_ISA_AUTO || isa > TR_ISA_AVX512) return TR_EINVAL;
    m->isa = tr_isa_pick(isa);
    m->layers = tr_layers_for(m->isa);
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

// wte's gradient is the lm-head's chain plus the embedding's chain, each over
// all tokens in order; kept apart until the end, so that micro-batches do not
// interleave them.
static void tr_add_embedding_grads(const tr_model *m, float *dwte) {
    size_t n = m->sizes[TR_P_wte];
    const float *e = m->dwte_emb;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) dwte[i] = dwte[i] + e[i];
}

// The loss is one chain over the tokens in order, across micro-batches.
static float tr_add_losses(float total, const float *losses, int BT) {
    for (int i = 0; i < BT; i++) total = total + losses[i];
    return total;
}

int tr_step(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    int rc = tr_check_batch(m, tokens, targets, n, t);
    if (rc) return rc;
    if (!loss) return TR_EINVAL;
    tr_params p = tr_param_views(tr_forward_weights(m), m->offsets);
    tr_params g = tr_param_views(m->grads, m->offsets);
    memset(m->grads, 0, sizeof(float) * m->num_params);
    memset(m->dwte_emb, 0, sizeof(float) * m->sizes[TR_P_wte]);
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
        total = tr_add_losses(total, a.losses, B * t);
        gpt_backward(m, &p, &g, &a, &d, tok, tgt, dloss, B, t);
    }
    tr_add_embedding_grads(m, g.wte);
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
        total = tr_add_losses(total, a.losses, B * t);
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

int tr_activations(const tr_model *m, float *out, size_t len) {
    if (!m || !out || len > tr_act_layout(&m->cfg, m->cfg.micro_batch, m->cfg.seq_len, NULL, NULL)) return TR_EINVAL;
    memcpy(out, m->act_mem, sizeof(float) * len);
    return TR_OK;
}

int tr_gemm(tr_model *m, int M, int N, int K, const float *a, const float *b, float *out) {
    if (!m || !a || !b || !out || M < 1 || N < 1 || K < 1) return TR_EINVAL;
    tr_gemm_args g = {M, N, K, a, K, b, K, out, N, NULL, 0, 0, 0};
    tr_matmul(m, &g);
    return TR_OK;
}

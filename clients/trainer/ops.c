// ops.c: the layers of both models spread over threads (the arithmetic is
// kernels.h's, in the loops of layers_isa.h for the model's ISA level), and
// the linear layers through gemm.c. Every output element is computed by one
// thread, so the thread count changes no bit.

#include "internal.h"

// Contiguous ranges of [0, n) for static scheduling: task i of tasks.
#define TR_RANGE(i, tasks, n, lo, hi)                          \
    int lo = (int)((long long)(n) * (i) / (tasks)),            \
        hi = (int)((long long)(n) * ((i) + 1) / (tasks))

// Tasks per row-parallel layer: rows in contiguous ranges, a few per thread.
static int tr_row_tasks(const tr_model *m, int rows) { return rows < 4 * m->nthreads ? rows : 4 * m->nthreads; }

// Column tasks: blocks of 64 columns (whole vectors at every ISA level).
#define TR_COL_BLOCK 64

// Elementwise work goes to threads in blocks, so the inner loops vectorise.
#define TR_EW_BLOCK 4096

// out(B,T,C) = wte[tok] + wpe[t] (wpe NULL: wte[tok])
void tr_encoder_forward(const tr_model *m, float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T) {
    int C = m->cfg.channels;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)tok[bt] * C;
        float *o = out + (size_t)bt * C;
        if (wpe) {
            const float *pe = wpe + (size_t)(bt % T) * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        } else {
            memcpy(o, we, sizeof(float) * C);
        }
    }
}

// Channels are split across threads; each element chains its positions in
// (b,t) order, on from the previous micro-batch. dwpe may be NULL.
void tr_encoder_backward(const tr_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B, int T) {
    int C = m->cfg.channels;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < C; i++) {
        for (int bt = 0; bt < B * T; bt++) {
            float d = dout[(size_t)bt * C + i];
            dwte[(size_t)tok[bt] * C + i] += d;
            if (dwpe) dwpe[(size_t)(bt % T) * C + i] += d;
        }
    }
}

void tr_layernorm_forward(const tr_model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C) {
    int tasks = tr_row_tasks(m, N);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, N, r0, r1);
        m->layers->ln_forward(out, mean, rstd, inp, w, b, r0, r1, C);
    }
}

void tr_layernorm_backward(const tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
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

void tr_rmsnorm_forward(const tr_model *m, float *out, float *rstd, const float *inp, const float *w, int N, int C) {
    int tasks = tr_row_tasks(m, N);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, N, r0, r1);
        m->layers->rms_forward(out, rstd, inp, w, r0, r1, C, tr_rms_eps(&m->cfg));
    }
}

void tr_rmsnorm_backward(const tr_model *m, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                         const float *rstd, int N, int C) {
    int tasks = tr_row_tasks(m, N), cblocks = (C + TR_COL_BLOCK - 1) / TR_COL_BLOCK;
    #pragma omp parallel num_threads(m->nthreads)
    {
        #pragma omp for schedule(static) nowait
        for (int i = 0; i < tasks; i++) {
            TR_RANGE(i, tasks, N, r0, r1);
            m->layers->rms_backward(dinp, dout, inp, w, rstd, r0, r1, C);
        }
        #pragma omp for schedule(static)
        for (int cb = 0; cb < cblocks; cb++) {
            int c1 = (cb + 1) * TR_COL_BLOCK < C ? (cb + 1) * TR_COL_BLOCK : C;
            m->layers->rms_dw(dw, dout, inp, rstd, N, C, cb * TR_COL_BLOCK, c1);
        }
    }
}

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
    int rb = (rows + TB - 1) / TB, cb = (cols + TB - 1) / TB, avx2 = m->isa >= TR_ISA_AVX2 && m->isa <= TR_ISA_AMX;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < rb; i++)
        for (int j = 0; j < cb; j++) {
            int r1 = (i + 1) * TB < rows ? (i + 1) * TB : rows, c1 = (j + 1) * TB < cols ? (j + 1) * TB : cols;
            if (avx2) tr_transpose_avx2(dst, src, rows, cols, i * TB, r1, j * TB, c1);
            else tr_transpose_base(dst, src, rows, cols, i * TB, r1, j * TB, c1);
        }
}


// A matrix product of the model in its numeric contract, on nthreads;
// mx8 blocks restart every kseg along K.
void tr_matmul(const tr_model *m, const tr_gemm_args *g, int kseg, int nthreads) {
    if (m->cfg.arith != TR_ARITH_MX8) {
        tr_gemm_run(g, m->isa, nthreads, m->pack_buf);
        return;
    }
    if (tr_mx_gemm_run(g, kseg, m->isa, nthreads, m->mx_scratch, m->mx_scratch_bytes) == TR_OK) return;
    // The scratch holds every GEMM of the model (tr_mx_operand_codes): this
    // is a bug, which NaN outputs make visible.
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) g->out[(size_t)i * g->ldo + j] = tr_bits2f(0x7fc00000u);
}

// out(BT, OC; row stride ldo) = inp(BT, IC; ldi) w(OC, IC)^T + bias(OC)
void tr_linear_forward(const tr_model *m, float *out, int ldo, const float *inp, int ldi, const float *w,
                       const float *bias, int BT, int IC, int OC) {
    tr_gemm_args g = {BT, OC, IC, inp, ldi, w, IC, out, ldo, bias, 0, 0, 0};
    tr_matmul(m, &g, IC, m->nthreads);
}

// dinp(BT, IC) = dout w (accumulate: chains on from dinp's values), dw(OC, IC)
// += dout^T inp and dbias(OC) += column sums of dout (ldd: its row stride),
// chains over the rows in order. The rows are sequences of T tokens: mx8
// blocks of dw's K (the tokens) stay within a sequence, and dinp takes its
// slices (TR_MX_DINP_SLICES).
void tr_linear_backward(const tr_model *m, float *dinp, int accumulate, float *dw, float *dbias, const float *dout, int ldd,
                        const float *inp, int ldi, const float *w, int BT, int T, int IC, int OC) {
    tr_gemm_args gi = {BT, IC, OC, dout, ldd, w, IC, dinp, IC, NULL, accumulate, 0, 1, TR_MX_DINP_SLICES};
    tr_gemm_args gw = {OC, IC, BT, dout, ldd, inp, ldi, dw, IC, NULL, 1, 1, 1};
    tr_matmul(m, &gi, OC, m->nthreads);
    tr_matmul(m, &gw, T, m->nthreads);
    if (!dbias) return;
    int cblocks = (OC + TR_COL_BLOCK - 1) / TR_COL_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int cb = 0; cb < cblocks; cb++) {
        int o1 = (cb + 1) * TR_COL_BLOCK < OC ? (cb + 1) * TR_COL_BLOCK : OC;
        m->layers->bias_backward(dbias, dout, ldd, BT, cb * TR_COL_BLOCK, o1);
    }
}

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

// out(B,T,C) = causal softmax(q k^T / sqrt(hs)) v per head, KV key heads;
// att(B,NH,T,T) keeps the softmax.
void tr_attention_forward(const tr_model *m, float *out, float *att, const float *qkv, int B, int T, int KV) {
    int C = m->cfg.channels, NH = m->cfg.heads;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            m->layers->attention_forward(out, att, qkv, m->attn_buf + (size_t)omp_get_thread_num() * tr_attn_floats(&m->cfg),
                                         b, h, T, C, NH, KV);
}

// dqkv = gradient of tr_attention_forward, per (sequence, key head): a key
// head's dk and dv chain over its query heads.
void tr_attention_backward(const tr_model *m, float *dqkv, const float *dout, const float *qkv, const float *att, int B,
                           int T, int KV) {
    int C = m->cfg.channels, NH = m->cfg.heads, hs = C / NH;
    memset(dqkv, 0, sizeof(float) * (size_t)B * T * ((size_t)C + 2 * (size_t)KV * hs));
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            float *s = m->attn_buf + (size_t)omp_get_thread_num() * tr_attn_floats(&m->cfg);
            m->layers->attention_backward(dqkv, dout, qkv, att, s, s + (size_t)hs * m->cfg.seq_len, b, kvh, T, C, NH, KV);
        }
}

// Rotates (back: un-rotates) the q and k heads of the N rows of qkv.
void tr_rope(const tr_model *m, float *qkv, int N, int T, int KV, int back) {
    int tasks = tr_row_tasks(m, N);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, N, r0, r1);
        m->layers->rope(qkv, m->rope_cos, m->rope_sin, r0, r1, T, m->cfg.channels, m->cfg.heads, KV, back);
    }
}

void tr_gelu_forward(const tr_model *m, float *out, const float *x, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * TR_EW_BLOCK, len = n - o < TR_EW_BLOCK ? n - o : TR_EW_BLOCK;
        m->layers->gelu_forward(out + o, x + o, len);
    }
}

void tr_gelu_backward(const tr_model *m, float *dinp, const float *x, const float *dout, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * TR_EW_BLOCK, len = n - o < TR_EW_BLOCK ? n - o : TR_EW_BLOCK;
        m->layers->gelu_backward(dinp + o, x + o, dout + o, len);
    }
}

void tr_swiglu_forward(const tr_model *m, float *out, const float *g, const float *u, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * TR_EW_BLOCK, len = n - o < TR_EW_BLOCK ? n - o : TR_EW_BLOCK;
        m->layers->swiglu_forward(out + o, g + o, u + o, len);
    }
}

void tr_swiglu_backward(const tr_model *m, float *dg, float *du, const float *g, const float *u, const float *dh, size_t n) {
    size_t nb = (n + TR_EW_BLOCK - 1) / TR_EW_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t o = b * TR_EW_BLOCK, len = n - o < TR_EW_BLOCK ? n - o : TR_EW_BLOCK;
        m->layers->swiglu_backward(dg + o, du + o, g + o, u + o, dh + o, len);
    }
}

void tr_residual_forward(const tr_model *m, float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// probs(BT,Vp) = softmax over the first V logits; losses(BT) = -ln probs[target].
void tr_crossentropy_forward(const tr_model *m, float *probs, float *losses, const float *logits, const int32_t *targets, int BT) {
    int tasks = tr_row_tasks(m, BT);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, BT, r0, r1);
        m->layers->ce_forward(probs, losses, logits, targets, r0, r1, m->cfg.vocab, m->cfg.padded_vocab);
    }
}

// dlogits(BT,Vp) = (probs - onehot(target)) * dloss; zero on padded columns.
void tr_crossentropy_backward(const tr_model *m, float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT) {
    int tasks = tr_row_tasks(m, BT);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (int i = 0; i < tasks; i++) {
        TR_RANGE(i, tasks, BT, r0, r1);
        m->layers->ce_backward(dlogits, probs, targets, dloss, r0, r1, m->cfg.vocab, m->cfg.padded_vocab);
    }
}

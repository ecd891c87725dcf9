// layers_isa.h: the CPU layers, included by layers.c once per ISA level
// (TRL names the copy). Each function does one range of rows, columns or
// one (sequence, head) pair, so gpt.c spreads the work over threads; every
// element's arithmetic is kernels.h's, in the loop order that vectorises on
// a CPU. cuda/model.cu runs the same arithmetic per GPU thread, and the
// emulator test (cuda/emu) checks that the two orders give the same bits.

static void TRL(ln_forward)(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                            int r0, int r1, int C) {
    for (int r = r0; r < r1; r++)
        trk_layernorm_row(out + (size_t)r * C, mean + r, rstd + r, inp + (size_t)r * C, w, b, C);
}

static void TRL(ln_backward)(float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
                             const float *rstd, int r0, int r1, int C) {
    for (int r = r0; r < r1; r++)
        trk_layernorm_back_row(dinp + (size_t)r * C, dout + (size_t)r * C, inp + (size_t)r * C, w, mean[r], rstd[r], C);
}

// dw, db columns [c0, c1): one chain per column over the N rows, in order.
static void TRL(ln_dw)(float *restrict dw, float *restrict db, const float *restrict dout, const float *restrict inp,
                       const float *mean, const float *rstd, int N, int C, int c0, int c1) {
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        float mu = mean[r], rs = rstd[r];
        for (int c = c0; c < c1; c++) trk_layernorm_dw_step(dw + c, db + c, x[c], mu, rs, dy[c]);
    }
}

// dbias columns [o0, o1) += column sums of dout(BT, ld), one chain per column.
static void TRL(bias_backward)(float *restrict dbias, const float *restrict dout, int ld, int BT, int o0, int o1) {
    for (int r = 0; r < BT; r++) {
        const float *row = dout + (size_t)r * ld;
        for (int o = o0; o < o1; o++) dbias[o] = dbias[o] + row[o];
    }
}

static void TRL(gelu_forward)(float *restrict out, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = trk_gelu(x[i]);
}

static void TRL(gelu_backward)(float *restrict dinp, const float *restrict x, const float *restrict dout, size_t n) {
    for (size_t i = 0; i < n; i++) dinp[i] = trk_gelu_back(x[i], dout[i]);
}

// Attention of sequence b, head h, every query t (trk_attention_row's
// chains): scores run over the keys transposed into kt (hs, T), so that the
// chains of all keys advance together. Queries go 4 at a time with their
// chains in registers (2 vectors each), so one load of a key or value row
// serves all 4: their scores for the keys up to the block's last query (a
// query's scores past its own t are junk that the softmax overwrites with
// zeros), and their weighted sums over the values up to the block's first
// query. Each query then runs the rest of its chains alone, in order.
#define TRL_QB 4
#define TRL_ROWS(X) X(0) X(1) X(2) X(3)
#define TRL_ZERO2(r) trl_v c##r##0 = trl_set1(0.0f), c##r##1 = c##r##0;
#define TRL_FMA2(r, x)                         \
    {                                          \
        trl_v w = trl_set1(x);                 \
        c##r##0 = trl_fma(w, v0, c##r##0);     \
        c##r##1 = trl_fma(w, v1, c##r##1);     \
    }
#define TRL_STORE2(r, p) trl_store(p, c##r##0); trl_store((p) + TRL_VL, c##r##1);
static void TRL(attention_forward)(float *out, float *att, const float *qkv, float *restrict kt, int b, int h, int T,
                                   int C, int NH, int KV) {
    trk_heads o = trk_head_offsets(h, C, NH, KV);
    int hs = o.hs;
    float scale = 1.0f / trk_sqrt((float)hs);
    const float *seq = qkv + (size_t)b * T * o.stride;
    for (int t2 = 0; t2 < T; t2++)
        for (int i = 0; i < hs; i++) kt[(size_t)i * T + t2] = seq[(size_t)t2 * o.stride + o.k + i];
    for (int t0 = 0; t0 < T; t0 += TRL_QB) {
        int nq = T - t0 < TRL_QB ? T - t0 : TRL_QB, kd = 0, vd = 0;
        float *ab = att + (((size_t)b * NH + h) * T + t0) * T;
        const float *qb = seq + (size_t)t0 * o.stride + o.q;
        if (nq == TRL_QB)
            for (; kd + 2 * TRL_VL <= t0 + TRL_QB; kd += 2 * TRL_VL) {
                TRL_ROWS(TRL_ZERO2)
                for (int i = 0; i < hs; i++) {
                    const float *row = kt + (size_t)i * T + kd;
                    trl_v v0 = trl_load(row), v1 = trl_load(row + TRL_VL);
#define TRL_SCORE(r) TRL_FMA2(r, qb[(size_t)(r) * o.stride + i])
                    TRL_ROWS(TRL_SCORE)
#undef TRL_SCORE
                }
#define TRL_SCORE_STORE(r) TRL_STORE2(r, ab + (size_t)(r) * T + kd)
                TRL_ROWS(TRL_SCORE_STORE)
#undef TRL_SCORE_STORE
            }
        for (int r = 0; r < nq; r++) {
            int t = t0 + r;
            const float *q = qb + (size_t)r * o.stride;
            float *restrict a = ab + (size_t)r * T;
            for (int t2 = kd; t2 <= t; t2++) a[t2] = 0.0f;
            for (int i = 0; i < hs; i++) {
                float qi = q[i];
                const float *restrict row = kt + (size_t)i * T;
                for (int t2 = kd; t2 <= t; t2++) a[t2] = trk_fma(qi, row[t2], a[t2]);
            }
            for (int t2 = 0; t2 <= t; t2++) a[t2] = a[t2] * scale;
            trk_softmax_causal(a, t, T);
        }
        float *yb = out + ((size_t)b * T + t0) * C + o.q;
        if (nq == TRL_QB && hs % (2 * TRL_VL) == 0) {
            vd = t0 + 1; // the values every query of the block weighs
            for (int i0 = 0; i0 < hs; i0 += 2 * TRL_VL) {
                TRL_ROWS(TRL_ZERO2)
                for (int t2 = 0; t2 < vd; t2++) {
                    const float *v = seq + (size_t)t2 * o.stride + o.v + i0;
                    trl_v v0 = trl_load(v), v1 = trl_load(v + TRL_VL);
#define TRL_WSUM(r) TRL_FMA2(r, ab[(size_t)(r) * T + t2])
                    TRL_ROWS(TRL_WSUM)
#undef TRL_WSUM
                }
#define TRL_WSUM_STORE(r) TRL_STORE2(r, yb + (size_t)(r) * C + i0)
                TRL_ROWS(TRL_WSUM_STORE)
#undef TRL_WSUM_STORE
            }
        }
        for (int r = 0; r < nq; r++) {
            const float *restrict a = ab + (size_t)r * T;
            float *restrict y = yb + (size_t)r * C;
            if (vd == 0)
                for (int i = 0; i < hs; i++) y[i] = 0.0f;
            for (int t2 = vd; t2 <= t0 + r; t2++) {
                const float *restrict v = seq + (size_t)t2 * o.stride + o.v;
                float w = a[t2];
                for (int i = 0; i < hs; i++) y[i] = trk_fma(w, v[i], y[i]);
            }
        }
    }
}

// Gradient of attention_forward for sequence b and key head kvh into dqkv
// (zeroed by the caller): for each query head of the group in order,
// the chains of kernels.h (after trk_attention_row) for datt, dpre and dq, while dk and dv
// chain over the heads in order and within a head over the queries t in
// order. vt (hs, T) and dp (4 rows of T): scratch. Queries go 4 at a time
// as in attention_forward: datt over the values up to the block's last
// query, dq over the keys up to its first, and dk, dv of the keys up to its
// first taking the four queries' terms in order; each query then runs the
// rest of its chains alone (dk and dv of the block's own keys in query
// order), so every chain keeps its order.
#define TRL_FMA1(r, x, v, c) c##r = trl_fma(trl_set1(x), v, c##r);
static void TRL(attention_backward)(float *dqkv, const float *dout, const float *qkv, const float *att,
                                    float *restrict vt, float *restrict dpb, int b, int kvh, int T, int C, int NH, int KV) {
    int group = NH / KV;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        trk_heads o = trk_head_offsets(h, C, NH, KV);
        int hs = o.hs;
        float scale = 1.0f / trk_sqrt((float)hs);
        const float *seq = qkv + (size_t)b * T * o.stride;
        float *dseq = dqkv + (size_t)b * T * o.stride;
        for (int t2 = 0; t2 < T; t2++)
            for (int i = 0; i < hs; i++) vt[(size_t)i * T + t2] = seq[(size_t)t2 * o.stride + o.v + i];
        for (int t0 = 0; t0 < T; t0 += TRL_QB) {
            int nq = T - t0 < TRL_QB ? T - t0 : TRL_QB, pd = 0, kd = 0;
            const float *ab = att + (((size_t)b * NH + h) * T + t0) * T;
            const float *dyb = dout + ((size_t)b * T + t0) * C + o.q, *qb = seq + (size_t)t0 * o.stride + o.q;
            float *dqb = dseq + (size_t)t0 * o.stride + o.q;
            if (nq == TRL_QB)
                for (; pd + 2 * TRL_VL <= t0 + TRL_QB; pd += 2 * TRL_VL) {
                    TRL_ROWS(TRL_ZERO2)
                    for (int i = 0; i < hs; i++) {
                        const float *row = vt + (size_t)i * T + pd;
                        trl_v v0 = trl_load(row), v1 = trl_load(row + TRL_VL);
#define TRL_DATT(r) TRL_FMA2(r, dyb[(size_t)(r) * C + i])
                        TRL_ROWS(TRL_DATT)
#undef TRL_DATT
                    }
#define TRL_DATT_STORE(r) TRL_STORE2(r, dpb + (size_t)(r) * T + pd)
                    TRL_ROWS(TRL_DATT_STORE)
#undef TRL_DATT_STORE
                }
            for (int r = 0; r < nq; r++) {
                int t = t0 + r;
                const float *a = ab + (size_t)r * T, *dy = dyb + (size_t)r * C;
                float *restrict dp = dpb + (size_t)r * T;
                for (int t2 = pd; t2 <= t; t2++) dp[t2] = 0.0f;
                for (int i = 0; i < hs; i++) {
                    float dyi = dy[i];
                    const float *restrict row = vt + (size_t)i * T;
                    for (int t2 = pd; t2 <= t; t2++) dp[t2] = trk_fma(dyi, row[t2], dp[t2]);
                }
                float s = trk_sum_products(a, dp, t + 1);
                for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (dp[t2] - s) * scale;
            }
            if (nq == TRL_QB && hs % (2 * TRL_VL) == 0) {
                kd = t0 + 1; // the keys every query of the block reaches
                for (int i0 = 0; i0 < hs; i0 += 2 * TRL_VL) {
#define TRL_DQ_LOAD(r) trl_v c##r##0 = trl_load(dqb + (size_t)(r) * o.stride + i0), c##r##1 = trl_load(dqb + (size_t)(r) * o.stride + i0 + TRL_VL);
                    TRL_ROWS(TRL_DQ_LOAD)
#undef TRL_DQ_LOAD
                    for (int t2 = 0; t2 < kd; t2++) {
                        const float *k = seq + (size_t)t2 * o.stride + o.k + i0;
                        trl_v v0 = trl_load(k), v1 = trl_load(k + TRL_VL);
#define TRL_DQ(r) TRL_FMA2(r, dpb[(size_t)(r) * T + t2])
                        TRL_ROWS(TRL_DQ)
#undef TRL_DQ
                    }
#define TRL_DQ_STORE(r) TRL_STORE2(r, dqb + (size_t)(r) * o.stride + i0)
                    TRL_ROWS(TRL_DQ_STORE)
#undef TRL_DQ_STORE
                }
                for (int i0 = 0; i0 < hs; i0 += TRL_VL) {
#define TRL_QDY_LOAD(r) trl_v q##r = trl_load(qb + (size_t)(r) * o.stride + i0), y##r = trl_load(dyb + (size_t)(r) * C + i0);
                    TRL_ROWS(TRL_QDY_LOAD)
#undef TRL_QDY_LOAD
                    for (int t2 = 0; t2 < kd; t2++) {
                        float *dk = dseq + (size_t)t2 * o.stride + o.k + i0, *dv = dseq + (size_t)t2 * o.stride + o.v + i0;
                        trl_v ck = trl_load(dk), cv = trl_load(dv);
#define TRL_DKV(r)                                                          \
                        ck = trl_fma(trl_set1(dpb[(size_t)(r) * T + t2]), q##r, ck); \
                        cv = trl_fma(trl_set1(ab[(size_t)(r) * T + t2]), y##r, cv);
                        TRL_ROWS(TRL_DKV)
#undef TRL_DKV
                        trl_store(dk, ck);
                        trl_store(dv, cv);
                    }
                }
            }
            for (int r = 0; r < nq; r++) {
                int t = t0 + r;
                const float *a = ab + (size_t)r * T, *dy = dyb + (size_t)r * C, *q = qb + (size_t)r * o.stride;
                const float *dp = dpb + (size_t)r * T;
                float *restrict dq = dqb + (size_t)r * o.stride;
                for (int t2 = kd; t2 <= t; t2++) {
                    const float *restrict k = seq + (size_t)t2 * o.stride + o.k;
                    float g = dp[t2];
                    for (int i = 0; i < hs; i++) dq[i] = trk_fma(g, k[i], dq[i]);
                }
                for (int t2 = kd; t2 <= t; t2++) {
                    float *restrict dk = dseq + (size_t)t2 * o.stride + o.k, *restrict dv = dseq + (size_t)t2 * o.stride + o.v;
                    float g = dp[t2], w = a[t2];
                    for (int i = 0; i < hs; i++) {
                        dk[i] = trk_fma(g, q[i], dk[i]);
                        dv[i] = trk_fma(w, dy[i], dv[i]);
                    }
                }
            }
        }
    }
}

static void TRL(rms_forward)(float *out, float *rstd, const float *inp, const float *w, int r0, int r1, int C, float eps) {
    for (int r = r0; r < r1; r++) trk_rmsnorm_row(out + (size_t)r * C, rstd + r, inp + (size_t)r * C, w, C, eps);
}

static void TRL(rms_backward)(float *dinp, const float *dout, const float *inp, const float *w, const float *rstd,
                              int r0, int r1, int C) {
    for (int r = r0; r < r1; r++)
        trk_rmsnorm_back_row(dinp + (size_t)r * C, dout + (size_t)r * C, inp + (size_t)r * C, w, rstd[r], C);
}

// dw columns [c0, c1): one chain per column over the N rows, in order.
static void TRL(rms_dw)(float *restrict dw, const float *restrict dout, const float *restrict inp, const float *rstd,
                        int N, int C, int c0, int c1) {
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        float rs = rstd[r];
        for (int c = c0; c < c1; c++) trk_rmsnorm_dw_step(dw + c, x[c], rs, dy[c]);
    }
}

// Rotates (back: un-rotates) the q and k heads of rows [r0, r1) of qkv
// (QKVD wide; a row's position is r % T).
static void TRL(rope)(float *qkv, const float *cosv, const float *sinv, int r0, int r1, int T, int C, int NH, int KV,
                      int back) {
    int hs = C / NH, half = hs / 2;
    size_t stride = (size_t)C + 2 * (size_t)KV * hs;
    for (int r = r0; r < r1; r++) {
        const float *cs = cosv + (size_t)(r % T) * half, *sn = sinv + (size_t)(r % T) * half;
        float *row = qkv + (size_t)r * stride;
        for (int h = 0; h < NH + KV; h++) {
            if (back) trk_rope_back(row + (size_t)h * hs, cs, sn, hs);
            else trk_rope(row + (size_t)h * hs, cs, sn, hs);
        }
    }
}

static void TRL(swiglu_forward)(float *restrict out, const float *restrict g, const float *restrict u, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = trk_swiglu(g[i], u[i]);
}

static void TRL(swiglu_backward)(float *restrict dg, float *restrict du, const float *restrict g, const float *restrict u,
                                 const float *restrict dh, size_t n) {
    for (size_t i = 0; i < n; i++) trk_swiglu_back(g[i], u[i], dh[i], dg + i, du + i);
}

static void TRL(ce_forward)(float *probs, float *losses, const float *logits, const int32_t *targets, int r0, int r1,
                            int V, int Vp) {
    for (int r = r0; r < r1; r++)
        losses[r] = trk_crossentropy_row(probs + (size_t)r * Vp, logits + (size_t)r * Vp, targets[r], V, Vp);
}

static void TRL(ce_backward)(float *dlogits, const float *probs, const int32_t *targets, float dloss, int r0, int r1,
                             int V, int Vp) {
    for (int r = r0; r < r1; r++) {
        const float *restrict p = probs + (size_t)r * Vp;
        float *restrict d = dlogits + (size_t)r * Vp, dl = trk_target_dloss(targets[r], dloss);
        for (int i = 0; i < V; i++) d[i] = trk_dlogit(p[i], i == targets[r], dl);
        for (int i = V; i < Vp; i++) d[i] = 0.0f;
    }
}

static const tr_layers TRL(layers) = {
    TRL(ln_forward), TRL(ln_backward), TRL(ln_dw), TRL(bias_backward), TRL(gelu_forward), TRL(gelu_backward),
    TRL(attention_forward), TRL(attention_backward), TRL(ce_forward), TRL(ce_backward),
    TRL(rms_forward), TRL(rms_backward), TRL(rms_dw), TRL(rope), TRL(swiglu_forward), TRL(swiglu_backward),
};

// layers_isa.h: the CPU layers, included by layers.c once per ISA level
// (TRL names the copy). Each function does one range of rows, columns or
// one (sequence, head) pair, so gpt.c spreads the work over threads; every
// element's arithmetic is kernels.h's, in the loop order that vectorises on
// a CPU. cuda/gpt.cu runs the same arithmetic per GPU thread, and the
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

// dbias columns [o0, o1) += column sums of dout(BT, OC), one chain per column.
static void TRL(bias_backward)(float *restrict dbias, const float *restrict dout, int BT, int OC, int o0, int o1) {
    for (int r = 0; r < BT; r++) {
        const float *row = dout + (size_t)r * OC;
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
// chains of all keys advance together.
static void TRL(attention_forward)(float *out, float *att, const float *qkv, float *restrict kt, int b, int h, int T,
                                   int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / trk_sqrt((float)hs);
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    for (int t2 = 0; t2 < T; t2++)
        for (int i = 0; i < hs; i++) kt[(size_t)i * T + t2] = base[(size_t)t2 * C3 + C + i];
    for (int t = 0; t < T; t++) {
        const float *q = base + (size_t)t * C3;
        float *restrict a = att + (((size_t)b * NH + h) * T + t) * T;
        for (int t2 = 0; t2 <= t; t2++) a[t2] = 0.0f;
        for (int i = 0; i < hs; i++) {
            float qi = q[i];
            const float *restrict row = kt + (size_t)i * T;
            for (int t2 = 0; t2 <= t; t2++) a[t2] = trk_fma(qi, row[t2], a[t2]);
        }
        for (int t2 = 0; t2 <= t; t2++) a[t2] = a[t2] * scale;
        trk_softmax_causal(a, t, T);
        float *restrict o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *restrict v = base + (size_t)t2 * C3 + 2 * C;
            float w = a[t2];
            for (int i = 0; i < hs; i++) o[i] = trk_fma(w, v[i], o[i]);
        }
    }
}

// Gradient of attention_forward for sequence b, head h into dqkv (zeroed by
// the caller): trk_attention_back_row's chains for datt, dpre and dq; dk and
// dv chain over the queries t in order. vt (hs, T) and dp (T): scratch.
static void TRL(attention_backward)(float *dqkv, const float *dout, const float *qkv, const float *att,
                                    float *restrict vt, float *restrict dp, int b, int h, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / trk_sqrt((float)hs);
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    float *dbase = dqkv + (size_t)b * T * C3 + (size_t)h * hs;
    for (int t2 = 0; t2 < T; t2++)
        for (int i = 0; i < hs; i++) vt[(size_t)i * T + t2] = base[(size_t)t2 * C3 + 2 * C + i];
    for (int t = 0; t < T; t++) {
        const float *a = att + (((size_t)b * NH + h) * T + t) * T;
        const float *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
        const float *q = base + (size_t)t * C3;
        for (int t2 = 0; t2 <= t; t2++) dp[t2] = 0.0f;
        for (int i = 0; i < hs; i++) {
            float dyi = dy[i];
            const float *restrict row = vt + (size_t)i * T;
            for (int t2 = 0; t2 <= t; t2++) dp[t2] = trk_fma(dyi, row[t2], dp[t2]);
        }
        float s = trk_sum_products(a, dp, t + 1);
        for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (dp[t2] - s) * scale;
        float *restrict dq = dbase + (size_t)t * C3;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *restrict k = base + (size_t)t2 * C3 + C;
            float g = dp[t2];
            for (int i = 0; i < hs; i++) dq[i] = trk_fma(g, k[i], dq[i]);
        }
        for (int t2 = 0; t2 <= t; t2++) {
            float *restrict dk = dbase + (size_t)t2 * C3 + C, *restrict dv = dbase + (size_t)t2 * C3 + 2 * C;
            float g = dp[t2], w = a[t2];
            for (int i = 0; i < hs; i++) {
                dk[i] = trk_fma(g, q[i], dk[i]);
                dv[i] = trk_fma(w, dy[i], dv[i]);
            }
        }
    }
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
        float *restrict d = dlogits + (size_t)r * Vp;
        for (int i = 0; i < V; i++) d[i] = trk_dlogit(p[i], i == targets[r], dloss);
        for (int i = V; i < Vp; i++) d[i] = 0.0f;
    }
}

static const tr_layers TRL(layers) = {
    TRL(ln_forward), TRL(ln_backward), TRL(ln_dw), TRL(bias_backward), TRL(gelu_forward), TRL(gelu_backward),
    TRL(attention_forward), TRL(attention_backward), TRL(ce_forward), TRL(ce_backward),
};

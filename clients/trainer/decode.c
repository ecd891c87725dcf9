// decode.c: one token at a time with a key/value cache, for text generation.
// Each layer keeps the qkv rows (q and k rotated on a Llama) of the positions
// so far; a new token's row is appended and its query attends to the rows
// before it. The arithmetic is the forward pass's (kernels.h, gemm.c), so
// the logits of position p equal row p of tr_logits over the same prefix,
// bit for bit (decode_test.go).

#include "internal.h"

static int tr_decode_alloc(tr_model *m) {
    if (m->kv_cache) return TR_OK;
    const tr_config *c = &m->cfg;
    size_t QKVD = (size_t)c->channels + 2 * (size_t)tr_kv_dim(c), H = tr_is_llama(c) ? (size_t)c->hidden : 4 * (size_t)c->channels;
    size_t work = 4 * (size_t)c->channels + 2 * H + (size_t)c->seq_len + (size_t)c->padded_vocab;
    m->kv_cache = malloc(sizeof(float) * (size_t)c->layers * c->seq_len * QKVD);
    m->decode_buf = malloc(sizeof(float) * work);
    if (!m->kv_cache || !m->decode_buf) {
        free(m->kv_cache); free(m->decode_buf);
        m->kv_cache = m->decode_buf = NULL;
        return TR_ENOMEM;
    }
    return TR_OK;
}

int tr_decode_reset(tr_model *m) {
    if (!m) return TR_EINVAL;
    int rc = tr_cpu_ready(m);
    if (rc == TR_OK) rc = tr_decode_alloc(m);
    if (rc) return rc;
    m->decode_pos = 0;
    return TR_OK;
}

// out(1, OC) = x(1, IC) w(OC, IC)^T + bias, the forward pass's GEMM chains.
static void tr_decode_linear(tr_model *m, float *out, const float *x, const float *w, const float *bias, int IC, int OC) {
    tr_gemm_args g = {1, OC, IC, x, IC, w, IC, out, OC, bias, 0, 0, 0};
    tr_matmul(m, &g, IC, 1);
}

int tr_decode_next(tr_model *m, int32_t token, float *logits) {
    if (!m || !logits || !m->kv_cache) return TR_EINVAL;
    const tr_config *c = &m->cfg;
    if (token < 0 || token >= c->vocab || m->decode_pos >= c->seq_len) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_PARAMS);
    if (rc) return rc;
    int llama = tr_is_llama(c), L = c->layers, C = c->channels, NH = c->heads, T = c->seq_len, p = m->decode_pos;
    int KV = llama ? c->kv_heads : NH, hs = C / NH, KVD = tr_kv_dim(c), QKVD = C + 2 * KVD;
    int H = llama ? c->hidden : 4 * C;
    float *x = m->decode_buf, *n = x + C, *y = n + C, *t1 = y + C, *h1 = t1 + C, *h2 = h1 + H, *arow = h2 + H,
          *full = arow + T;
    float mean, rstd;
    const float *w = m->params;
    const size_t *off = m->offsets;
    memcpy(x, w + off[0] + (size_t)token * C, sizeof(float) * C);
    if (!llama) {
        const float *pe = w + off[TR_P_wpe] + (size_t)p * C;
        for (int i = 0; i < C; i++) x[i] = x[i] + pe[i];
    }
    for (int l = 0; l < L; l++) {
        float *cache = m->kv_cache + (size_t)l * T * QKVD, *row = cache + (size_t)p * QKVD;
        if (llama) {
            tr_llama_params q = tr_llama_views(c, m->params, off);
            trk_rmsnorm_row(n, &rstd, x, q.rms1w + (size_t)l * C, C, tr_rms_eps(c));
            tr_decode_linear(m, row, n, q.wq + (size_t)l * C * C, TR_LAYER(q.bq, l, C), C, C);
            tr_decode_linear(m, row + C, n, q.wk + (size_t)l * KVD * C, TR_LAYER(q.bk, l, KVD), C, KVD);
            tr_decode_linear(m, row + C + KVD, n, q.wv + (size_t)l * KVD * C, TR_LAYER(q.bv, l, KVD), C, KVD);
            const float *cs = m->rope_cos + (size_t)p * (hs / 2), *sn = m->rope_sin + (size_t)p * (hs / 2);
            for (int h = 0; h < NH + KV; h++) trk_rope(row + (size_t)h * hs, cs, sn, hs);
            for (int h = 0; h < NH; h++) trk_attention_row(y + (size_t)h * hs, arow, cache, 0, p, h, T, C, NH, KV);
            tr_decode_linear(m, t1, y, q.wo + (size_t)l * C * C, NULL, C, C);
            for (int i = 0; i < C; i++) x[i] = x[i] + t1[i];
            trk_rmsnorm_row(n, &rstd, x, q.rms2w + (size_t)l * C, C, tr_rms_eps(c));
            tr_decode_linear(m, h1, n, q.wgate + (size_t)l * H * C, NULL, C, H);
            tr_decode_linear(m, h2, n, q.wup + (size_t)l * H * C, NULL, C, H);
            for (int i = 0; i < H; i++) h1[i] = trk_swiglu(h1[i], h2[i]);
            tr_decode_linear(m, t1, h1, q.wdown + (size_t)l * C * H, NULL, H, C);
        } else {
            tr_params q = tr_param_views(m->params, off);
            trk_layernorm_row(n, &mean, &rstd, x, q.ln1w + (size_t)l * C, q.ln1b + (size_t)l * C, C);
            tr_decode_linear(m, row, n, q.qkvw + (size_t)l * 3 * C * C, q.qkvb + (size_t)l * 3 * C, C, 3 * C);
            for (int h = 0; h < NH; h++) trk_attention_row(y + (size_t)h * hs, arow, cache, 0, p, h, T, C, NH, NH);
            tr_decode_linear(m, t1, y, q.attprojw + (size_t)l * C * C, q.attprojb + (size_t)l * C, C, C);
            for (int i = 0; i < C; i++) x[i] = x[i] + t1[i];
            trk_layernorm_row(n, &mean, &rstd, x, q.ln2w + (size_t)l * C, q.ln2b + (size_t)l * C, C);
            tr_decode_linear(m, h1, n, q.fcw + (size_t)l * H * C, q.fcb + (size_t)l * H, C, H);
            for (int i = 0; i < H; i++) h1[i] = trk_gelu(h1[i]);
            tr_decode_linear(m, t1, h1, q.fcprojw + (size_t)l * C * H, q.fcprojb + (size_t)l * C, H, C);
        }
        for (int i = 0; i < C; i++) x[i] = x[i] + t1[i];
    }
    const float *head;
    if (llama) {
        tr_llama_params q = tr_llama_views(c, m->params, off);
        trk_rmsnorm_row(n, &rstd, x, q.rmsfw, C, tr_rms_eps(c));
        head = q.lmhead;
    } else {
        tr_params q = tr_param_views(m->params, off);
        trk_layernorm_row(n, &mean, &rstd, x, q.lnfw, q.lnfb, C);
        head = q.wte;
    }
    tr_decode_linear(m, full, n, head, NULL, C, c->padded_vocab);
    memcpy(logits, full, sizeof(float) * c->vocab);
    m->decode_pos++;
    return TR_OK;
}

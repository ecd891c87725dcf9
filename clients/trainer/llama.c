// llama.c: the Llama architecture (RMSNorm, rotary position embeddings,
// grouped-query attention, SwiGLU MLP, q/k/v biases only with qkv_bias
// (Qwen2), tied or untied lm-head)
// trained in fp32 on the CPU, layer by layer (ops.c). Layouts: layout.h.

#include "internal.h"

static const float *llama_forward(tr_model *m, float *w, const int32_t *tok, const int32_t *tgt, int B, int T) {
    const tr_config *c = &m->cfg;
    int L = c->layers, C = c->channels, NH = c->heads, KV = c->kv_heads, H = c->hidden, Vp = c->padded_vocab;
    int KVD = tr_kv_dim(c), QKVD = C + 2 * KVD;
    size_t BT = (size_t)B * T;
    tr_llama_params p = tr_llama_views(c, w, m->offsets);
    tr_llama_acts a;
    tr_llama_act_layout(c, B, T, m->act_mem, &a);
    tr_encoder_forward(m, a.encoded, tok, p.wte, NULL, B, T);
    for (int l = 0; l < L; l++) {
        const float *residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
        float *rms1 = a.rms1 + l * BT * C, *qkv = a.qkv + l * BT * QKVD, *atty = a.atty + l * BT * C;
        float *att = a.att + (size_t)l * B * NH * T * T, *res2 = a.residual2 + l * BT * C, *rms2 = a.rms2 + l * BT * C;
        float *gate = a.gate + l * BT * H, *up = a.up + l * BT * H, *hmid = a.hmid + l * BT * H;
        float *res3 = a.residual3 + l * BT * C;
        tr_rmsnorm_forward(m, rms1, a.rms1_rstd + l * BT, residual, p.rms1w + l * C, BT, C);
        tr_linear_forward(m, qkv, QKVD, rms1, C, p.wq + (size_t)l * C * C, TR_LAYER(p.bq, l, C), BT, C, C);
        tr_linear_forward(m, qkv + C, QKVD, rms1, C, p.wk + (size_t)l * KVD * C, TR_LAYER(p.bk, l, KVD), BT, C, KVD);
        tr_linear_forward(m, qkv + C + KVD, QKVD, rms1, C, p.wv + (size_t)l * KVD * C, TR_LAYER(p.bv, l, KVD), BT, C, KVD);
        tr_rope(m, qkv, BT, T, KV, 0);
        tr_attention_forward(m, atty, att, qkv, B, T, KV);
        // res3 doubles as scratch for the output projection before it holds residual3.
        tr_linear_forward(m, res3, C, atty, C, p.wo + (size_t)l * C * C, NULL, BT, C, C);
        tr_residual_forward(m, res2, residual, res3, BT * C);
        tr_rmsnorm_forward(m, rms2, a.rms2_rstd + l * BT, res2, p.rms2w + l * C, BT, C);
        tr_linear_forward(m, gate, H, rms2, C, p.wgate + (size_t)l * H * C, NULL, BT, C, H);
        tr_linear_forward(m, up, H, rms2, C, p.wup + (size_t)l * H * C, NULL, BT, C, H);
        tr_swiglu_forward(m, hmid, gate, up, BT * H);
        tr_linear_forward(m, res3, C, hmid, H, p.wdown + (size_t)l * C * H, NULL, BT, H, C);
        tr_residual_forward(m, res3, res2, res3, BT * C);
    }
    tr_rmsnorm_forward(m, a.rmsf, a.rmsf_rstd, a.residual3 + (L - 1) * BT * C, p.rmsfw, BT, C);
    tr_linear_forward(m, a.logits, Vp, a.rmsf, C, p.lmhead, NULL, BT, C, Vp);
    tr_crossentropy_forward(m, a.probs, a.losses, a.logits, tgt, BT);
    return a.losses;
}

static void llama_backward(tr_model *m, float *w, float *gw, const int32_t *tok, const int32_t *tgt, float dloss, int B, int T) {
    const tr_config *c = &m->cfg;
    int L = c->layers, C = c->channels, NH = c->heads, KV = c->kv_heads, H = c->hidden, Vp = c->padded_vocab;
    int KVD = tr_kv_dim(c), QKVD = C + 2 * KVD;
    size_t BT = (size_t)B * T;
    tr_llama_params p = tr_llama_views(c, w, m->offsets), g = tr_llama_views(c, gw, m->offsets);
    tr_llama_acts a;
    tr_llama_dacts d;
    tr_llama_act_layout(c, B, T, m->act_mem, &a);
    tr_llama_dact_layout(c, B, T, m->dact_mem, &d);
    tr_crossentropy_backward(m, d.dlogits, a.probs, tgt, dloss, BT);
    tr_linear_backward(m, d.dln, 0, g.lmhead, NULL, d.dlogits, Vp, a.rmsf, C, p.lmhead, BT, T, C, Vp);
    memset(d.dres, 0, sizeof(float) * BT * C);
    tr_rmsnorm_backward(m, d.dres, g.rmsfw, d.dln, a.residual3 + (L - 1) * BT * C, p.rmsfw, a.rmsf_rstd, BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BT * C;
        const float *rms1 = a.rms1 + l * BT * C, *qkv = a.qkv + l * BT * QKVD, *atty = a.atty + l * BT * C;
        const float *att = a.att + (size_t)l * B * NH * T * T, *res2 = a.residual2 + l * BT * C, *rms2 = a.rms2 + l * BT * C;
        const float *gate = a.gate + l * BT * H, *up = a.up + l * BT * H, *hmid = a.hmid + l * BT * H;
        // dres = d residual3: the MLP, then the skip connection
        tr_linear_backward(m, d.dhmid, 0, g.wdown + (size_t)l * C * H, NULL, d.dres, C, hmid, H, p.wdown + (size_t)l * C * H, BT, T, H, C);
        tr_swiglu_backward(m, d.dgate, d.dup, gate, up, d.dhmid, BT * H);
        tr_linear_backward(m, d.dln, 0, g.wup + (size_t)l * H * C, NULL, d.dup, H, rms2, C, p.wup + (size_t)l * H * C, BT, T, C, H);
        tr_linear_backward(m, d.dln, 1, g.wgate + (size_t)l * H * C, NULL, d.dgate, H, rms2, C, p.wgate + (size_t)l * H * C, BT, T, C, H);
        tr_rmsnorm_backward(m, d.dres, g.rms2w + l * C, d.dln, res2, p.rms2w + l * C, a.rms2_rstd + l * BT, BT, C);
        // dres = d residual2: attention, then the skip connection
        tr_linear_backward(m, d.datty, 0, g.wo + (size_t)l * C * C, NULL, d.dres, C, atty, C, p.wo + (size_t)l * C * C, BT, T, C, C);
        tr_attention_backward(m, d.dqkv, d.datty, qkv, att, B, T, KV);
        tr_rope(m, d.dqkv, BT, T, KV, 1);
        tr_linear_backward(m, d.dln, 0, g.wq + (size_t)l * C * C, TR_LAYER(g.bq, l, C), d.dqkv, QKVD, rms1, C,
                           p.wq + (size_t)l * C * C, BT, T, C, C);
        tr_linear_backward(m, d.dln, 1, g.wk + (size_t)l * KVD * C, TR_LAYER(g.bk, l, KVD), d.dqkv + C, QKVD, rms1, C,
                           p.wk + (size_t)l * KVD * C, BT, T, C, KVD);
        tr_linear_backward(m, d.dln, 1, g.wv + (size_t)l * KVD * C, TR_LAYER(g.bv, l, KVD), d.dqkv + C + KVD, QKVD, rms1, C,
                           p.wv + (size_t)l * KVD * C, BT, T, C, KVD);
        tr_rmsnorm_backward(m, d.dres, g.rms1w + l * C, d.dln, residual, p.rms1w + l * C, a.rms1_rstd + l * BT, BT, C);
    }
    tr_encoder_backward(m, m->dwte_emb, NULL, d.dres, tok, B, T);
}

// Llama initialisation: N(0, 0.02), the residual projections (wo, wdown)
// scaled by 1/sqrt(2L), RMSNorm weights 1, biases 0 (as transformers
// starts Qwen2's); padded vocabulary rows stay 0.
static void llama_init(tr_model *m, uint64_t seed) {
    uint64_t s = seed;
    float std = 0.02f, proj_std = 0.02f / __builtin_sqrtf(2.0f * m->cfg.layers);
    memset(m->params, 0, sizeof(float) * m->num_params);
    for (int i = 0; i < m->ntensors; i++) {
        float *p = m->params + m->offsets[i];
        int id = tr_llama_tensor_id(&m->cfg, i);
        size_t n = id == TR_L_wte || id == TR_L_lmhead ? (size_t)m->cfg.vocab * m->cfg.channels : m->sizes[i];
        switch (id) {
        case TR_L_wte: case TR_L_wq: case TR_L_wk: case TR_L_wv: case TR_L_wgate: case TR_L_wup: case TR_L_lmhead:
            for (size_t j = 0; j < n; j++) p[j] = std * tr_normal(&s);
            break;
        case TR_L_wo: case TR_L_wdown:
            for (size_t j = 0; j < n; j++) p[j] = proj_std * tr_normal(&s);
            break;
        case TR_L_bq: case TR_L_bk: case TR_L_bv:
            break;
        default: // RMSNorm weights
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
            break;
        }
    }
}

const tr_arch tr_arch_llama = {llama_init, llama_forward, llama_backward};

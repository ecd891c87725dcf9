// gpt.c: a GPT-2 style decoder (token + position embeddings, pre-LayerNorm,
// causal multi-head attention, GELU MLP, tied lm-head) trained in fp32 on the
// CPU, layer by layer (ops.c). Its layouts are layout.h's.

#include "internal.h"

static const float *gpt_forward(tr_model *m, float *w, const int32_t *tok, const int32_t *tgt, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, Vp = m->cfg.padded_vocab;
    size_t BT = (size_t)B * T;
    tr_params pv = tr_param_views(w, m->offsets), *p = &pv;
    tr_acts av, *a = &av;
    tr_act_layout(&m->cfg, B, T, m->act_mem, a);
    tr_encoder_forward(m, a->encoded, tok, p->wte, p->wpe, B, T);
    for (int l = 0; l < L; l++) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        float *att = a->att + (size_t)l * B * NH * T * T, *res2 = a->residual2 + l * BT * C;
        float *ln2 = a->ln2 + l * BT * C, *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C;
        float *res3 = a->residual3 + l * BT * C;
        tr_layernorm_forward(m, ln1, a->ln1_mean + l * BT, a->ln1_rstd + l * BT, residual, p->ln1w + l * C, p->ln1b + l * C, BT, C);
        tr_linear_forward(m, qkv, 3 * C, ln1, C, p->qkvw + (size_t)l * 3 * C * C, p->qkvb + l * 3 * C, BT, C, 3 * C);
        tr_attention_forward(m, atty, att, qkv, B, T, NH);
        // res3 doubles as scratch for the attention projection before it holds residual3.
        tr_linear_forward(m, res3, C, atty, C, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, BT, C, C);
        tr_residual_forward(m, res2, residual, res3, BT * C);
        tr_layernorm_forward(m, ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, res2, p->ln2w + l * C, p->ln2b + l * C, BT, C);
        tr_linear_forward(m, fch, 4 * C, ln2, C, p->fcw + (size_t)l * 4 * C * C, p->fcb + l * 4 * C, BT, C, 4 * C);
        tr_gelu_forward(m, fchg, fch, BT * 4 * C);
        tr_linear_forward(m, res3, C, fchg, 4 * C, p->fcprojw + (size_t)l * C * 4 * C, p->fcprojb + l * C, BT, 4 * C, C);
        tr_residual_forward(m, res3, res2, res3, BT * C);
    }
    tr_layernorm_forward(m, a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (L - 1) * BT * C, p->lnfw, p->lnfb, BT, C);
    tr_linear_forward(m, a->logits, Vp, a->lnf, C, p->wte, NULL, BT, C, Vp);
    tr_crossentropy_forward(m, a->probs, a->losses, a->logits, tgt, BT);
    return a->losses;
}

static void gpt_backward(tr_model *m, float *w, float *gw, const int32_t *tok, const int32_t *tgt, float dloss, int B, int T) {
    int L = m->cfg.layers, C = m->cfg.channels, NH = m->cfg.heads, Vp = m->cfg.padded_vocab;
    size_t BT = (size_t)B * T;
    tr_params pv = tr_param_views(w, m->offsets), gv = tr_param_views(gw, m->offsets), *p = &pv, *g = &gv;
    tr_acts av, *a = &av;
    tr_dacts dv, *d = &dv;
    tr_act_layout(&m->cfg, B, T, m->act_mem, a);
    tr_dact_layout(&m->cfg, B, T, m->dact_mem, d);
    tr_crossentropy_backward(m, d->dlogits, a->probs, tgt, dloss, BT);
    tr_linear_backward(m, d->dln, 0, g->wte, NULL, d->dlogits, Vp, a->lnf, C, p->wte, BT, T, C, Vp);
    memset(d->dres, 0, sizeof(float) * BT * C);
    tr_layernorm_backward(m, d->dres, g->lnfw, g->lnfb, d->dln, a->residual3 + (L - 1) * BT * C, p->lnfw,
                          a->lnf_mean, a->lnf_rstd, BT, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        const float *ln1 = a->ln1 + l * BT * C, *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        const float *att = a->att + (size_t)l * B * NH * T * T, *res2 = a->residual2 + l * BT * C;
        const float *ln2 = a->ln2 + l * BT * C, *fch = a->fch + l * BT * 4 * C, *fchg = a->fch_gelu + l * BT * 4 * C;
        // dres = d residual3 = d fcproj (and d residual2 through the skip connection)
        tr_linear_backward(m, d->dfch_gelu, 0, g->fcprojw + (size_t)l * C * 4 * C, g->fcprojb + l * C, d->dres, C, fchg, 4 * C,
                           p->fcprojw + (size_t)l * C * 4 * C, BT, T, 4 * C, C);
        tr_gelu_backward(m, d->dfch, fch, d->dfch_gelu, BT * 4 * C);
        tr_linear_backward(m, d->dln, 0, g->fcw + (size_t)l * 4 * C * C, g->fcb + l * 4 * C, d->dfch, 4 * C, ln2, C,
                           p->fcw + (size_t)l * 4 * C * C, BT, T, C, 4 * C);
        tr_layernorm_backward(m, d->dres, g->ln2w + l * C, g->ln2b + l * C, d->dln, res2, p->ln2w + l * C,
                              a->ln2_mean + l * BT, a->ln2_rstd + l * BT, BT, C);
        // dres = d residual2 = d attproj (and d residual)
        tr_linear_backward(m, d->datty, 0, g->attprojw + (size_t)l * C * C, g->attprojb + l * C, d->dres, C, atty, C,
                           p->attprojw + (size_t)l * C * C, BT, T, C, C);
        tr_attention_backward(m, d->dqkv, d->datty, qkv, att, B, T, NH);
        tr_linear_backward(m, d->dln, 0, g->qkvw + (size_t)l * 3 * C * C, g->qkvb + l * 3 * C, d->dqkv, 3 * C, ln1, C,
                           p->qkvw + (size_t)l * 3 * C * C, BT, T, C, 3 * C);
        tr_layernorm_backward(m, d->dres, g->ln1w + l * C, g->ln1b + l * C, d->dln, residual, p->ln1w + l * C,
                              a->ln1_mean + l * BT, a->ln1_rstd + l * BT, BT, C);
    }
    tr_encoder_backward(m, m->dwte_emb, g->wpe, d->dres, tok, B, T);
}

// GPT-2 initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2L),
// LayerNorm weights 1, biases 0; padded vocabulary rows stay 0.
static void gpt_init(tr_model *m, uint64_t seed) {
    uint64_t s = seed;
    float std = 0.02f, proj_std = 0.02f / __builtin_sqrtf(2.0f * m->cfg.layers);
    memset(m->params, 0, sizeof(float) * m->num_params);
    for (int i = 0; i < TR_NUM_TENSORS; i++) {
        float *p = m->params + m->offsets[i];
        size_t n = i == TR_P_wte ? (size_t)m->cfg.vocab * m->cfg.channels : m->sizes[i];
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
}

const tr_arch tr_arch_gpt2 = {gpt_init, gpt_forward, gpt_backward};

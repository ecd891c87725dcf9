// adamw.c: plain AdamW for single-node baselines (decoupled weight decay on
// every parameter, llm.c style). Elementwise, so thread count cannot matter.

#include "internal.h"

int tr_adamw_step(tr_model *m, const tr_adamw *hp) {
    if (!m || !hp) return TR_EINVAL;
    if (!(hp->lr >= 0.0f && hp->lr < 1e6f) || !(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) ||
        !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f) || !(hp->eps > 0.0f && hp->eps < 1.0f) ||
        !(hp->weight_decay >= 0.0f && hp->weight_decay < 1e6f) || !(hp->clip_norm < 1e30f) || hp->clip_norm != hp->clip_norm)
        return TR_EINVAL;
    if (!m->have_grads) return TR_ENOGRAD;
    float gscale;
    int rc = tr_grad_scale(m, hp->clip_norm, &gscale);
    if (rc) return rc;
    if (!m->adam_m) {
        m->adam_m = calloc(m->num_params, sizeof(float));
        m->adam_v = calloc(m->num_params, sizeof(float));
        if (!m->adam_m || !m->adam_v) {
            free(m->adam_m); free(m->adam_v);
            m->adam_m = m->adam_v = NULL;
            return TR_ENOMEM;
        }
    }
    m->adam_t++;
    // beta^t by repeated multiplication: no pow() from libm in the contract.
    float b1t = 1.0f, b2t = 1.0f;
    for (uint64_t i = 0; i < m->adam_t && (b1t > 0.0f || b2t > 0.0f); i++) { b1t *= hp->beta1; b2t *= hp->beta2; }
    float c1 = 1.0f - b1t, c2 = 1.0f - b2t;
    float b1 = hp->beta1, b2 = hp->beta2, lr = hp->lr, eps = hp->eps, wd = hp->weight_decay;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < m->num_params; i++) {
        float g = m->grads[i] * gscale;
        float mm = b1 * m->adam_m[i] + (1.0f - b1) * g;
        float vv = b2 * m->adam_v[i] + (1.0f - b2) * g * g;
        m->adam_m[i] = mm;
        m->adam_v[i] = vv;
        float mh = mm / c1, vh = vv / c2;
        m->params[i] -= lr * (mh / (__builtin_sqrtf(vh) + eps) + wd * m->params[i]);
    }
    m->step++;
    m->have_grads = 0;
    m->lookahead_on = 0;
    return TR_OK;
}

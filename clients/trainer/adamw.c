// adamw.c: plain AdamW for single-node baselines (decoupled weight decay on
// every parameter, llm.c style). Elementwise (trk_adamw), so thread count
// cannot matter; device_cuda.c runs the same arithmetic on the GPU.

#include "internal.h"

int tr_adamw_check(const tr_model *m, const tr_adamw *hp) {
    if (!m || !hp) return TR_EINVAL;
    if (!(hp->lr >= 0.0f && hp->lr < 1e6f) || !(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) ||
        !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f) || !(hp->eps > 0.0f && hp->eps < 1.0f) ||
        !(hp->weight_decay >= 0.0f && hp->weight_decay < 1e6f) || !(hp->clip_norm < 1e30f) || hp->clip_norm != hp->clip_norm)
        return TR_EINVAL;
    return m->have_grads ? TR_OK : TR_ENOGRAD;
}

int tr_adam_alloc(tr_model *m) {
    if (m->adam_m) return TR_OK;
    m->adam_m = calloc(m->num_params, sizeof(float));
    m->adam_v = calloc(m->num_params, sizeof(float));
    if (!m->adam_m || !m->adam_v) {
        tr_adam_free(m);
        return TR_ENOMEM;
    }
    tr_host_replace(m, TR_BUF_ADAM); // a device has yet to see these zeros
    return TR_OK;
}

// No moments on either side: the next AdamW step starts them from zero.
void tr_adam_free(tr_model *m) {
    tr_host_replace(m, TR_BUF_ADAM);
    free(m->adam_m); free(m->adam_v);
    m->adam_m = m->adam_v = NULL;
}

int tr_adamw_step(tr_model *m, const tr_adamw *hp) {
    int rc = tr_adamw_check(m, hp);
    if (rc) return rc;
    if ((rc = tr_host_read(m, TR_BUF_GRADS))) return rc;
    float gscale;
    if ((rc = tr_grad_scale(m, hp->clip_norm, &gscale))) return rc;
    if ((rc = tr_adam_alloc(m)) || (rc = tr_host_write(m, TR_BUF_PARAMS | TR_BUF_ADAM))) return rc;
    m->adam_t++;
    trk_adamw_args a = {hp->lr, hp->beta1, hp->beta2, hp->eps, hp->weight_decay, 0.0f, 0.0f, gscale};
    trk_adamw_bias(hp->beta1, hp->beta2, m->adam_t, &a.c1, &a.c2);
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < m->num_params; i++) trk_adamw(&m->params[i], &m->adam_m[i], &m->adam_v[i], m->grads[i], &a);
    m->step++;
    m->have_grads = 0;
    m->lookahead_on = 0;
    return TR_OK;
}

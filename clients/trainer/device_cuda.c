//go:build cuda

// device_cuda.c: runs forward/backward on the GPU (cuda/model.cu) for a
// tr_model, whose weights, gradients and optimizers stay on the host.

#include "internal.h"
#include "cuda/trainer_cuda.h"

// Weights the forward pass sees: the DeMo lookahead point or the master weights.
static const float *tr_device_weights(const tr_model *m) { return m->lookahead_on ? m->lookahead : m->params; }

int tr_step_device(tr_model *m, trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !g) return TR_EINVAL;
    int rc = trg_step(g, tr_device_weights(m), m->num_params, tokens, targets, n, t, m->grads, loss);
    m->have_grads = rc == TR_OK;
    return rc;
}

int tr_eval_device(tr_model *m, trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !g) return TR_EINVAL;
    return trg_eval(g, m->params, m->num_params, tokens, targets, n, t, loss);
}

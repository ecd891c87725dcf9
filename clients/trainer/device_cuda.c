//go:build cuda || cudaemu

// device_cuda.c: a tr_model's GPU (cuda/model.cu): forward/backward and
// AdamW run there, and the weights, gradients and AdamW moments stay there
// across steps. The residency flags (internal.h) say which side is newer;
// the host's entry points download what they need through tr_dev_download.

#include "internal.h"
#include "cuda/trainer_cuda.h"

// The device buffers of each TR_BUF_* bit (ADAM: both moments).
static int tr_dev_copy(tr_model *m, unsigned bufs, int up) {
    trg_model *g = m->dev;
    size_t n = m->num_params;
    struct { unsigned bit; int buf; float *host; } b[] = {
        {TR_BUF_PARAMS, TRG_PARAMS, m->params}, {TR_BUF_GRADS, TRG_GRADS, m->grads},
        {TR_BUF_ADAM, TRG_ADAM_M, m->adam_m}, {TR_BUF_ADAM, TRG_ADAM_V, m->adam_v},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        if (!(bufs & b[i].bit)) continue;
        int rc = up ? trg_upload(g, b[i].buf, b[i].host, n) : trg_download(g, b[i].buf, b[i].host, n);
        if (rc) return rc;
    }
    return TR_OK;
}

static int tr_dev_download(tr_model *m, unsigned bufs) { return tr_dev_copy(m, bufs, 0); }

// Before a device operation: its copies of bufs made current.
static int tr_dev_use(tr_model *m, unsigned bufs) {
    unsigned need = m->dev_stale & bufs;
    int rc = need ? tr_dev_copy(m, need, 1) : TR_OK;
    if (rc == TR_OK) m->dev_stale &= ~need;
    return rc;
}

#ifdef TR_POISON_STALE
// Under the cudaemu tag (tests): stale host copies hold NaN, so that an entry
// point reading one without tr_host_read shows in its results.
static void tr_poison(tr_model *m, unsigned bufs) {
    float *p[4] = {bufs & TR_BUF_PARAMS ? m->params : NULL, bufs & TR_BUF_GRADS ? m->grads : NULL,
                   bufs & TR_BUF_ADAM ? m->adam_m : NULL, bufs & TR_BUF_ADAM ? m->adam_v : NULL};
    for (int b = 0; b < 4; b++)
        for (size_t i = 0; p[b] && i < m->num_params; i++) p[b][i] = tr_bits2f(0x7fc00000u);
}
#endif

// After a device operation that changed bufs: the host's copies are stale.
static void tr_dev_wrote(tr_model *m, unsigned bufs) {
    m->dev_stale &= ~bufs;
    m->host_stale |= bufs;
#ifdef TR_POISON_STALE
    tr_poison(m, bufs);
#endif
}

// g holds nothing of m yet: everything uploads on first use.
int tr_device_attach(tr_model *m, trg_model *g) {
    if (!m || !g || m->dev) return TR_EINVAL;
    m->dev = g;
    m->dev_download = tr_dev_download;
    m->dev_stale = TR_BUF_ALL;
    m->host_stale = 0;
    return TR_OK;
}

int tr_step_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !m->dev) return TR_EINVAL;
    int rc;
    if (m->lookahead_on) {
        // The device's weights buffer takes the DeMo lookahead point, so
        // the host's params must be current before it is overwritten.
        if ((rc = tr_host_read(m, TR_BUF_PARAMS))) return rc;
        m->dev_stale |= TR_BUF_PARAMS;
        rc = trg_upload(m->dev, TRG_PARAMS, m->lookahead, m->num_params);
    } else {
        rc = tr_dev_use(m, TR_BUF_PARAMS);
    }
    if (rc == TR_OK) rc = trg_step(m->dev, tokens, targets, n, t, loss);
    m->have_grads = rc == TR_OK;
    if (rc == TR_OK) tr_dev_wrote(m, TR_BUF_GRADS);
    return rc;
}

int tr_eval_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !m->dev) return TR_EINVAL;
    int rc = tr_dev_use(m, TR_BUF_PARAMS);
    return rc ? rc : trg_eval(m->dev, tokens, targets, n, t, loss);
}

// tr_adamw_step on the device: the same checks, counters and arithmetic.
int tr_adamw_step_device(tr_model *m, const tr_adamw *hp) {
    int rc = tr_adamw_check(m, hp);
    if (rc) return rc;
    if (!m->dev) return TR_EINVAL;
    if ((rc = tr_adam_alloc(m)) || (rc = tr_dev_use(m, TR_BUF_PARAMS | TR_BUF_GRADS | TR_BUF_ADAM))) return rc;
    if ((rc = trg_adamw(m->dev, hp, m->adam_t + 1))) return rc;
    tr_dev_wrote(m, TR_BUF_PARAMS | TR_BUF_ADAM);
    m->adam_t++;
    m->step++;
    m->have_grads = 0;
    m->lookahead_on = 0;
    return TR_OK;
}

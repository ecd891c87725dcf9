// model.c: the trainer's model API (trainer.h) over either architecture
// (gpt.c, llama.c): creation, forward/backward over micro-batches, weights
// and gradients in and out. Optimizers: adamw.c, demo.c, loco.c; state: state.c.

#include "internal.h"

// Uniform in [0,1) from splitmix64; N(0,1) approximated by Irwin-Hall (12 uniforms),
// which needs no transcendental functions.
static uint64_t tr_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float tr_normal(uint64_t *s) {
    float sum = 0.0f;
    for (int i = 0; i < 12; i++) sum += (float)(tr_splitmix(s) >> 40) * (1.0f / 16777216.0f);
    return sum - 6.0f;
}

int tr_config_check(const tr_config *c) {
    if (!c) return TR_EINVAL;
    if (c->vocab < 2 || c->padded_vocab < c->vocab || c->layers < 1 || c->channels < 8 || c->heads < 1 ||
        c->channels % c->heads != 0 || c->seq_len < 1 || c->micro_batch < 1)
        return TR_EINVAL;
    if (c->vocab > (1 << 24) || c->padded_vocab > (1 << 24) || c->layers > 1024 || c->channels > 65536 ||
        c->seq_len > 65536 || c->micro_batch > 65536)
        return TR_EINVAL;
    if (c->arith != TR_ARITH_FP32 && c->arith != TR_ARITH_MX8) return TR_EINVAL;
    if (c->grad_shards < 0 || c->grad_shards > TR_MAX_SHARDS || (c->grad_shards & (c->grad_shards - 1))) return TR_EINVAL;
    if (c->recompute != 0 && c->recompute != 1) return TR_EINVAL;
    if (c->arch == TR_ARCH_GPT2) // the Llama fields must be unset
        return c->kv_heads || c->hidden || c->untied || c->rope_theta != 0.0f || c->rms_eps != 0.0f || c->rope_scaling ||
                       c->rope_factor != 0.0f || c->rope_low_freq != 0.0f || c->rope_high_freq != 0.0f || c->rope_orig_ctx ||
                       c->qkv_bias
                   ? TR_EINVAL
                   : TR_OK;
    if (!(c->rms_eps >= 0.0f && c->rms_eps <= 0.1f)) return TR_EINVAL;
    if (c->rope_scaling == TR_ROPE_PLAIN) {
        if (c->rope_factor != 0.0f || c->rope_low_freq != 0.0f || c->rope_high_freq != 0.0f || c->rope_orig_ctx) return TR_EINVAL;
    } else if (c->rope_scaling != TR_ROPE_LLAMA3 || !(c->rope_factor >= 1.0f && c->rope_factor <= 1024.0f) ||
               !(c->rope_low_freq > 0.0f && c->rope_high_freq > c->rope_low_freq && c->rope_high_freq <= 1024.0f) ||
               c->rope_orig_ctx < 1 || c->rope_orig_ctx > (1 << 24)) {
        return TR_EINVAL;
    }
    if (c->arch != TR_ARCH_LLAMA) return TR_EINVAL;
    if (c->kv_heads < 1 || c->heads % c->kv_heads != 0 || (c->channels / c->heads) % 2 != 0 || c->hidden < 1 ||
        c->hidden > (1 << 20) || (c->untied != 0 && c->untied != 1) || (c->qkv_bias != 0 && c->qkv_bias != 1) || !(c->rope_theta >= 1.0f && c->rope_theta <= 1e12f))
        return TR_EINVAL;
    return TR_OK;
}

int tr_create(const tr_config *cfg, uint64_t seed, tr_model **out) {
    if (!out) return TR_EINVAL;
    *out = NULL;
    int rc = tr_config_check(cfg);
    if (rc) return rc;
    tr_model *m = calloc(1, sizeof *m);
    if (!m) return TR_ENOMEM;
    m->cfg = *cfg;
    m->arch = tr_is_llama(cfg) ? &tr_arch_llama : &tr_arch_gpt2;
    m->ntensors = tr_tensor_count(cfg);
    size_t off = tr_param_layout(cfg, m->sizes, m->offsets);
    m->num_params = off;
    int T = cfg->seq_len, half = cfg->channels / cfg->heads / 2;
    m->nthreads = tr_default_threads();
    m->params = malloc(sizeof(float) * off);
    m->grads = calloc(off, sizeof(float));
    m->dwte_emb = malloc(sizeof(float) * m->sizes[TR_P_wte]);
    if (tr_is_llama(cfg)) {
        m->rope_cos = malloc(sizeof(float) * (size_t)T * half);
        m->rope_sin = malloc(sizeof(float) * (size_t)T * half);
    }
    if (!m->params || !m->grads || !m->dwte_emb || tr_cpu_ready(m) || tr_thread_scratch(m, m->nthreads) ||
        (tr_is_llama(cfg) && (!m->rope_cos || !m->rope_sin))) {
        tr_destroy(m);
        return TR_ENOMEM;
    }
    m->isa = tr_isa_pick(TR_ISA_AUTO);
    m->layers = tr_layers_for(m->isa);
    if (tr_is_llama(cfg)) trk_rope_table(m->rope_cos, m->rope_sin, T, 2 * half, cfg);
    m->arch->init(m, seed);
    *out = m;
    return TR_OK;
}

// The buffers only the CPU's forward and backward use: the activations and
// their gradients, the mx8 operand codes and the shard tree's partial sums.
// tr_create makes them (so a model too large for the host fails there);
// attaching a device frees them (tr_cpu_release) and the CPU's entry
// points make them again when they run (a GPU trainer switched to the CPU).
int tr_cpu_ready(tr_model *m) {
    const tr_config *c = &m->cfg;
    size_t levels = (size_t)tr_shard_levels(tr_shards(c)) - 1;
    if (levels && !m->shard_grads && !(m->shard_grads = malloc(sizeof(float) * m->num_params * levels))) return TR_ENOMEM;
    if (!m->act_mem && !(m->act_mem = malloc(sizeof(float) * tr_act_floats(c, c->micro_batch, c->seq_len, 0)))) return TR_ENOMEM;
    if (!m->dact_mem && !(m->dact_mem = malloc(sizeof(float) * tr_act_floats(c, c->micro_batch, c->seq_len, 1)))) return TR_ENOMEM;
    if (c->arith == TR_ARITH_MX8 && !m->mx_scratch) {
        size_t qa, qb;
        tr_mx_operand_codes(c, &qa, &qb);
        if (!(m->mx_scratch = malloc(tr_mx_scratch_bytes(qa, qb)))) return TR_ENOMEM;
        m->mx_scratch_bytes = tr_mx_scratch_bytes(qa, qb);
    }
    return TR_OK;
}

void tr_cpu_release(tr_model *m) {
    free(m->shard_grads); free(m->act_mem); free(m->dact_mem); free(m->mx_scratch);
    m->shard_grads = m->act_mem = m->dact_mem = NULL;
    m->mx_scratch = NULL;
    m->mx_scratch_bytes = 0;
}

int tr_default_threads(void) {
    int n = omp_get_num_procs();
    return n < 1 ? 1 : n > TR_MAX_THREADS ? TR_MAX_THREADS : n;
}

void tr_destroy(tr_model *m) {
    if (!m) return;
    free(m->params); free(m->grads); free(m->shard_grads); free(m->dwte_emb); free(m->lookahead);
    free(m->adam_m); free(m->adam_v); free(m->delta); free(m->pending);
    free(m->anchor); free(m->anchor_m); free(m->anchor_v);
    free(m->act_mem); free(m->dact_mem); free(m->rope_cos); free(m->rope_sin); free(m->kv_cache); free(m->decode_buf);
    free(m->attn_buf); free(m->pack_buf); free(m->demo_buf); free(m->mx_scratch);
    for (int i = 0; i < 257; i++) free(m->dct[i]);
    free(m);
}

int tr_set_threads(tr_model *m, int n) {
    if (!m || n < 1 || n > TR_MAX_THREADS) return TR_EINVAL;
    if (tr_thread_scratch(m, n)) return TR_ENOMEM;
    m->nthreads = n;
    return TR_OK;
}

int tr_set_isa(tr_model *m, int isa) {
    if (!m || isa < TR_ISA_AUTO || isa > TR_ISA_AMX_EMULATED) return TR_EINVAL;
    m->isa = tr_isa_pick(isa);
    m->layers = tr_layers_for(m->isa);
    return m->isa;
}

size_t tr_num_params(const tr_model *m) { return m ? m->num_params : 0; }

static int tr_check_batch(const tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t) {
    if (!m || !tokens || !targets || n < 1 || t < 1 || t > m->cfg.seq_len) return TR_EINVAL;
    size_t total = (size_t)n * t;
    for (size_t i = 0; i < total; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab || targets[i] < TR_IGNORE || targets[i] >= m->cfg.vocab) return TR_EINVAL;
    return TR_OK;
}

// Weights the forward pass sees: the lookahead point under DeMo, else the master weights.
static float *tr_forward_weights(tr_model *m) { return m->lookahead_on ? m->lookahead : m->params; }

// wte's gradient is the lm-head's chain plus the embedding's chain, each over
// the shard's tokens in order; kept apart until the shard ends, so that
// micro-batches do not interleave them.
static void tr_add_embedding_grads(const tr_model *m, float *dwte) {
    size_t n = m->sizes[TR_P_wte];
    const float *e = m->dwte_emb;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) dwte[i] = dwte[i] + e[i];
}

// The loss is one chain over the shard's tokens in order, across micro-batches.
static float tr_add_losses(float total, const float *losses, int BT) {
    for (int i = 0; i < BT; i++) total = total + losses[i];
    return total;
}

// One merge of the shard tree (layout.h): left = left + right.
static void tr_merge(const tr_model *m, float *left, const float *right) {
    size_t n = m->num_params;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < n; i++) left[i] = left[i] + right[i];
}

int tr_step(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    int rc = tr_check_batch(m, tokens, targets, n, t);
    if (rc) return rc;
    if (!loss) return TR_EINVAL;
    if ((rc = tr_cpu_ready(m)) || (rc = tr_host_read(m, m->lookahead_on ? TR_BUF_LOOKAHEAD : TR_BUF_PARAMS))) return rc;
    tr_host_replace(m, TR_BUF_GRADS);
    float *w = tr_forward_weights(m);
    float count = trk_loss_count(targets, (size_t)n * t), dloss = trk_loss_scale(count);
    int S = tr_shards(&m->cfg), depth = 0;
    float *level[TR_MAX_SHARD_LEVELS], part[TR_MAX_SHARD_LEVELS];
    level[0] = m->grads;
    for (int k = 1; k < tr_shard_levels(S); k++) level[k] = m->shard_grads + (size_t)(k - 1) * m->num_params;
    for (int s = 0; s < S; s++) {
        float *g = level[depth], total = 0.0f;
        int first = tr_shard_first(n, S, s), end = tr_shard_first(n, S, s + 1);
        memset(g, 0, sizeof(float) * m->num_params);
        memset(m->dwte_emb, 0, sizeof(float) * m->sizes[TR_P_wte]);
        for (int b0 = first; b0 < end; b0 += m->cfg.micro_batch) {
            int B = end - b0 < m->cfg.micro_batch ? end - b0 : m->cfg.micro_batch;
            const int32_t *tok = tokens + (size_t)b0 * t, *tgt = targets + (size_t)b0 * t;
            total = tr_add_losses(total, m->arch->forward(m, w, tok, tgt, B, t), B * t);
            m->arch->backward(m, w, g, tok, tgt, dloss, B, t);
        }
        tr_add_embedding_grads(m, g + m->offsets[0]);
        part[depth++] = total;
        for (int k = tr_tree_merges(s); k > 0; k--, depth--) {
            tr_merge(m, level[depth - 2], level[depth - 1]);
            part[depth - 2] = part[depth - 2] + part[depth - 1];
        }
    }
    m->have_grads = 1;
    *loss = trk_loss_mean(part[0], count);
    return TR_OK;
}

int tr_zero_step(tr_model *m) {
    if (!m) return TR_EINVAL;
    tr_host_replace(m, TR_BUF_GRADS);
    memset(m->grads, 0, sizeof(float) * m->num_params);
    m->have_grads = 1;
    return TR_OK;
}

int tr_eval(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    int rc = tr_check_batch(m, tokens, targets, n, t);
    if (rc) return rc;
    if (!loss) return TR_EINVAL;
    if ((rc = tr_cpu_ready(m)) || (rc = tr_host_read(m, TR_BUF_PARAMS))) return rc;
    float total = 0.0f;
    for (int b0 = 0; b0 < n; b0 += m->cfg.micro_batch) {
        int B = n - b0 < m->cfg.micro_batch ? n - b0 : m->cfg.micro_batch;
        const float *losses = m->arch->forward(m, m->params, tokens + (size_t)b0 * t, targets + (size_t)b0 * t, B, t);
        total = tr_add_losses(total, losses, B * t);
    }
    *loss = trk_loss_mean(total, trk_loss_count(targets, (size_t)n * t));
    return TR_OK;
}

int tr_logits(tr_model *m, const int32_t *tokens, int n, int t, float *out) {
    int rc = tr_check_batch(m, tokens, tokens, n, t);
    if (rc) return rc;
    if (!out) return TR_EINVAL;
    if ((rc = tr_cpu_ready(m)) || (rc = tr_host_read(m, TR_BUF_PARAMS))) return rc;
    int V = m->cfg.vocab, Vp = m->cfg.padded_vocab;
    for (int b0 = 0; b0 < n; b0 += m->cfg.micro_batch) {
        int B = n - b0 < m->cfg.micro_batch ? n - b0 : m->cfg.micro_batch;
        const int32_t *tok = tokens + (size_t)b0 * t;
        // The targets only feed the loss, which is not returned: the tokens stand in.
        m->arch->forward(m, m->params, tok, tok, B, t);
        const float *logits;
        if (tr_is_llama(&m->cfg)) {
            tr_llama_acts a;
            tr_llama_act_layout(&m->cfg, B, t, m->act_mem, &a);
            logits = a.logits;
        } else {
            tr_acts a;
            tr_act_layout(&m->cfg, B, t, m->act_mem, &a);
            logits = a.logits;
        }
        for (size_t r = 0; r < (size_t)B * t; r++)
            memcpy(out + ((size_t)b0 * t + r) * V, logits + r * Vp, sizeof(float) * V);
    }
    return TR_OK;
}

int tr_get_grads(tr_model *m, float *out, size_t len) {
    if (!m || !out || len != m->num_params) return TR_EINVAL;
    if (!m->have_grads) return TR_ENOGRAD;
    int rc = tr_host_read(m, TR_BUF_GRADS);
    if (rc) return rc;
    memcpy(out, m->grads, sizeof(float) * len);
    return TR_OK;
}

int tr_get_params(tr_model *m, float *out, size_t len) {
    if (!m || !out || len != m->num_params) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_PARAMS);
    if (rc) return rc;
    memcpy(out, m->params, sizeof(float) * len);
    return TR_OK;
}

int tr_set_params(tr_model *m, const float *in, size_t len) {
    if (!m || !in || len != m->num_params) return TR_EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!(in[i] - in[i] == 0.0f)) return TR_EINVAL; // NaN or Inf
    tr_host_replace(m, TR_BUF_PARAMS);
    memcpy(m->params, in, sizeof(float) * len);
    m->lookahead_on = 0;
    m->have_grads = 0;
    m->in_round = 0; // new weights end a SparseLoCo round
    return TR_OK;
}

int tr_host_read(tr_model *m, unsigned bufs) {
    unsigned need = m->host_stale & bufs;
    if (!need) return TR_OK;
    int rc = m->dev_download(m, need);
    if (rc == TR_OK) m->host_stale &= ~need;
    return rc;
}

int tr_host_write(tr_model *m, unsigned bufs) {
    int rc = tr_host_read(m, bufs);
    if (rc == TR_OK) tr_host_replace(m, bufs);
    return rc;
}

void tr_host_replace(tr_model *m, unsigned bufs) {
    m->host_stale &= ~bufs;
    if (m->dev) m->dev_stale |= bufs;
}

int tr_num_tensors(const tr_model *m) { return m ? m->ntensors : 0; }

int tr_tensor_info(const tr_model *m, int i, const char **name, int *ndim, int shape[3], size_t *offset) {
    if (!m || i < 0 || i >= m->ntensors || !name || !ndim || !shape || !offset) return TR_EINVAL;
    *name = tr_param_name(&m->cfg, i);
    *ndim = tr_param_shape(&m->cfg, i, shape);
    *offset = m->offsets[i];
    return TR_OK;
}

int tr_config_shape(const tr_config *c, int i, int shape[3]) {
    if (!c || !shape || tr_config_check(c)) return 0;
    return tr_param_shape(c, i, shape);
}

int tr_activations(const tr_model *m, float *out, size_t len) {
    if (!m || !out || !m->act_mem || len > tr_act_floats(&m->cfg, m->cfg.micro_batch, m->cfg.seq_len, 0)) return TR_EINVAL;
    memcpy(out, m->act_mem, sizeof(float) * len);
    return TR_OK;
}

int tr_gemm(tr_model *m, int arith, int mx_slices, int M, int N, int K, const float *a, const float *b, float *out) {
    if (!m || !a || !b || !out || M < 1 || N < 1 || K < 1 || (arith != TR_ARITH_FP32 && arith != TR_ARITH_MX8) ||
        mx_slices < 0 || mx_slices > (TR_MX_SLICE_A | TR_MX_SLICE_B) || (mx_slices && arith != TR_ARITH_MX8))
        return TR_EINVAL;
    tr_gemm_args g = {M, N, K, a, K, b, K, out, N, NULL, 0, 0, 0, mx_slices};
    if (arith == TR_ARITH_FP32) {
        tr_gemm_run(&g, m->isa, m->nthreads, m->pack_buf);
        return TR_OK;
    }
    size_t kp = tr_mx_kpad((size_t)K) * TR_MX_PARTS(mx_slices), need = tr_mx_scratch_bytes(tr_mx_rows((size_t)M) * kp, tr_mx_rows((size_t)N) * kp);
    if (need > m->mx_scratch_bytes) { // an fp32 model's, or shapes beyond the model's
        void *p = realloc(m->mx_scratch, need);
        if (!p) return TR_ENOMEM;
        m->mx_scratch = p;
        m->mx_scratch_bytes = need;
    }
    return tr_mx_gemm_run(&g, K, m->isa, m->nthreads, m->mx_scratch, m->mx_scratch_bytes);
}

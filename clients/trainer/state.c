// state.c: the full trainer state as one canonical blob, for checkpoints,
// audit restore and the per-step digest.
//
// Format, little-endian (version 1 for GPT-2, 2 for Llama, 3 for a Llama
// whose RMSNorm epsilon or rotary scaling is not the default, 4 for a Llama
// with q/k/v biases; each the oldest that can say what the model is, so a
// model writes the blobs it always wrote):
//   "PSYS" | u32 version | u32 vocab, padded_vocab, layers, channels, heads, seq_len
//   | u64 step | u64 adam_t | f32 demo_lr | u32 flags (bit 0: AdamW m,v; bit 1: DeMo delta;
//   bit 2: DeMo lookahead on; bit 3: numeric contract v3, mx8, which the model must match; bit 4: DeMo
//   pending update) | versions 2 and 3: u32 arch=1, kv_heads, hidden, untied,
//   f32 rope_theta | version 3: f32 rms_eps, u32 rope_scaling, f32 rope_factor,
//   rope_low_freq, rope_high_freq, u32 rope_orig_ctx | version 4: u32 qkv_bias=1
//   | f32 params[N] | [f32 m[N],
//   f32 v[N]] | [f32 delta[N]] | [f32 pending[N]]

#include "internal.h"

#define TR_STATE_MAGIC "PSYS"
#define TR_STATE_HEADER_V1 56
#define TR_STATE_HEADER_V2 76
#define TR_STATE_HEADER_V3 100
#define TR_STATE_HEADER_V4 104
#define TR_STATE_SHAPE 18 // tr_state_shape's words
#define TR_STATE_ADAM 1u
#define TR_STATE_DELTA 2u
#define TR_STATE_LOOKAHEAD 4u
#define TR_STATE_MX8 8u
#define TR_STATE_PENDING 16u

static uint32_t tr_state_flags(const tr_model *m) {
    return (m->adam_m ? TR_STATE_ADAM : 0) | (m->delta ? TR_STATE_DELTA : 0) | (m->lookahead_on ? TR_STATE_LOOKAHEAD : 0) |
           (m->cfg.arith == TR_ARITH_MX8 ? TR_STATE_MX8 : 0) | (m->pending ? TR_STATE_PENDING : 0);
}

// Whether a Llama's knobs differ from the ones version 2 implies.
static int tr_state_knobs(const tr_config *c) { return tr_rms_eps(c) != TR_RMS_EPS_DEFAULT || c->rope_scaling != TR_ROPE_PLAIN; }

static uint32_t tr_state_version(const tr_model *m) {
    return !tr_is_llama(&m->cfg) ? 1 : m->cfg.qkv_bias ? 4 : tr_state_knobs(&m->cfg) ? 3 : 2;
}

static size_t tr_state_header_len(const tr_model *m) {
    static const size_t len[5] = {0, TR_STATE_HEADER_V1, TR_STATE_HEADER_V2, TR_STATE_HEADER_V3, TR_STATE_HEADER_V4};
    return len[tr_state_version(m)];
}

// Words of tr_state_shape after the first 6 that the header holds.
static int tr_state_extra(const tr_model *m) { return (int)(tr_state_header_len(m) - TR_STATE_HEADER_V1) / 4; }

static size_t tr_state_bytes(const tr_model *m, uint32_t flags) {
    size_t n = 1 + ((flags & TR_STATE_ADAM) ? 2 : 0) + ((flags & TR_STATE_DELTA) ? 1 : 0) + ((flags & TR_STATE_PENDING) ? 1 : 0);
    return tr_state_header_len(m) + 4 * n * m->num_params;
}

// The header fields that pin the model: dimensions, the Llama fields, and
// its knobs (versions 3 and 4).
static void tr_state_shape(const tr_config *c, uint32_t v[TR_STATE_SHAPE]) {
    int dims[10] = {c->vocab, c->padded_vocab, c->layers, c->channels, c->heads, c->seq_len, c->arch, c->kv_heads,
                    c->hidden, c->untied};
    for (int i = 0; i < 10; i++) v[i] = (uint32_t)dims[i];
    v[10] = tr_f2bits(c->rope_theta);
    v[11] = tr_f2bits(tr_rms_eps(c));
    v[12] = (uint32_t)c->rope_scaling;
    v[13] = tr_f2bits(c->rope_factor);
    v[14] = tr_f2bits(c->rope_low_freq);
    v[15] = tr_f2bits(c->rope_high_freq);
    v[16] = (uint32_t)c->rope_orig_ctx;
    v[17] = (uint32_t)c->qkv_bias;
}

int tr_state_size(const tr_model *m, size_t *size) {
    if (!m || !size) return TR_EINVAL;
    *size = tr_state_bytes(m, tr_state_flags(m));
    return TR_OK;
}

static void tr_put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t tr_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint8_t *tr_put_floats(uint8_t *p, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++, p += 4) tr_put_f32(p, f[i]);
    return p;
}

static void tr_state_put_header(const tr_model *m, uint8_t *out) {
    uint32_t v[TR_STATE_SHAPE];
    tr_state_shape(&m->cfg, v);
    memcpy(out, TR_STATE_MAGIC, 4);
    tr_put_u32(out + 4, tr_state_version(m));
    for (int i = 0; i < 6; i++) tr_put_u32(out + 8 + 4 * i, v[i]);
    tr_put_u64(out + 32, m->step);
    tr_put_u64(out + 40, m->adam_t);
    tr_put_f32(out + 48, m->demo_lr);
    tr_put_u32(out + 52, tr_state_flags(m));
    for (int i = 0; i < tr_state_extra(m); i++) tr_put_u32(out + TR_STATE_HEADER_V1 + 4 * i, v[6 + i]);
}

int tr_state_export(tr_model *m, uint8_t *out, size_t cap) {
    if (!m || !out) return TR_EINVAL;
    uint32_t flags = tr_state_flags(m);
    if (cap < tr_state_bytes(m, flags)) return TR_ESHORT;
    int rc = tr_host_read(m, TR_BUF_PARAMS | TR_BUF_ADAM | TR_BUF_DELTA | TR_BUF_PENDING);
    if (rc) return rc;
    tr_state_put_header(m, out);
    uint8_t *p = tr_put_floats(out + tr_state_header_len(m), m->params, m->num_params);
    if (flags & TR_STATE_ADAM) {
        p = tr_put_floats(p, m->adam_m, m->num_params);
        p = tr_put_floats(p, m->adam_v, m->num_params);
    }
    if (flags & TR_STATE_DELTA) p = tr_put_floats(p, m->delta, m->num_params);
    if (flags & TR_STATE_PENDING) tr_put_floats(p, m->pending, m->num_params);
    return TR_OK;
}

int tr_state_header(const tr_model *m, uint8_t *out, size_t cap, size_t *len) {
    if (!m || !out || !len) return TR_EINVAL;
    *len = tr_state_header_len(m);
    if (cap < *len) return TR_ESHORT;
    tr_state_put_header(m, out);
    return TR_OK;
}

// The float section is params, then [m, v], then [delta], then [pending]: float i of it.
int tr_state_floats(tr_model *m, size_t first, size_t count, uint8_t *out) {
    if (!m || !out) return TR_EINVAL;
    uint32_t flags = tr_state_flags(m);
    size_t N = m->num_params, total = (tr_state_bytes(m, flags) - tr_state_header_len(m)) / 4;
    if (first > total || count > total - first) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_PARAMS | TR_BUF_ADAM | TR_BUF_DELTA | TR_BUF_PENDING);
    if (rc) return rc;
    const float *parts[5] = {m->params, NULL, NULL, NULL, NULL};
    int np = 1;
    if (flags & TR_STATE_ADAM) { parts[np++] = m->adam_m; parts[np++] = m->adam_v; }
    if (flags & TR_STATE_DELTA) parts[np++] = m->delta;
    if (flags & TR_STATE_PENDING) parts[np++] = m->pending;
    for (size_t i = first; i < first + count; i++, out += 4) tr_put_f32(out, parts[i / N][i % N]);
    return TR_OK;
}

static int tr_floats_ok(const uint8_t *p, size_t n, int nonneg) {
    for (size_t i = 0; i < n; i++) {
        float f = tr_get_f32(p + 4 * i);
        if (!(f - f == 0.0f) || (nonneg && f < 0.0f)) return 0;
    }
    return 1;
}

static void tr_get_floats(float *dst, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = tr_get_f32(p + 4 * i);
}

int tr_state_import(tr_model *m, const uint8_t *in, size_t len) {
    if (!m || !in) return TR_EINVAL;
    size_t hl = tr_state_header_len(m);
    if (len < hl || memcmp(in, TR_STATE_MAGIC, 4) != 0 || tr_get_u32(in + 4) != tr_state_version(m)) return TR_ESTATE;
    uint32_t v[TR_STATE_SHAPE];
    tr_state_shape(&m->cfg, v);
    for (int i = 0; i < 6; i++)
        if (tr_get_u32(in + 8 + 4 * i) != v[i]) return TR_ESTATE;
    for (int i = 0; i < tr_state_extra(m); i++)
        if (tr_get_u32(in + TR_STATE_HEADER_V1 + 4 * i) != v[6 + i]) return TR_ESTATE;
    uint32_t flags = tr_get_u32(in + 52);
    if (flags & ~(TR_STATE_ADAM | TR_STATE_DELTA | TR_STATE_LOOKAHEAD | TR_STATE_MX8 | TR_STATE_PENDING)) return TR_ESTATE;
    if ((flags & TR_STATE_MX8) != (tr_state_flags(m) & TR_STATE_MX8)) return TR_ESTATE;
    if ((flags & TR_STATE_LOOKAHEAD) && !(flags & (TR_STATE_DELTA | TR_STATE_PENDING))) return TR_ESTATE;
    if (len != tr_state_bytes(m, flags)) return TR_ESTATE;
    float demo_lr = tr_get_f32(in + 48);
    if (!(demo_lr >= 0.0f && demo_lr < 1e6f)) return TR_ESTATE;
    size_t N = m->num_params;
    const uint8_t *p = in + hl;
    if (!tr_floats_ok(p, N, 0)) return TR_ESTATE;
    const uint8_t *pa = p + 4 * N, *pd = pa;
    if (flags & TR_STATE_ADAM) {
        if (!tr_floats_ok(pa, N, 0) || !tr_floats_ok(pa + 4 * N, N, 1)) return TR_ESTATE;
        pd = pa + 8 * N;
    }
    const uint8_t *pp = (flags & TR_STATE_DELTA) ? pd + 4 * N : pd;
    if ((flags & TR_STATE_DELTA) && !tr_floats_ok(pd, N, 0)) return TR_ESTATE;
    if ((flags & TR_STATE_PENDING) && !tr_floats_ok(pp, N, 0)) return TR_ESTATE;
    // Allocate everything first so a failure leaves the model unchanged.
    if ((flags & TR_STATE_ADAM) && tr_adam_alloc(m)) return TR_ENOMEM;
    if ((flags & TR_STATE_DELTA) && tr_delta_alloc(m)) return TR_ENOMEM;
    if ((flags & TR_STATE_PENDING) && tr_pending_alloc(m, 1)) return TR_ENOMEM;
    if ((flags & (TR_STATE_LOOKAHEAD | TR_STATE_PENDING)) && tr_lookahead_alloc(m)) return TR_ENOMEM;
    tr_host_replace(m, TR_BUF_PARAMS | TR_BUF_ADAM | TR_BUF_DELTA | TR_BUF_PENDING);
    tr_get_floats(m->params, p, N);
    if (flags & TR_STATE_ADAM) {
        tr_get_floats(m->adam_m, pa, N);
        tr_get_floats(m->adam_v, pa + 4 * N, N);
    } else {
        tr_adam_free(m);
    }
    if (flags & TR_STATE_DELTA) tr_get_floats(m->delta, pd, N);
    else { free(m->delta); m->delta = NULL; }
    if (flags & TR_STATE_PENDING) tr_get_floats(m->pending, pp, N);
    else tr_pending_alloc(m, 0);
    m->step = tr_get_u64(in + 32);
    m->adam_t = tr_get_u64(in + 40);
    m->demo_lr = demo_lr;
    m->have_grads = 0;
    m->in_round = 0;
    return tr_demo_refresh_lookahead(m, (flags & TR_STATE_LOOKAHEAD) != 0);
}

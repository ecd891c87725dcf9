// loco.c: SparseLoCo. A client runs H inner AdamW steps from the round's
// weights x0, then sends its pseudo-gradient x0 - x plus error feedback e
// (e = decay*e + x0 - x): each chunk's top-k entries of e by magnitude,
// quantised to value_bits with one scale per chunk, and e keeps what the
// quantised entries do not carry. Its weights go back to x0, and every client
// applies x0 - min(1, outer_lr / n) * (scatter-mean of the n accepted
// payloads), summed in one fixed client order, so replicas stay
// bit-identical. Chunks are DeMo's 2-D views (tr_chunk_layout) with no
// transform.
//
// Payload format v1, little-endian (README.md has the full spec):
//   header  "PL" | u8 version=1 | u8 value_bits (1, 2, 4, 8 or 32)
//   tensor  (16, parameter order) [f32 scale per chunk, value_bits < 32]
//           | bit stream, LSB first, zero-padded to a byte: per chunk, k
//             entries of (index: ceil(log2(chunk size)) bits, value: value_bits)
// A code q of b bits decodes to scale * (2q - L) / L with L = 2^b - 1; with
// 32 bits the value is the f32 itself.

#include "internal.h"

#define TR_LOCO_MAGIC "PL"
#define TR_LOCO_VERSION 1
#define TR_LOCO_HEADER 4
// A round's members fit the coordinator's u16 count.
#define TR_LOCO_MAX_MEMBERS 65535

int tr_loco_check(const tr_loco *hp) {
    if (!hp) return TR_EINVAL;
    int b = hp->value_bits;
    if (hp->chunk < 1 || hp->chunk > 256 || hp->topk < 1 || hp->topk > 65535 || !(b == 1 || b == 2 || b == 4 || b == 8 || b == 32))
        return TR_EINVAL;
    // Written as negations so NaN fails too.
    if (!(hp->outer_lr >= 0.0f && hp->outer_lr < 1e6f) || !(hp->decay >= 0.0f && hp->decay <= 1.0f)) return TR_EINVAL;
    if (hp->overlap != 0 && hp->overlap != 1) return TR_EINVAL;
    if (hp->members < 0 || hp->members > TR_LOCO_MAX_MEMBERS || (hp->overlap && hp->members < 1)) return TR_EINVAL;
    return TR_OK;
}

// Bits of an in-chunk index: enough for n-1.
static int tr_index_bits(const tr_demo_tensor *x) {
    uint64_t n = (uint64_t)x->cr * (uint64_t)x->cc;
    int b = 0;
    while (((uint64_t)1 << b) < n) b++;
    return b;
}

static size_t tr_loco_tensor_bytes(const tr_demo_tensor *x, int vb) {
    size_t e = x->nchunks * (size_t)x->k;
    size_t bits = e * (size_t)(tr_index_bits(x) + vb);
    return (vb < 32 ? 4 * x->nchunks : 0) + (bits + 7) / 8;
}

int tr_loco_payload_size(const tr_model *m, const tr_loco *hp, size_t *size) {
    if (!m || !size || tr_loco_check(hp)) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    size_t s = TR_LOCO_HEADER;
    for (int i = 0; i < nt; i++) s += tr_loco_tensor_bytes(&t[i], hp->value_bits);
    *size = s;
    return TR_OK;
}

static void tr_put_bits(uint8_t *p, size_t *pos, uint32_t v, int nb) {
    for (int i = 0; i < nb; i++, (*pos)++)
        if ((v >> i) & 1) p[*pos / 8] |= (uint8_t)(1u << (*pos % 8));
}

static uint32_t tr_get_bits(const uint8_t *p, size_t *pos, int nb) {
    uint32_t v = 0;
    for (int i = 0; i < nb; i++, (*pos)++) v |= (uint32_t)((p[*pos / 8] >> (*pos % 8)) & 1) << i;
    return v;
}

// The host's copies of the round-start buffers, allocated before either
// side fills them.
int tr_anchor_alloc(tr_model *m) {
    size_t N = m->num_params;
    if (!m->anchor && !(m->anchor = malloc(sizeof(float) * N))) return TR_ENOMEM;
    if (m->adam_m) {
        if (!m->anchor_m) m->anchor_m = malloc(sizeof(float) * N);
        if (!m->anchor_v) m->anchor_v = malloc(sizeof(float) * N);
        if (!m->anchor_m || !m->anchor_v) return TR_ENOMEM;
    }
    return TR_OK;
}

// The counters a round starts from and ends with (begin; generate and abort).
void tr_loco_started(tr_model *m) {
    m->anchor_moments = m->adam_m != NULL;
    // Inner steps train at the weights themselves, not at a DeMo lookahead.
    m->anchor_lookahead = m->lookahead_on;
    m->lookahead_on = 0;
    m->anchor_step = m->step;
    m->anchor_adam_t = m->adam_t;
    m->in_round = 1;
}

void tr_loco_ended(tr_model *m) {
    m->step = m->anchor_step;
    m->have_grads = 0;
    m->lookahead_on = 0;
    m->in_round = 0;
}

// After an outer step (apply): the step counter advances, the lookahead is off.
void tr_loco_applied(tr_model *m) {
    m->step++;
    m->have_grads = 0;
    m->lookahead_on = 0;
}

int tr_loco_begin(tr_model *m) {
    if (!m || m->in_round) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_PARAMS | TR_BUF_ADAM | TR_BUF_PENDING);
    if (rc || (rc = tr_anchor_alloc(m))) return rc;
    size_t N = m->num_params;
    tr_loco_started(m);
    tr_host_replace(m, TR_BUF_ANCHOR);
    memcpy(m->anchor, m->params, sizeof(float) * N);
    if (m->pending) { // the round trains from the anchor less it (it cannot change until generate)
        tr_host_replace(m, TR_BUF_PARAMS);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t i = 0; i < N; i++) m->params[i] = trk_loco_start(m->anchor[i], m->pending[i]);
    }
    if (m->anchor_moments) {
        memcpy(m->anchor_m, m->adam_m, sizeof(float) * N);
        memcpy(m->anchor_v, m->adam_v, sizeof(float) * N);
    }
    return TR_OK;
}

// The round-start weights and step counter back (generate and abort).
static int tr_loco_end(tr_model *m) {
    int rc = tr_host_read(m, TR_BUF_ANCHOR);
    if (rc) return rc;
    tr_host_replace(m, TR_BUF_PARAMS);
    memcpy(m->params, m->anchor, sizeof(float) * m->num_params);
    tr_loco_ended(m);
    return TR_OK;
}

int tr_loco_abort(tr_model *m) {
    if (!m || !m->in_round) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_ANCHOR);
    if (rc) return rc;
    if (m->anchor_moments) {
        tr_host_replace(m, TR_BUF_ADAM);
        memcpy(m->adam_m, m->anchor_m, sizeof(float) * m->num_params);
        memcpy(m->adam_v, m->anchor_v, sizeof(float) * m->num_params);
    } else {
        tr_adam_free(m);
    }
    m->adam_t = m->anchor_adam_t;
    if ((rc = tr_loco_end(m))) return rc;
    return tr_demo_refresh_lookahead(m, m->anchor_lookahead);
}

int tr_loco_generate_check(const tr_model *m, const tr_loco *hp, const uint8_t *out, size_t cap, const size_t *len) {
    if (!m || !out || !len || tr_loco_check(hp) || !m->in_round) return TR_EINVAL;
    size_t need;
    tr_loco_payload_size(m, hp, &need);
    return cap < need ? TR_ESHORT : TR_OK;
}

// The payload from the selected entries: per tensor the chunks' scales, then
// each entry's index and code.
size_t tr_loco_pack(const tr_model *m, const tr_loco *hp, const uint32_t *sel, const uint32_t *code, const float *scale,
                    uint8_t *out) {
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    int vb = hp->value_bits;
    size_t need;
    tr_loco_payload_size(m, hp, &need);
    memset(out, 0, need);
    memcpy(out, TR_LOCO_MAGIC, 2);
    out[2] = TR_LOCO_VERSION;
    out[3] = (uint8_t)vb;
    uint8_t *p = out + TR_LOCO_HEADER;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        if (vb < 32)
            for (size_t b = 0; b < x->nchunks; b++, p += 4) tr_put_f32(p, scale[b]);
        int ib = tr_index_bits(x);
        size_t pos = 0, ne = x->nchunks * (size_t)x->k;
        for (size_t i = 0; i < ne; i++) {
            tr_put_bits(p, &pos, sel[i], ib);
            tr_put_bits(p, &pos, code[i], vb);
        }
        p += (pos + 7) / 8;
        sel += ne;
        code += ne;
        scale += x->nchunks;
    }
    return (size_t)(p - out);
}

int tr_loco_generate(tr_model *m, const tr_loco *hp, uint8_t *out, size_t cap, size_t *len) {
    int rc = tr_loco_generate_check(m, hp, out, cap, len);
    if (rc) return rc;
    size_t N = m->num_params;
    if ((rc = tr_delta_alloc(m)) || (rc = tr_host_read(m, TR_BUF_PARAMS | TR_BUF_ANCHOR | TR_BUF_PENDING)) ||
        (rc = tr_host_write(m, TR_BUF_DELTA)))
        return rc;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    tr_chunk_sizes z = tr_chunk_totals(t, nt);
    size_t per = z.max_chunk;
    float *f = malloc(sizeof(float) * 2 * per * m->nthreads), *scale = malloc(sizeof(float) * z.chunks);
    uint32_t *u = malloc(sizeof(uint32_t) * 2 * per * m->nthreads), *sel = malloc(sizeof(uint32_t) * z.entries),
             *code = malloc(sizeof(uint32_t) * z.entries);
    if (!f || !scale || !u || !sel || !code) { rc = TR_ENOMEM; goto done; }

    // elementwise, so no order question; the round trained from the anchor,
    // or (shifted) from the anchor less the pending update
    float decay = hp->decay, *e = m->delta;
    const float *pend = m->pending;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < N; i++)
        e[i] = trk_loco_feedback(e[i], pend ? trk_loco_start(m->anchor[i], pend[i]) : m->anchor[i], m->params[i], decay);

    size_t first = 0, cfirst = 0; // the tensor's first entry and first chunk
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        int k = x->k;
        // chunks are disjoint, so they can go to different threads
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t b = 0; b < x->nchunks; b++) {
            int tid = omp_get_thread_num();
            float *blk = f + 2 * per * tid;
            scale[cfirst + b] = trk_loco_select(x, e + x->offset, b, hp->value_bits, blk, blk + per, u + 2 * per * tid,
                                                sel + first + b * k, code + first + b * k);
        }
        first += x->nchunks * k;
        cfirst += x->nchunks;
    }
    *len = tr_loco_pack(m, hp, sel, code, scale, out);
    if ((rc = tr_loco_end(m)) == TR_OK) rc = tr_loco_pending(m, hp, out, *len);
done:
    free(f); free(scale); free(u); free(sel); free(code);
    return rc;
}

// Checks one payload against this model and hp without touching any state.
// idx and val (entries of all tensors in payload order) are filled when not
// NULL. seen: scratch of the largest chunk's size, all zero on entry.
static int tr_loco_parse(const tr_demo_tensor *t, int nt, const tr_loco *hp, const uint8_t *p, size_t len,
                         uint32_t *idx, float *val, uint32_t *seen) {
    int vb = hp->value_bits;
    if (!p || len < TR_LOCO_HEADER || memcmp(p, TR_LOCO_MAGIC, 2) != 0 || p[2] != TR_LOCO_VERSION || p[3] != vb)
        return TR_EPAYLOAD;
    // The length is fixed by the model and hp: check it before reading entries.
    size_t want = TR_LOCO_HEADER;
    for (int ti = 0; ti < nt; ti++) want += tr_loco_tensor_bytes(&t[ti], vb);
    if (len != want) return TR_EPAYLOAD;
    const uint8_t *q = p + TR_LOCO_HEADER;
    size_t at = 0; // entry index across tensors
    uint32_t stamp = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        const uint8_t *scales = q, *bits = vb < 32 ? q + 4 * x->nchunks : q;
        if (vb < 32)
            for (size_t b = 0; b < x->nchunks; b++) {
                float s = tr_get_f32(scales + 4 * b);
                if (!(s >= 0.0f && s <= 1e30f)) return TR_EPAYLOAD;
            }
        uint32_t n = (uint32_t)x->cr * (uint32_t)x->cc;
        int ib = tr_index_bits(x);
        size_t pos = 0;
        for (size_t b = 0; b < x->nchunks; b++) {
            float s = vb < 32 ? tr_get_f32(scales + 4 * b) : 0.0f;
            if (++stamp == 0) { memset(seen, 0, sizeof(uint32_t) * n); stamp = 1; }
            for (int j = 0; j < x->k; j++, at++) {
                uint32_t ix = tr_get_bits(bits, &pos, ib), c = tr_get_bits(bits, &pos, vb);
                if (ix >= n || seen[ix] == stamp) return TR_EPAYLOAD;
                seen[ix] = stamp;
                float v = trk_loco_value(c, s, vb);
                if (!(v - v == 0.0f) || v > 1e30f || v < -1e30f) return TR_EPAYLOAD;
                if (idx) { idx[at] = ix; val[at] = v; }
            }
        }
        size_t nb = (pos + 7) / 8;
        if (pos % 8 && (bits[nb - 1] >> (pos % 8)) != 0) return TR_EPAYLOAD; // padding bits must be 0
        q += tr_loco_tensor_bytes(x, vb);
    }
    return TR_OK;
}

int tr_loco_validate(const tr_model *m, const tr_loco *hp, const uint8_t *p, size_t len) {
    if (!m || tr_loco_check(hp)) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    uint32_t *seen = calloc(tr_chunk_totals(t, nt).max_chunk, sizeof(uint32_t));
    if (!seen) return TR_ENOMEM;
    int rc = tr_loco_parse(t, nt, hp, p, len, NULL, NULL, seen);
    free(seen);
    return rc;
}

int tr_loco_decode(const tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n, uint32_t **idx,
                   float **val) {
    *idx = NULL;
    *val = NULL;
    if (!m || tr_loco_check(hp) || n < 0 || (n > 0 && (!payloads || !lens))) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    tr_chunk_sizes z = tr_chunk_totals(t, nt);
    size_t cnt = n > 0 ? (size_t)n : 1;
    uint32_t *seen = malloc(sizeof(uint32_t) * z.max_chunk);
    *idx = malloc(sizeof(uint32_t) * z.entries * cnt);
    *val = malloc(sizeof(float) * z.entries * cnt);
    int rc = seen && *idx && *val ? TR_OK : TR_ENOMEM;
    size_t off = 0;
    for (int c = 0; c < n && rc == TR_OK; c++) {
        memset(seen, 0, sizeof(uint32_t) * z.max_chunk);
        rc = tr_loco_parse(t, nt, hp, payloads + off, lens[c], *idx + (size_t)c * z.entries, *val + (size_t)c * z.entries, seen);
        off += lens[c];
    }
    free(seen);
    if (rc) {
        free(*idx); free(*val);
        *idx = NULL;
        *val = NULL;
    }
    return rc;
}

int tr_loco_pending(tr_model *m, const tr_loco *hp, const uint8_t *own, size_t len) {
    if (!hp->overlap) return tr_pending_alloc(m, 0);
    uint32_t *idx;
    float *val;
    int rc = tr_loco_decode(m, hp, own, &len, 1, &idx, &val);
    if (rc == TR_OK) rc = tr_pending_alloc(m, 1);
    if (rc == TR_OK) {
        tr_demo_tensor t[TR_MAX_TENSORS];
        const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
        const float rate = trk_loco_rate(hp->outer_lr, hp->members);
        tr_host_replace(m, TR_BUF_PENDING);
        memset(m->pending, 0, sizeof(float) * m->num_params);
        size_t first = 0;
        for (int ti = 0; ti < nt; ti++) {
            const tr_demo_tensor *x = &t[ti];
            float *p = m->pending + x->offset;
            for (size_t b = 0; b < x->nchunks; b++)
                for (int j = 0; j < x->k; j++) {
                    size_t ei = first + b * x->k + j;
                    p[trk_chunk_pos(x, b, idx[ei])] = trk_loco_share(val[ei], rate);
                }
            first += x->nchunks * x->k;
        }
    }
    free(idx); free(val);
    return rc;
}

int tr_loco_apply(tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n) {
    if (!m || m->in_round) return TR_EINVAL;
    uint32_t *idx, *cnt = NULL;
    float *val, *acc = NULL;
    // All payloads are checked before anything changes.
    int rc = tr_loco_decode(m, hp, payloads, lens, n, &idx, &val);
    if (rc || (rc = tr_host_write(m, TR_BUF_PARAMS))) goto done;
    if (n > 0) {
        tr_demo_tensor t[TR_MAX_TENSORS];
        const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
        tr_chunk_sizes z = tr_chunk_totals(t, nt);
        size_t N = m->num_params, first = 0;
        acc = calloc(N, sizeof(float));
        cnt = malloc(sizeof(uint32_t) * z.max_chunk * m->nthreads);
        if (!acc || !cnt) { rc = TR_ENOMEM; goto done; }
        for (int ti = 0; ti < nt; ti++) {
            const tr_demo_tensor *x = &t[ti];
            // Clients in the given order within each chunk; chunks are disjoint.
            #pragma omp parallel for schedule(static) num_threads(m->nthreads)
            for (size_t b = 0; b < x->nchunks; b++)
                trk_chunk_sum(acc + x->offset, x, b, n, idx + first, val + first, z.entries, cnt + z.max_chunk * omp_get_thread_num());
            first += x->nchunks * x->k;
        }
        float lr = trk_loco_rate(hp->outer_lr, n);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t i = 0; i < N; i++) m->params[i] = trk_loco_outer(m->params[i], acc[i], lr);
    }
    tr_loco_applied(m);
done:
    free(idx); free(val); free(acc); free(cnt);
    return rc;
}

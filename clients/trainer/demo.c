// demo.c: DeMo / DisTrO. Each client keeps a momentum delta, sends only the
// top-k chunked-DCT coefficients of it (optionally as signs only) and removes
// the selected coefficients from delta (error feedback). Every client then
// applies the scatter-mean of all accepted payloads, in one fixed client
// order, as a sign-SGD step, so replicas stay bit-identical.
//
// Payload format v2, little-endian (README.md has the full spec). Shapes,
// chunks, k and index widths follow from the model and hp, so only the
// entries travel:
//   header  "PD" | u8 version=2 | u8 flags (bit 0: one-bit values)
//   tensor  (16, parameter order) indices (nchunks*k, index_bytes each)
//           | values: one-bit: ceil(nchunks*k/8) bytes, LSB first, 1 = -1, 0 = +1; else nchunks*k f32

#include "internal.h"

#define TR_DEMO_MAGIC "PD"
#define TR_DEMO_VERSION 2
#define TR_DEMO_HEADER 4


int tr_demo_check(const tr_demo *hp) {
    if (!hp) return TR_EINVAL;
    if (hp->chunk < 1 || hp->chunk > TR_DEMO_MAX_CHUNK || hp->topk < 1 || hp->topk > 65535 || (hp->one_bit != 0 && hp->one_bit != 1) ||
        (hp->lookahead != 0 && hp->lookahead != 1) || (hp->overlap != 0 && hp->overlap != 1) || (hp->lookahead && hp->overlap))
        return TR_EINVAL;
    // Written as negations so NaN fails too.
    if (!(hp->lr >= 0.0f && hp->lr < 1e6f) || !(hp->decay >= 0.0f && hp->decay <= 1.0f) ||
        !(hp->weight_decay >= 0.0f && hp->weight_decay < 1e6f) || !(hp->clip_norm < 1e30f) || hp->clip_norm != hp->clip_norm)
        return TR_EINVAL;
    return TR_OK;
}

static size_t tr_demo_tensor_bytes(const tr_demo_tensor *t, int one_bit) {
    size_t e = t->nchunks * (size_t)t->k;
    return (one_bit ? (e + 7) / 8 : 4 * e) + e * (size_t)t->width;
}

int tr_demo_payload_size(const tr_model *m, const tr_demo *hp, size_t *size) {
    if (!m || !size || tr_demo_check(hp)) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    size_t s = TR_DEMO_HEADER;
    for (int i = 0; i < nt; i++) s += tr_demo_tensor_bytes(&t[i], hp->one_bit);
    *size = s;
    return TR_OK;
}

// ---------------------------------------------------------------------------
// Chunked orthonormal DCT-II. D[i][j] = s_i cos(pi (2j+1) i / 2n), s_0 = sqrt(1/n),
// s_i = sqrt(2/n). A chunk X (cr, cc) maps to Y = Dr X Dc^T and back with
// X = Dr^T Y Dc. Both products run through the deterministic GEMM over whole
// tensors: first along the columns of every chunk, then (on the transpose)
// along the rows, so the order of every sum is the GEMM's fixed order.

// trk_dct_table's D then D^T.
static float *tr_dct_build(int n) {
    float *d = malloc(sizeof(float) * 2 * (size_t)n * n);
    if (d) trk_dct_table(d, n);
    return d;
}

static const float *tr_dct_get(tr_model *m, int n) {
    if (!m->dct[n]) m->dct[n] = tr_dct_build(n);
    return m->dct[n];
}

// Rows per task of the chunk GEMMs below: enough work per task, enough tasks.
#define TR_DCT_ROWS 256

// out (R, cols) = chunked DCT (or inverse) of in (R, cols) with (cr, cc)
// chunks. s1, s2: scratch of R*cols floats; out must not alias in, s1 or s2.
// The many small products run as single-threaded GEMMs inside one parallel
// loop (one fork/join per stage instead of one per chunk column); splitting
// rows across tasks does not change any element's summation order.
static void tr_dct_tensor(tr_model *m, int R, int cols, int cr, int cc, const float *in, float *out,
                          float *s1, float *s2, int inverse) {
    size_t n = (size_t)R * cols;
    const float *z = in;
    if (cc > 1) {
        // Forward Z = X Dc^T: B rows are Dc rows. Inverse Z = Y Dc: B rows are Dc^T rows.
        const float *dc = m->dct[cc] + (inverse ? (size_t)cc * cc : 0);
        float *zb = cr > 1 ? s1 : out;
        int cblocks = cols / cc, rtasks = (R + TR_DCT_ROWS - 1) / TR_DCT_ROWS;
        #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
        for (int cb = 0; cb < cblocks; cb++)
            for (int rt = 0; rt < rtasks; rt++) {
                int r0 = rt * TR_DCT_ROWS, rows = R - r0 < TR_DCT_ROWS ? R - r0 : TR_DCT_ROWS;
                size_t o = (size_t)r0 * cols + (size_t)cb * cc;
                tr_gemm_args g = {rows, cc, cc, in + o, cols, dc, cc, zb + o, cols, NULL, 0, 0, 0};
                tr_gemm_run(&g, m->isa, 1, m->pack_buf + (size_t)omp_get_thread_num() * TR_GEMM_PACK);
            }
        z = zb;
    }
    if (cr == 1) {
        if (z != out) memcpy(out, z, sizeof(float) * n);
        return;
    }
    // Along rows on the transpose: Y^T = Z^T Dr^T (forward), X^T = Y^T Dr (inverse).
    const float *dr = m->dct[cr] + (inverse ? (size_t)cr * cr : 0);
    tr_transpose(m, s2, z, R, cols); // (cols, R)
    int rblocks = R / cr, ctasks = (cols + TR_DCT_ROWS - 1) / TR_DCT_ROWS;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(m->nthreads)
    for (int rb = 0; rb < rblocks; rb++)
        for (int ct = 0; ct < ctasks; ct++) {
            int c0 = ct * TR_DCT_ROWS, rows = cols - c0 < TR_DCT_ROWS ? cols - c0 : TR_DCT_ROWS;
            size_t o = (size_t)c0 * R + (size_t)rb * cr;
            tr_gemm_args g = {rows, cr, cr, s2 + o, R, dr, cr, s1 + o, R, NULL, 0, 0, 0};
            tr_gemm_run(&g, m->isa, 1, m->pack_buf + (size_t)omp_get_thread_num() * TR_GEMM_PACK);
        }
    tr_transpose(m, out, s1, cols, R);
}

static int tr_dct_hook(int rows, int cols, int chunk, const float *in, float *out, int inverse) {
    if (rows < 1 || cols < 1 || chunk < 1 || chunk > TR_DEMO_MAX_CHUNK || !in || !out) return TR_EINVAL;
    if ((size_t)rows * (size_t)cols > ((size_t)1 << 28)) return TR_EINVAL;
    int cr = tr_largest_divisor(rows, chunk), cc = tr_largest_divisor(cols, chunk);
    // A bare model carries the kernel, thread count and DCT cache.
    tr_model *m = calloc(1, sizeof *m);
    float *s = malloc(sizeof(float) * 2 * (size_t)rows * cols);
    int rc = TR_OK;
    if (!m || !s) { rc = TR_ENOMEM; goto done; }
    m->nthreads = 1;
    m->isa = tr_isa_pick(TR_ISA_AUTO);
    if (!(m->pack_buf = malloc(sizeof(float) * TR_GEMM_PACK))) { rc = TR_ENOMEM; goto done; }
    if (!tr_dct_get(m, cr) || !tr_dct_get(m, cc)) { rc = TR_ENOMEM; goto done; }
    tr_dct_tensor(m, rows, cols, cr, cc, in, out, s, s + (size_t)rows * cols, inverse);
done:
    if (m) {
        for (int i = 0; i < 257; i++) free(m->dct[i]);
        free(m->pack_buf);
    }
    free(m); free(s);
    return rc;
}

int tr_dct_forward(int rows, int cols, int chunk, const float *x, float *y) { return tr_dct_hook(rows, cols, chunk, x, y, 0); }
int tr_dct_inverse(int rows, int cols, int chunk, const float *y, float *x) { return tr_dct_hook(rows, cols, chunk, y, x, 1); }

// ---------------------------------------------------------------------------
// Sum of squares in fixed TRK_NORM_BLOCK-element blocks, blocks added in
// order (kernels.h, as the GPU's AdamW).
static int tr_grad_norm(tr_model *m, float *norm) {
    size_t nb = trk_norm_blocks(m->num_params);
    float *part = malloc(sizeof(float) * nb);
    if (!part) return TR_ENOMEM;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * TRK_NORM_BLOCK, n = m->num_params - i0;
        part[b] = trk_sumsq(m->grads + i0, n < TRK_NORM_BLOCK ? n : TRK_NORM_BLOCK);
    }
    int ok = trk_norm_finish(part, nb, norm);
    free(part);
    return ok ? TR_OK : TR_EINVAL; // NaN or Inf gradients
}

// Multiplier for the gradients: 1, or clip/norm when the norm exceeds clip.
int tr_grad_scale(tr_model *m, float clip, float *scale) {
    float norm;
    int rc = tr_grad_norm(m, &norm);
    if (rc) return rc;
    *scale = trk_clip_scale(norm, clip);
    return TR_OK;
}

static void tr_put_index(uint8_t *p, int width, uint32_t v) {
    if (width == 1) p[0] = (uint8_t)v;
    else if (width == 2) tr_put_u16(p, v);
    else tr_put_u32(p, v);
}

static uint32_t tr_get_index(const uint8_t *p, int width) {
    return width == 1 ? p[0] : width == 2 ? tr_get_u16(p) : tr_get_u32(p);
}

// Per-thread scratch for one chunk (f: trk_chunk_topk's blk and best; u:
// its ia, or trk_chunk_sum's counts), plus tensor-sized buffers kept in the
// model.
typedef struct {
    float *f;
    uint32_t *u;
    size_t per; // largest chunk
} tr_demo_scratch;

static int tr_demo_scratch_alloc(tr_model *m, const tr_demo_tensor *t, int nt, tr_demo_scratch *s) {
    tr_chunk_sizes z = tr_chunk_totals(t, nt);
    s->per = z.max_chunk;
    s->f = malloc(sizeof(float) * 2 * s->per * m->nthreads);
    s->u = malloc(sizeof(uint32_t) * 2 * s->per * m->nthreads);
    if (!s->f || !s->u) goto fail;
    if (m->demo_buf_len < z.max_tensor) {
        float *b = malloc(sizeof(float) * 4 * z.max_tensor);
        if (!b) goto fail;
        free(m->demo_buf);
        m->demo_buf = b;
        m->demo_buf_len = z.max_tensor;
    }
    for (int i = 0; i < nt; i++)
        if (!tr_dct_get(m, t[i].cr) || !tr_dct_get(m, t[i].cc)) goto fail;
    return TR_OK;
fail:
    free(s->f); free(s->u);
    s->f = NULL; s->u = NULL;
    return TR_ENOMEM;
}

int tr_demo_generate_check(const tr_model *m, const tr_demo *hp, const uint8_t *out, size_t cap, const size_t *len) {
    if (!m || !out || !len || tr_demo_check(hp)) return TR_EINVAL;
    if (!m->have_grads) return TR_ENOGRAD;
    size_t need;
    tr_demo_payload_size(m, hp, &need);
    return cap < need ? TR_ESHORT : TR_OK;
}

int tr_delta_alloc(tr_model *m) {
    if (m->delta) return TR_OK;
    if (!(m->delta = calloc(m->num_params, sizeof(float)))) return TR_ENOMEM;
    tr_host_replace(m, TR_BUF_DELTA); // a device has yet to see these zeros
    return TR_OK;
}

// The payload from the selected entries: per tensor the indices, then the
// signs or the values.
size_t tr_demo_pack(const tr_model *m, const tr_demo *hp, const uint32_t *idx, const float *val, uint8_t *out) {
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    memcpy(out, TR_DEMO_MAGIC, 2);
    out[2] = TR_DEMO_VERSION;
    out[3] = hp->one_bit ? 1 : 0;
    uint8_t *p = out + TR_DEMO_HEADER;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        size_t e = x->nchunks * x->k;
        for (size_t i = 0; i < e; i++, p += x->width) tr_put_index(p, x->width, idx[i]);
        if (hp->one_bit) {
            size_t nb = (e + 7) / 8;
            memset(p, 0, nb);
            for (size_t i = 0; i < e; i++)
                if (val[i] < 0) p[i / 8] |= (uint8_t)(1u << (i % 8));
            p += nb;
        } else {
            for (size_t i = 0; i < e; i++, p += 4) tr_put_f32(p, val[i]);
        }
        idx += e;
        val += e;
    }
    return (size_t)(p - out);
}

int tr_demo_generate(tr_model *m, const tr_demo *hp, uint8_t *out, size_t cap, size_t *len) {
    int rc = tr_demo_generate_check(m, hp, out, cap, len);
    if (rc) return rc;
    float gscale;
    if ((rc = tr_host_read(m, TR_BUF_GRADS)) || (rc = tr_grad_scale(m, hp->clip_norm, &gscale))) return rc;
    if ((rc = tr_delta_alloc(m)) || (rc = tr_host_write(m, TR_BUF_DELTA))) return rc;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    tr_demo_scratch s;
    if ((rc = tr_demo_scratch_alloc(m, t, nt, &s))) return rc;
    size_t entries = tr_chunk_totals(t, nt).entries;
    uint32_t *sel_idx = malloc(sizeof(uint32_t) * entries);
    float *sel_val = malloc(sizeof(float) * entries);
    if (!sel_idx || !sel_val) { rc = TR_ENOMEM; goto done; }
    float *Y = m->demo_buf, *S1 = Y + m->demo_buf_len, *S2 = S1 + m->demo_buf_len, *E = S2 + m->demo_buf_len;

    // elementwise, so no order question
    float decay = hp->decay, lrs = hp->lr * gscale;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < m->num_params; i++) m->delta[i] = trk_demo_momentum(m->delta[i], m->grads[i], decay, lrs);

    size_t first = 0; // the tensor's first entry
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        float *delta = m->delta + x->offset;
        uint32_t *si = sel_idx + first;
        float *sv = sel_val + first;
        size_t numel = (size_t)x->rows * x->cols;
        int k = x->k;
        // 1. transform, then select each chunk's top-k
        tr_dct_tensor(m, x->rows, x->cols, x->cr, x->cc, delta, Y, S1, S2, 0);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t b = 0; b < x->nchunks; b++) {
            int tid = omp_get_thread_num();
            float *blk = s.f + 2 * s.per * tid;
            trk_demo_select(x, Y, b, blk, blk + s.per, s.u + 2 * s.per * tid, si + b * k, sv + b * k);
        }
        // 2. error feedback: remove the selected coefficients at full precision,
        //    as the reference does. (Removing the quantised values instead,
        //    i.e. keeping the quantisation error in delta, stalled training:
        //    light, 4 clients, top-8, 150 steps: loss 3.12 against 1.38.)
        memset(Y, 0, sizeof(float) * numel);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t b = 0; b < x->nchunks; b++) trk_chunk_put(Y, x, b, si + b * k, sv + b * k);
        tr_dct_tensor(m, x->rows, x->cols, x->cr, x->cc, Y, E, S1, S2, 1);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t i = 0; i < numel; i++) delta[i] -= E[i];
        first += x->nchunks * k;
    }
    *len = tr_demo_pack(m, hp, sel_idx, sel_val, out);
    m->have_grads = 0;
    int had = m->pending != NULL;
    if ((rc = tr_demo_pending(m, hp, out, *len)) == TR_OK && (had || m->pending))
        rc = tr_demo_refresh_lookahead(m, m->pending != NULL);
done:
    free(s.f); free(s.u); free(sel_idx); free(sel_val);
    return rc;
}

// Checks one payload against this model and hp without touching any state;
// its entries go to idx and val (payload order) when they are not NULL.
// seen: scratch of the largest chunk's size, all zero on entry (it is left
// dirty).
static int tr_demo_parse(const tr_demo_tensor *t, int nt, const tr_demo *hp, const uint8_t *p, size_t len, uint32_t *idx,
                         float *val, uint32_t *seen) {
    if (!p || len < TR_DEMO_HEADER || memcmp(p, TR_DEMO_MAGIC, 2) != 0 || p[2] != TR_DEMO_VERSION) return TR_EPAYLOAD;
    if (p[3] != (hp->one_bit ? 1 : 0)) return TR_EPAYLOAD;
    // The length is fixed by the model and hp: check it before reading entries.
    size_t want = TR_DEMO_HEADER;
    for (int ti = 0; ti < nt; ti++) want += tr_demo_tensor_bytes(&t[ti], hp->one_bit);
    if (len != want) return TR_EPAYLOAD;
    size_t off = TR_DEMO_HEADER;
    uint32_t stamp = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        size_t e = x->nchunks * x->k;
        const uint8_t *ip = p + off;
        uint32_t n = (uint32_t)x->cr * (uint32_t)x->cc;
        // Indices in range and distinct within each chunk (stamp per chunk).
        for (size_t b = 0; b < x->nchunks; b++) {
            stamp++;
            if (stamp == 0) { memset(seen, 0, sizeof(uint32_t) * n); stamp = 1; }
            for (int j = 0; j < x->k; j++) {
                size_t ei = b * x->k + j;
                uint32_t ix = tr_get_index(ip + ei * x->width, x->width);
                if (ix >= n || seen[ix] == stamp) return TR_EPAYLOAD;
                seen[ix] = stamp;
                if (idx) idx[ei] = ix;
            }
        }
        const uint8_t *vp = ip + e * x->width;
        if (hp->one_bit) {
            size_t nb = (e + 7) / 8;
            if (e % 8 && (vp[nb - 1] >> (e % 8)) != 0) return TR_EPAYLOAD; // padding bits must be 0
            // 1 - 2*bit, as the reference decodes, no scale
            for (size_t i = 0; val && i < e; i++) val[i] = (vp[i / 8] >> (i % 8)) & 1 ? -1.0f : 1.0f;
        } else {
            for (size_t i = 0; i < e; i++) {
                float f = tr_get_f32(vp + 4 * i);
                if (!(f - f == 0.0f) || f > 1e30f || f < -1e30f) return TR_EPAYLOAD;
                if (val) val[i] = f;
            }
        }
        if (idx) { idx += e; val += e; }
        off += tr_demo_tensor_bytes(x, hp->one_bit);
    }
    return TR_OK;
}

int tr_demo_validate(const tr_model *m, const tr_demo *hp, const uint8_t *p, size_t len) {
    if (!m || tr_demo_check(hp)) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    uint32_t *seen = calloc(tr_chunk_totals(t, nt).max_chunk, sizeof(uint32_t));
    if (!seen) return TR_ENOMEM;
    int rc = tr_demo_parse(t, nt, hp, p, len, NULL, NULL, seen);
    free(seen);
    return rc;
}

int tr_demo_decode(const tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n, uint32_t **idx,
                   float **val) {
    *idx = NULL;
    *val = NULL;
    if (!m || tr_demo_check(hp) || n < 0 || (n > 0 && (!payloads || !lens))) return TR_EINVAL;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    tr_chunk_sizes z = tr_chunk_totals(t, nt);
    size_t cnt = n > 0 ? (size_t)n : 1;
    uint32_t *seen = calloc(z.max_chunk, sizeof(uint32_t));
    *idx = malloc(sizeof(uint32_t) * z.entries * cnt);
    *val = malloc(sizeof(float) * z.entries * cnt);
    int rc = seen && *idx && *val ? TR_OK : TR_ENOMEM;
    size_t off = 0;
    for (int c = 0; c < n && rc == TR_OK; c++) {
        if (c > 0) memset(seen, 0, sizeof(uint32_t) * z.max_chunk);
        rc = tr_demo_parse(t, nt, hp, payloads + off, lens[c], *idx + (size_t)c * z.entries, *val + (size_t)c * z.entries, seen);
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

int tr_lookahead_wanted(const tr_model *m, int on) { return on && (m->pending || m->delta) && m->lookahead; }

// The forward point of the next step: x - lr*sign(src), where this client's
// own pending update leads: the update its payload asks for while that
// payload awaits its apply (overlap), else the momentum (lookahead). lr is
// the last apply's. Derived state: recomputed, never exported.
int tr_demo_refresh_lookahead(tr_model *m, int on) {
    m->lookahead_on = 0;
    if (!tr_lookahead_wanted(m, on)) return TR_OK;
    int rc = tr_host_read(m, TR_BUF_PARAMS | (m->pending ? TR_BUF_PENDING : TR_BUF_DELTA));
    if (rc) return rc;
    tr_host_replace(m, TR_BUF_LOOKAHEAD);
    float lr = m->demo_lr;
    const float *src = m->pending ? m->pending : m->delta;
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t i = 0; i < m->num_params; i++) m->lookahead[i] = trk_lookahead(m->params[i], src[i], lr);
    m->lookahead_on = 1;
    return TR_OK;
}

// U of tensor x from n clients' decoded entries (client c's at idx, val +
// c*entries): the scatter-mean, inverse-transformed; what apply steps by
// the sign of. Uses the model's first three DeMo buffers; U must be none.
static void tr_demo_update(tr_model *m, const tr_demo_tensor *x, int n, const uint32_t *idx, const float *val, size_t entries,
                           const tr_demo_scratch *s, float *U) {
    float *Y = m->demo_buf, *S1 = Y + m->demo_buf_len, *S2 = S1 + m->demo_buf_len;
    memset(Y, 0, sizeof(float) * (size_t)x->rows * x->cols);
    // chunks are disjoint, so they can go to different threads
    #pragma omp parallel for schedule(static) num_threads(m->nthreads)
    for (size_t b = 0; b < x->nchunks; b++)
        trk_chunk_sum(Y, x, b, n, idx, val, entries, s->u + 2 * s->per * omp_get_thread_num());
    tr_dct_tensor(m, x->rows, x->cols, x->cr, x->cc, Y, U, S1, S2, 1);
}

int tr_demo_pending(tr_model *m, const tr_demo *hp, const uint8_t *own, size_t len) {
    if (!hp->overlap) return tr_pending_alloc(m, 0);
    uint32_t *idx;
    float *val;
    tr_demo_scratch s = {0};
    int rc = tr_demo_decode(m, hp, own, &len, 1, &idx, &val);
    if (rc) goto done;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    size_t entries = tr_chunk_totals(t, nt).entries, first = 0;
    if ((rc = tr_demo_scratch_alloc(m, t, nt, &s)) || (rc = tr_lookahead_alloc(m))) goto done;
    if ((rc = tr_pending_alloc(m, 1))) goto done;
    tr_host_replace(m, TR_BUF_PENDING);
    for (int ti = 0; ti < nt; ti++) {
        tr_demo_update(m, &t[ti], 1, idx + first, val + first, entries, &s, m->pending + t[ti].offset);
        first += t[ti].nchunks * t[ti].k;
    }
done:
    free(idx); free(val); free(s.f); free(s.u);
    return rc;
}

int tr_pending_alloc(tr_model *m, int on) {
    if (!on) {
        free(m->pending);
        m->pending = NULL;
        return TR_OK;
    }
    if (!m->pending) m->pending = malloc(sizeof(float) * m->num_params);
    return m->pending ? TR_OK : TR_ENOMEM;
}

int tr_lookahead_alloc(tr_model *m) {
    if (!m->lookahead) m->lookahead = malloc(sizeof(float) * m->num_params);
    return m->lookahead ? TR_OK : TR_ENOMEM;
}

int tr_demo_apply(tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n) {
    uint32_t *idx;
    float *val;
    tr_demo_scratch s = {0};
    // All payloads are checked before anything changes.
    int rc = tr_demo_decode(m, hp, payloads, lens, n, &idx, &val);
    if (rc) goto done;
    tr_demo_tensor t[TR_MAX_TENSORS];
    const int nt = tr_chunk_layout(&m->cfg, hp->chunk, hp->topk, t);
    size_t entries = tr_chunk_totals(t, nt).entries;
    if ((rc = tr_demo_scratch_alloc(m, t, nt, &s))) goto done;
    if ((hp->lookahead || m->pending) && (rc = tr_lookahead_alloc(m))) goto done;
    if ((rc = tr_host_write(m, TR_BUF_PARAMS))) goto done;
    float wdf = 1.0f - hp->lr * hp->weight_decay, lr = hp->lr, *U = m->demo_buf + 3 * m->demo_buf_len;
    size_t first = 0;
    for (int ti = 0; ti < nt; ti++) {
        const tr_demo_tensor *x = &t[ti];
        float *param = m->params + x->offset;
        size_t numel = (size_t)x->rows * x->cols;
        tr_demo_update(m, x, n, idx + first, val + first, entries, &s, U);
        #pragma omp parallel for schedule(static) num_threads(m->nthreads)
        for (size_t i = 0; i < numel; i++) param[i] = trk_demo_step(param[i], U[i], wdf, lr);
        first += x->nchunks * x->k;
    }
    m->demo_lr = lr;
    m->step++;
    rc = tr_demo_refresh_lookahead(m, hp->lookahead || m->pending);
done:
    free(idx); free(val); free(s.f); free(s.u);
    return rc;
}

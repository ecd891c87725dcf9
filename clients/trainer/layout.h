// layout.h: the models' memory layout, the one definition shared by the CPU
// path (C11 through cgo) and the CUDA path (cuda/model.cu, C++ through nvcc):
//   * the parameter tensors of each architecture (GPT-2, Llama): order in
//     the flat parameter (and gradient) array, names, shapes, sizes, offsets;
//   * the activations of one micro-batch and their gradients: order and
//     sizes of the buffers inside one allocation each.
// Both paths take their views from here, so a change to a model's layout is
// made once. The flat parameter order is part of the state blob, payload and
// checkpoint formats (README.md): append nothing and reorder nothing without a
// format version.
//
// Plain C that is also valid C++: X-macro lists and static inline functions,
// no designated initialisers, no compound literals. Sizes are integers, so the
// layout does not touch any floating-point result.
#ifndef TR_LAYOUT_H
#define TR_LAYOUT_H

#include <stddef.h>

#include "trainer.h"

// ----------------------------------------------------------------------------
// Parameter tensors, in storage order: X(name, ndim, d0, d1, d2), dimensions
// in terms of Vp (padded vocabulary), T (maximum sequence length, cfg.seq_len),
// L (layers), C (channels), KVD (key/value width, kv_heads * C/heads) and H
// (the SwiGLU width); unused dimensions are 0. Stacked per-layer tensors lead
// with L.
#define TR_PARAM_TENSORS(X)                                                       \
    X(wte, 2, Vp, C, 0)         /* token embedding, also the lm-head */          \
    X(wpe, 2, T, C, 0)          /* position embedding */                         \
    X(ln1w, 2, L, C, 0)                                                           \
    X(ln1b, 2, L, C, 0)                                                           \
    X(qkvw, 3, L, 3 * C, C)                                                       \
    X(qkvb, 2, L, 3 * C, 0)                                                       \
    X(attprojw, 3, L, C, C)     /* residual projection */                        \
    X(attprojb, 2, L, C, 0)                                                       \
    X(ln2w, 2, L, C, 0)                                                           \
    X(ln2b, 2, L, C, 0)                                                           \
    X(fcw, 3, L, 4 * C, C)                                                        \
    X(fcb, 2, L, 4 * C, 0)                                                        \
    X(fcprojw, 3, L, C, 4 * C)  /* residual projection */                        \
    X(fcprojb, 2, L, C, 0)                                                        \
    X(lnfw, 1, C, 0, 0)                                                           \
    X(lnfb, 1, C, 0, 0)

// Llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU. lmhead
// exists only when the config is untied, bq, bk and bv (Qwen2's q/k/v
// biases) only with qkv_bias: appended after the rest, so that the layout of
// a config without them is the one it always had.
#define TR_LLAMA_TENSORS(X)                                                       \
    X(wte, 2, Vp, C, 0)         /* token embedding (and lm-head when tied) */    \
    X(rms1w, 2, L, C, 0)                                                          \
    X(wq, 3, L, C, C)                                                             \
    X(wk, 3, L, KVD, C)                                                           \
    X(wv, 3, L, KVD, C)                                                           \
    X(wo, 3, L, C, C)           /* residual projection */                        \
    X(rms2w, 2, L, C, 0)                                                          \
    X(wgate, 3, L, H, C)                                                          \
    X(wup, 3, L, H, C)                                                            \
    X(wdown, 3, L, C, H)        /* residual projection */                        \
    X(rmsfw, 1, C, 0, 0)                                                          \
    X(lmhead, 2, Vp, C, 0)                                                        \
    X(bq, 2, L, C, 0)                                                             \
    X(bk, 2, L, KVD, 0)                                                           \
    X(bv, 2, L, KVD, 0)

// Tensor ids: TR_P_wte = 0, ..., TR_P_lnfb = 15 (GPT-2), each its storage
// index; TR_L_wte = 0, ..., TR_L_bv = 14 (Llama), whose storage index skips
// the absent ones (tr_llama_tensor_id).
enum {
#define TR_X_(name, nd, d0, d1, d2) TR_P_##name,
    TR_PARAM_TENSORS(TR_X_)
#undef TR_X_
    TR_NUM_TENSORS
};
enum {
#define TR_X_(name, nd, d0, d1, d2) TR_L_##name,
    TR_LLAMA_TENSORS(TR_X_)
#undef TR_X_
    TR_LLAMA_TENSORS_MAX
};
#define TR_MAX_TENSORS 16
typedef char tr_layout_max_tensors[TR_NUM_TENSORS <= TR_MAX_TENSORS && TR_LLAMA_TENSORS_MAX <= TR_MAX_TENSORS ? 1 : -1];

// Views into one flat parameter (or gradient) array, one pointer per tensor.
typedef struct {
#define TR_X_(name, nd, d0, d1, d2) float *name;
    TR_PARAM_TENSORS(TR_X_)
#undef TR_X_
} tr_params;

typedef struct {
#define TR_X_(name, nd, d0, d1, d2) float *name;
    TR_LLAMA_TENSORS(TR_X_)
#undef TR_X_
} tr_llama_params;

static inline int tr_is_llama(const tr_config *c) { return c->arch == TR_ARCH_LLAMA; }

// Number of parameter tensors of config c.
static inline int tr_tensor_count(const tr_config *c) {
    return tr_is_llama(c) ? TR_L_lmhead + (c->untied ? 1 : 0) + (c->qkv_bias ? 3 : 0) : TR_NUM_TENSORS;
}

// The Llama tensor id (TR_L_*) stored at index i (0 <= i < tr_tensor_count),
// and the index of id, -1 when c has no such tensor.
static inline int tr_llama_tensor_id(const tr_config *c, int i) { return i < TR_L_lmhead || c->untied ? i : i + 1; }
static inline int tr_llama_tensor_index(const tr_config *c, int id) {
    if (id < TR_L_lmhead) return id;
    if (id == TR_L_lmhead) return c->untied ? id : -1;
    return c->qkv_bias ? id - (c->untied ? 0 : 1) : -1;
}

// Layer l's n floats of per-layer tensor v, NULL when v is (an absent bias).
#define TR_LAYER(v, l, n) ((v) ? (v) + (size_t)(l) * (size_t)(n) : NULL)

// Llama's RMSNorm epsilon: the config's, 1e-5 when unset (runs written before it).
static inline float tr_rms_eps(const tr_config *c) { return c->rms_eps > 0.0f ? c->rms_eps : TR_RMS_EPS_DEFAULT; }

// Width of the keys (and of the values): kv_heads heads of C/heads.
static inline int tr_kv_dim(const tr_config *c) {
    return tr_is_llama(c) ? c->kv_heads * (c->channels / c->heads) : c->channels;
}

// Name of tensor i (the checkpoint's tensor name), "" when out of range.
static inline const char *tr_param_name(const tr_config *c, int i) {
    static const char *const gpt[TR_NUM_TENSORS] = {
#define TR_X_(name, nd, d0, d1, d2) #name,
        TR_PARAM_TENSORS(TR_X_)
#undef TR_X_
    };
    static const char *const llama[TR_LLAMA_TENSORS_MAX] = {
#define TR_X_(name, nd, d0, d1, d2) #name,
        TR_LLAMA_TENSORS(TR_X_)
#undef TR_X_
    };
    if (i < 0 || i >= tr_tensor_count(c)) return "";
    return tr_is_llama(c) ? llama[tr_llama_tensor_id(c, i)] : gpt[i];
}

// Shape of tensor i for config c: returns ndim (0 when i is out of range) and
// fills shape[0..2], unused dimensions 0.
static inline int tr_param_shape(const tr_config *c, int i, int shape[3]) {
    int Vp = c->padded_vocab, T = c->seq_len, L = c->layers, C = c->channels, KVD = tr_kv_dim(c), H = c->hidden;
    (void)T; (void)KVD; (void)H;
    shape[0] = shape[1] = shape[2] = 0;
    if (i < 0 || i >= tr_tensor_count(c)) return 0;
    if (tr_is_llama(c)) {
        switch (tr_llama_tensor_id(c, i)) {
#define TR_X_(name, nd, d0, d1, d2) \
    case TR_L_##name: shape[0] = d0; shape[1] = d1; shape[2] = d2; return nd;
            TR_LLAMA_TENSORS(TR_X_)
#undef TR_X_
        default: return 0;
        }
    }
    switch (i) {
#define TR_X_(name, nd, d0, d1, d2) \
    case TR_P_##name: shape[0] = d0; shape[1] = d1; shape[2] = d2; return nd;
        TR_PARAM_TENSORS(TR_X_)
#undef TR_X_
    default: return 0;
    }
}

// Element counts and offsets of the tensors in the flat array (either may be
// NULL; room for tr_tensor_count(c) each); returns the number of parameters.
static inline size_t tr_param_layout(const tr_config *c, size_t *sizes, size_t *offsets) {
    size_t off = 0;
    for (int i = 0; i < tr_tensor_count(c); i++) {
        int shape[3];
        int nd = tr_param_shape(c, i, shape);
        size_t n = 1;
        for (int d = 0; d < nd; d++) n *= (size_t)shape[d];
        if (sizes) sizes[i] = n;
        if (offsets) offsets[i] = off;
        off += n;
    }
    return off;
}

// The chunked 2-D views of the parameter tensors that DeMo and SparseLoCo
// select from: stacked per-layer matrices (L, OC, IC) are (L*OC, IC) with row
// chunks dividing OC, so that no chunk spans two layers; 2-D tensors
// (stacked vectors (L, n), wte, wpe) stay as they are, row chunks dividing
// their row count; 1-D tensors (C) are (1, C). Chunk edges are the largest
// divisors <= chunk of those row counts and of the columns.
typedef struct {
    int rows, cols;  // 2-D view of the parameter tensor
    int cr, cc;      // chunk edges
    int k;           // entries kept per chunk
    int width;       // DeMo index bytes: 1, 2 or 4
    size_t nchunks;
    size_t offset;   // into the flat parameter array
} tr_demo_tensor;

static inline int tr_largest_divisor(int n, int cap) {
    for (int d = cap < n ? cap : n; d > 1; d--)
        if (n % d == 0) return d;
    return 1;
}

// Fills t (room for TR_MAX_TENSORS) for chunk edge chunk and top-k topk;
// returns the number of tensors.
static inline int tr_chunk_layout(const tr_config *c, int chunk, int topk, tr_demo_tensor *t) {
    size_t offsets[TR_MAX_TENSORS];
    tr_param_layout(c, NULL, offsets);
    int nt = tr_tensor_count(c);
    for (int i = 0; i < nt; i++) {
        tr_demo_tensor *x = &t[i];
        int s[3], nd = tr_param_shape(c, i, s);
        int rpl; // row chunks divide this
        if (nd == 3) { x->rows = s[0] * s[1]; x->cols = s[2]; rpl = s[1]; }
        else if (nd == 2) { x->rows = s[0]; x->cols = s[1]; rpl = s[0]; }
        else { x->rows = 1; x->cols = s[0]; rpl = 1; }
        x->cr = tr_largest_divisor(rpl, chunk);
        x->cc = tr_largest_divisor(x->cols, chunk);
        int n = x->cr * x->cc;
        x->k = topk < n ? topk : n;
        x->width = n <= 256 ? 1 : n <= 65536 ? 2 : 4;
        x->nchunks = (size_t)(x->rows / x->cr) * (size_t)(x->cols / x->cc);
        x->offset = offsets[i];
    }
    return nt;
}

// Entries of all tensors (sum of nchunks * k), largest tensor and largest
// chunk (elements), and chunks of all tensors: the sizes of the buffers
// that hold a payload's entries or one tensor's work.
typedef struct {
    size_t entries, max_tensor, max_chunk, chunks;
} tr_chunk_sizes;

static inline tr_chunk_sizes tr_chunk_totals(const tr_demo_tensor *t, int nt) {
    tr_chunk_sizes z = {0, 0, 0, 0};
    for (int i = 0; i < nt; i++) {
        size_t numel = (size_t)t[i].rows * t[i].cols, n = (size_t)t[i].cr * t[i].cc;
        z.entries += t[i].nchunks * t[i].k;
        z.chunks += t[i].nchunks;
        if (numel > z.max_tensor) z.max_tensor = numel;
        if (n > z.max_chunk) z.max_chunk = n;
    }
    return z;
}

// Views of the tensors in the flat array at base (host or device memory).
// mx8 operands in two int8 slices (kernels.h, trk_mx_code2): the bits of
// tr_gemm_args.mx_slices, and the parts each block then runs as. The
// input-gradient GEMMs (dinp = dout W) take dout, their A, in two slices
// (README, "mx8 convergence"); every other operand takes one.
#define TR_MX_SLICE_A 1
#define TR_MX_SLICE_B 2
#define TR_MX_PARTS(s) (1 + ((s) & TR_MX_SLICE_A ? 1 : 0) + ((s) & TR_MX_SLICE_B ? 1 : 0))
#define TR_MX_DINP_SLICES TR_MX_SLICE_A

// Numeric contract v3 (mx8): the codes of the largest A and of the largest
// B operand among the model's linear GEMMs (forward; input gradient; weight
// gradient, whose K is the tokens, each sequence padded to whole blocks of
// 32; the input gradient's blocks in their TR_MX_PARTS), with a panel's
// worth of padding rows (tr_mx_rows): the scratch both backends quantize
// into.
static inline size_t tr_mx_rows(size_t rows) { return (rows + 31) / 32 * 32 + 32; }
static inline size_t tr_mx_kpad(size_t k) { return (k + 31) / 32 * 32; }
static inline void tr_mx_operand_codes(const tr_config *c, size_t *a, size_t *b) {
    size_t B = c->micro_batch, BT = B * c->seq_len, C = c->channels, Vp = c->padded_vocab, H = c->hidden;
    size_t tok = B * tr_mx_kpad(c->seq_len), kvd = tr_is_llama(c) ? (size_t)tr_kv_dim(c) : 0;
    size_t gpt[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};
    size_t llama[5][2] = {{C, C}, {C, kvd}, {C, H}, {H, C}, {C, Vp}};
    *a = *b = 0;
    for (int i = 0; i < 5; i++) {
        size_t ic = tr_is_llama(c) ? llama[i][0] : gpt[i][0], oc = tr_is_llama(c) ? llama[i][1] : gpt[i][1];
        size_t kd = tr_mx_kpad(oc) * TR_MX_PARTS(TR_MX_DINP_SLICES);
        size_t as[3] = {tr_mx_rows(BT) * tr_mx_kpad(ic), tr_mx_rows(BT) * kd, tr_mx_rows(oc) * tok};
        size_t bs[3] = {tr_mx_rows(oc) * tr_mx_kpad(ic), tr_mx_rows(ic) * kd, tr_mx_rows(ic) * tok};
        for (int j = 0; j < 3; j++) {
            if (as[j] > *a) *a = as[j];
            if (bs[j] > *b) *b = bs[j];
        }
    }
}

static inline tr_params tr_param_views(float *base, const size_t *offsets) {
    tr_params p;
#define TR_X_(name, nd, d0, d1, d2) p.name = base + offsets[TR_P_##name];
    TR_PARAM_TENSORS(TR_X_)
#undef TR_X_
    return p;
}

// The same for Llama; a tied lm-head is wte, absent biases NULL.
static inline tr_llama_params tr_llama_views(const tr_config *c, float *base, const size_t *offsets) {
    tr_llama_params p;
#define TR_X_(name, nd, d0, d1, d2) \
    p.name = tr_llama_tensor_index(c, TR_L_##name) >= 0 ? base + offsets[tr_llama_tensor_index(c, TR_L_##name)] : NULL;
    TR_LLAMA_TENSORS(TR_X_)
#undef TR_X_
    if (!c->untied) p.lmhead = p.wte;
    return p;
}

// ----------------------------------------------------------------------------
// Activations of one micro-batch of B sequences of length T (BT = B*T, NH
// heads), in allocation order: X(name, floats). Shapes: per-layer buffers lead
// with L, then (B, T, ...) rows; att is (L, B, NH, T, T), last, so that the
// GPU path, which keeps one layer's and recomputes each in backward, holds
// the same layout less L-1 layers of it (tr_gpu_act_floats).
#define TR_ACTS(X)                                                                \
    X(encoded, BT * C)          /* (B, T, C) wte[tok] + wpe[t] */                \
    X(ln1, L * BT * C)          /* (L, B, T, C) */                               \
    X(ln1_mean, L * BT)         /* (L, B, T) */                                  \
    X(ln1_rstd, L * BT)         /* (L, B, T) */                                  \
    X(qkv, L * BT * 3 * C)      /* (L, B, T, 3C) */                              \
    X(atty, L * BT * C)         /* (L, B, T, C) attention output */              \
    X(residual2, L * BT * C)    /* (L, B, T, C) */                               \
    X(ln2, L * BT * C)          /* (L, B, T, C) */                               \
    X(ln2_mean, L * BT)         /* (L, B, T) */                                  \
    X(ln2_rstd, L * BT)         /* (L, B, T) */                                  \
    X(fch, L * BT * 4 * C)      /* (L, B, T, 4C) */                              \
    X(fch_gelu, L * BT * 4 * C) /* (L, B, T, 4C) */                              \
    X(residual3, L * BT * C)    /* (L, B, T, C) */                               \
    X(lnf, BT * C)              /* (B, T, C) */                                  \
    X(lnf_mean, BT)             /* (B, T) */                                     \
    X(lnf_rstd, BT)             /* (B, T) */                                     \
    X(logits, BT * Vp)          /* (B, T, Vp) */                                 \
    X(probs, BT * Vp)           /* (B, T, Vp) */                                 \
    X(losses, BT)               /* (B, T) */                                     \
    X(att, L * B * NH * T * T)  /* (L, B, NH, T, T) softmax output */

// Llama (QKVD = C + 2 KVD: the q, k and v of a token, q and k rotated).
#define TR_LLAMA_ACTS(X)                                                          \
    X(encoded, BT * C)          /* (B, T, C) wte[tok] */                         \
    X(rms1, L * BT * C)         /* (L, B, T, C) */                               \
    X(rms1_rstd, L * BT)        /* (L, B, T) */                                  \
    X(qkv, L * BT * QKVD)       /* (L, B, T, QKVD) */                            \
    X(atty, L * BT * C)         /* (L, B, T, C) attention output */              \
    X(residual2, L * BT * C)    /* (L, B, T, C) */                               \
    X(rms2, L * BT * C)         /* (L, B, T, C) */                               \
    X(rms2_rstd, L * BT)        /* (L, B, T) */                                  \
    X(gate, L * BT * H)         /* (L, B, T, H) */                               \
    X(up, L * BT * H)           /* (L, B, T, H) */                               \
    X(hmid, L * BT * H)         /* (L, B, T, H) silu(gate) * up */               \
    X(residual3, L * BT * C)    /* (L, B, T, C) */                               \
    X(rmsf, BT * C)             /* (B, T, C) */                                  \
    X(rmsf_rstd, BT)            /* (B, T) */                                     \
    X(logits, BT * Vp)          /* (B, T, Vp) */                                 \
    X(probs, BT * Vp)           /* (B, T, Vp) */                                 \
    X(losses, BT)               /* (B, T) */                                     \
    X(att, L * B * NH * T * T)  /* (L, B, NH, T, T) softmax output */

// Gradients of activations, reused layer after layer during backward.
#define TR_DACTS(X)                                                               \
    X(dres, BT * C)             /* (B, T, C) gradient of the residual stream */  \
    X(dln, BT * C)              /* (B, T, C) */                                  \
    X(datty, BT * C)            /* (B, T, C) */                                  \
    X(dqkv, BT * 3 * C)         /* (B, T, 3C) */                                 \
    X(dfch, BT * 4 * C)         /* (B, T, 4C) */                                 \
    X(dfch_gelu, BT * 4 * C)    /* (B, T, 4C) */                                 \
    X(dlogits, BT * Vp)         /* (B, T, Vp) */

#define TR_LLAMA_DACTS(X)                                                         \
    X(dres, BT * C)             /* (B, T, C) gradient of the residual stream */  \
    X(dln, BT * C)              /* (B, T, C) */                                  \
    X(datty, BT * C)            /* (B, T, C) */                                  \
    X(dqkv, BT * QKVD)          /* (B, T, QKVD) */                               \
    X(dgate, BT * H)            /* (B, T, H) */                                  \
    X(dup, BT * H)              /* (B, T, H) */                                  \
    X(dhmid, BT * H)            /* (B, T, H) */                                  \
    X(dlogits, BT * Vp)         /* (B, T, Vp) */

typedef struct {
#define TR_X_(name, n) float *name;
    TR_ACTS(TR_X_)
#undef TR_X_
} tr_acts;

typedef struct {
#define TR_X_(name, n) float *name;
    TR_DACTS(TR_X_)
#undef TR_X_
} tr_dacts;

typedef struct {
#define TR_X_(name, n) float *name;
    TR_LLAMA_ACTS(TR_X_)
#undef TR_X_
} tr_llama_acts;

typedef struct {
#define TR_X_(name, n) float *name;
    TR_LLAMA_DACTS(TR_X_)
#undef TR_X_
} tr_llama_dacts;

// The dimension names the lists above use, for config c and batch x seq
// (not every list uses all of them).
#define TR_DIM_ __attribute__((unused)) size_t
#define TR_DIMS_(c, batch, seq)                                                                         \
    TR_DIM_ L = (c)->layers, C = (c)->channels, NH = (c)->heads, Vp = (c)->padded_vocab;              \
    TR_DIM_ B = (size_t)(batch), T = (size_t)(seq), BT = B * T, H = (size_t)(c)->hidden;              \
    TR_DIM_ QKVD = C + 2 * (size_t)tr_kv_dim(c)

// tr_act_layout, tr_dact_layout, tr_llama_act_layout, tr_llama_dact_layout:
// the floats of one list's buffers for batch sequences of length seq; when
// the views are not NULL, also points them into base (host or device memory).
#define TR_LAYOUT_FN_(fn, views, list)                                                       \
    static inline size_t fn(const tr_config *c, int batch, int seq, float *base, views *v) { \
        TR_DIMS_(c, batch, seq);                                                             \
        size_t off = 0;                                                                      \
        list(TR_X_)                                                                          \
        return off;                                                                          \
    }
#define TR_X_(name, n) if (v) v->name = base + off; off += (n);
TR_LAYOUT_FN_(tr_act_layout, tr_acts, TR_ACTS)
TR_LAYOUT_FN_(tr_dact_layout, tr_dacts, TR_DACTS)
TR_LAYOUT_FN_(tr_llama_act_layout, tr_llama_acts, TR_LLAMA_ACTS)
TR_LAYOUT_FN_(tr_llama_dact_layout, tr_llama_dacts, TR_LLAMA_DACTS)
#undef TR_X_
#undef TR_LAYOUT_FN_

// Gradient shards (README "Shards"): a step's n sequences fall into S =
// tr_shards(c) token shards, shard i holding sequences tr_shard_first(n, S,
// i) up to tr_shard_first(n, S, i + 1). Each shard's gradients and loss are
// chains over its tokens in order from zero (across micro-batches, which
// never cross a shard's edge). The shards join by the balanced binary tree of
// S leaves, built left to right: after leaf i, tr_tree_merges(i) times, the
// top two partial sums become left + right. S/D leaves from a multiple of
// S/D are one subtree, so D devices each build theirs and join them by the
// same rule: the same bits for every D dividing S. A stack of
// tr_shard_levels(S) partial sums holds the tree.
static inline int tr_shards(const tr_config *c) { return c->grad_shards > 1 ? c->grad_shards : 1; }
static inline int tr_shard_first(int n, int shards, int i) { return (int)((long long)i * n / shards); }
static inline int tr_tree_merges(int i) {
    int k = 0;
    for (unsigned v = (unsigned)i + 1; !(v & 1u); v >>= 1) k++;
    return k;
}
static inline int tr_shard_levels(int shards) { return tr_tree_merges(shards - 1) + 1; }

// Attention's rows in one micro-batch, (B, NH, T): the GPU path's backward
// keeps one layer's score gradients, (B, NH, T, T), and row scratch of
// this many rows (cuda/model.cu, trg_create).
static inline size_t tr_att_rows(const tr_config *c) { return (size_t)c->micro_batch * c->heads * c->seq_len; }

// Floats of either architecture's activations (gradients when grads).
static inline size_t tr_act_floats(const tr_config *c, int batch, int seq, int grads) {
    if (tr_is_llama(c))
        return grads ? tr_llama_dact_layout(c, batch, seq, NULL, NULL) : tr_llama_act_layout(c, batch, seq, NULL, NULL);
    return grads ? tr_dact_layout(c, batch, seq, NULL, NULL) : tr_act_layout(c, batch, seq, NULL, NULL);
}

// The GPU path's activations: the layout less all but one layer of att,
// the layer whose probabilities forward or backward last computed (backward
// recomputes each layer's before its attention backward, the same bits).
static inline size_t tr_gpu_act_floats(const tr_config *c, int batch, int seq) {
    return tr_act_floats(c, batch, seq, 0) - (size_t)(c->layers - 1) * batch * c->heads * seq * seq;
}

#endif

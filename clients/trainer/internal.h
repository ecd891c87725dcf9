// internal.h: what the trainer's C files share: the model struct, the GEMM
// entry point and small helpers. Not part of the API (that is trainer.h).
#ifndef TR_INTERNAL_H
#define TR_INTERNAL_H

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "layout.h"
#include "trainer.h"

#define TR_MAX_THREADS 256

// The CPU layers of one ISA level (layers.c); shapes as in gpt.c.
typedef struct {
    void (*ln_forward)(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int r0,
                       int r1, int C);
    void (*ln_backward)(float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
                        const float *rstd, int r0, int r1, int C);
    void (*ln_dw)(float *dw, float *db, const float *dout, const float *inp, const float *mean, const float *rstd, int N,
                  int C, int c0, int c1);
    void (*bias_backward)(float *dbias, const float *dout, int ld, int BT, int o0, int o1);
    void (*gelu_forward)(float *out, const float *x, size_t n);
    void (*gelu_backward)(float *dinp, const float *x, const float *dout, size_t n);
    void (*attention_forward)(float *out, float *att, const float *qkv, float *kt, int b, int h, int T, int C, int NH,
                              int KV);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv, const float *att, float *vt, float *dp,
                               int b, int kvh, int T, int C, int NH, int KV);
    void (*ce_forward)(float *probs, float *losses, const float *logits, const int32_t *targets, int r0, int r1, int V,
                       int Vp);
    void (*ce_backward)(float *dlogits, const float *probs, const int32_t *targets, float dloss, int r0, int r1, int V,
                        int Vp);
    void (*rms_forward)(float *out, float *rstd, const float *inp, const float *w, int r0, int r1, int C, float eps);
    void (*rms_backward)(float *dinp, const float *dout, const float *inp, const float *w, const float *rstd, int r0,
                         int r1, int C);
    void (*rms_dw)(float *dw, const float *dout, const float *inp, const float *rstd, int N, int C, int c0, int c1);
    void (*rope)(float *qkv, const float *cosv, const float *sinv, int r0, int r1, int T, int C, int NH, int KV, int back);
    void (*swiglu_forward)(float *out, const float *g, const float *u, size_t n);
    void (*swiglu_backward)(float *dg, float *du, const float *g, const float *u, const float *dh, size_t n);
} tr_layers;

struct tr_model {
    tr_config cfg;
    int nthreads;
    int isa;                 // TR_ISA_BASE..TR_ISA_AMX_EMULATED, never AUTO
    const tr_layers *layers; // of that level
    const struct tr_arch *arch;     // the model's forward, backward and init
    int ntensors;                   // tr_tensor_count (layout.h)
    size_t sizes[TR_MAX_TENSORS];   // tr_param_layout
    size_t offsets[TR_MAX_TENSORS];
    size_t num_params;

    float *params;    // (N) master weights, identical on every replica
    float *grads;     // (N) gradients of the last tr_step
    float *dwte_emb;  // (Vp*C) the token embedding's share of wte's gradient, during tr_step
    float *shard_grads; // (N each) the shard tree's partial sums above grads (tr_shard_levels - 1), or NULL
    int have_grads;
    float *lookahead; // (N) x - lr*sign(pending, else delta) when the DeMo lookahead is on, else NULL
    int lookahead_on;

    float *adam_m, *adam_v; // (N) each, allocated on first AdamW step
    uint64_t adam_t;
    float *delta;           // (N) DeMo momentum or SparseLoCo error feedback, allocated on first generate
    float *pending;         // (N) while this client's own payload awaits its apply (overlap): DeMo's U of it,
                            // SparseLoCo's share of the outer step (outer_lr * its values); else NULL
    float demo_lr;          // lr of the last DeMo apply (for the lookahead)
    uint64_t step;          // optimizer steps taken

    float *rope_cos, *rope_sin; // llama: (T, hs/2) rotary tables (trk_rope_table)
    float *kv_cache;  // decode.c: (L, T, QKVD) rows of the positions decoded so far, allocated on first use
    float *decode_buf;
    int decode_pos;
    float *act_mem;   // activations for micro_batch x seq_len (tr_act_layout)
    float *dact_mem;  // (tr_dact_layout)
    // Per-thread scratch for scratch_threads threads (tr_thread_scratch).
    float *attn_buf;  // (hs+4)*T each: transposed keys or values and 4 rows
    float *pack_buf;  // TR_GEMM_PACK each: packed GEMM panels
    void *mx_scratch; // mx8: both operands of the largest linear GEMM, quantized (tr_mx_operand_codes)
    size_t mx_scratch_bytes;
    int scratch_threads;
    float *dct[257];  // DCT-II matrices (D then D^T) by size, built on first use
    float *demo_buf;  // (4, demo_buf_len) tensor-sized DeMo buffers
    // A SparseLoCo round in progress (tr_loco_begin): the weights, AdamW
    // moments and counters at its start.
    int in_round;
    float *anchor, *anchor_m, *anchor_v; // (N) each; the moments only when anchor_moments
    int anchor_moments, anchor_lookahead;
    uint64_t anchor_step, anchor_adam_t;
    size_t demo_buf_len;
    // Residency (below): the attached device, or NULL, and which buffers
    // are out of date on the host and on the device.
    void *dev;
    int (*dev_download)(tr_model *m, unsigned bufs);
    unsigned host_stale, dev_stale;
    // Data and tensor parallelism (device_cuda.c): the other devices after
    // dev, in groups of `tensor` (a leader, then its tensor-parallel ranks),
    // the groups in shard order; all step at dev's weights. peer_stale names
    // the weights (TR_BUF_PARAMS, TR_BUF_LOOKAHEAD) they have not yet got.
    void *peers[TR_MAX_SHARDS - 1];
    int npeers, tensor;
    unsigned peer_stale;
};

// Residency. With a device attached (device_cuda.c), the model's weights,
// gradients and optimizer buffers (TR_BUF_*) may be newer on the device
// than here: host_stale names those, dev_stale the ones newer here than
// there; never both for one buffer. The device side uploads what is
// dev_stale before using it and marks what it changes host_stale. Every trainer.h entry point that reads
// one of these host buffers calls tr_host_read first, one that changes part
// of it tr_host_write, one that overwrites all of it tr_host_replace (the
// list is in README.md, "CUDA path"). Without a device both stay 0.
enum {
    TR_BUF_PARAMS = 1,
    TR_BUF_GRADS = 2,
    TR_BUF_ADAM = 4,      // adam_m and adam_v
    TR_BUF_DELTA = 8,     // DeMo momentum or SparseLoCo error feedback
    TR_BUF_LOOKAHEAD = 16,
    TR_BUF_ANCHOR = 32,   // a SparseLoCo round's start: anchor, and anchor_m/anchor_v when anchor_moments
    TR_BUF_PENDING = 64,  // DeMo's pending update
    TR_BUF_ALL = 127
};
int tr_cpu_ready(tr_model *m);
void tr_cpu_release(tr_model *m);
int tr_host_read(tr_model *m, unsigned bufs);
int tr_host_write(tr_model *m, unsigned bufs);
void tr_host_replace(tr_model *m, unsigned bufs);

// gemm.c: runs g with the kernel of level isa on nthreads threads; pack
// holds TR_GEMM_PACK floats per thread.
#define TR_GEMM_KC 256  // k per block: an A panel and a B panel stay in L1
#define TR_GEMM_MC 96   // rows per task (a multiple of every MR): its A block stays in L2
#define TR_GEMM_NC 1536 // columns per packed B block: kc x NC floats in L2/L3
#define TR_GEMM_PACK (TR_GEMM_KC * (TR_GEMM_MC + TR_GEMM_NC))
void tr_gemm_run(const tr_gemm_args *g, int isa, int nthreads, float *pack);
void tr_t8x8(const float *src, size_t ss, float *dst, size_t ds); // AVX2: dst row i = src column i, 8 x 8
void tr_gemm_split(const tr_gemm_args *g, int mr, int nr, int nthreads, int *mt, int *nt, int *mb, int *nb);
// mxgemm.c: g in numeric contract v3 (mx8), blocks restarting every kseg
// along K (g->K or more: no segments), both operands quantized into scratch
// (cap bytes; TR_ESHORT when short of tr_mx_scratch_bytes of their codes).
int tr_mx_gemm_run(const tr_gemm_args *g, int kseg, int isa, int nthreads, void *scratch, size_t cap);
size_t tr_mx_scratch_bytes(size_t a_codes, size_t b_codes);
int tr_isa_pick(int want);
// layers.c
const tr_layers *tr_layers_for(int isa);
// An architecture (gpt.c, llama.c): init draws the weights; forward runs
// B sequences of length T at weights w into act_mem and returns the
// per-token losses; backward adds the gradients of dloss * their sum to g
// (the token embedding's share to m->dwte_emb) from forward's activations.
typedef struct tr_arch {
    void (*init)(tr_model *m, uint64_t seed);
    const float *(*forward)(tr_model *m, float *w, const int32_t *tok, const int32_t *tgt, int B, int T);
    void (*backward)(tr_model *m, float *w, float *g, const int32_t *tok, const int32_t *tgt, float dloss, int B, int T);
} tr_arch;
extern const tr_arch tr_arch_gpt2, tr_arch_llama;

// model.c: N(0, 1) draws for the initial weights (splitmix64, Irwin-Hall);
// the config check of tr_create.
float tr_normal(uint64_t *s);
int tr_config_check(const tr_config *c);

// ops.c: the layers spread over threads (shapes in the comments there).
// Attention scratch per thread: the transposed keys (or values) and 4 rows.
static inline size_t tr_attn_floats(const tr_config *c) { return ((size_t)c->channels / c->heads + 4) * c->seq_len; }
int tr_thread_scratch(tr_model *m, int n);
void tr_transpose(const tr_model *m, float *dst, const float *src, int rows, int cols);
void tr_encoder_forward(const tr_model *m, float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T);
void tr_encoder_backward(const tr_model *m, float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B, int T);
void tr_layernorm_forward(const tr_model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C);
void tr_layernorm_backward(const tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                           const float *w, const float *mean, const float *rstd, int N, int C);
void tr_rmsnorm_forward(const tr_model *m, float *out, float *rstd, const float *inp, const float *w, int N, int C);
void tr_rmsnorm_backward(const tr_model *m, float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                         const float *rstd, int N, int C);
void tr_linear_forward(const tr_model *m, float *out, int ldo, const float *inp, int ldi, const float *w,
                       const float *bias, int BT, int IC, int OC);
void tr_linear_backward(const tr_model *m, float *dinp, int accumulate, float *dw, float *dbias, const float *dout, int ldd,
                        const float *inp, int ldi, const float *w, int BT, int T, int IC, int OC);
void tr_matmul(const tr_model *m, const tr_gemm_args *g, int kseg, int nthreads);
void tr_attention_forward(const tr_model *m, float *out, float *att, const float *qkv, int B, int T, int KV);
void tr_attention_backward(const tr_model *m, float *dqkv, const float *dout, const float *qkv, const float *att, int B,
                           int T, int KV);
void tr_rope(const tr_model *m, float *qkv, int N, int T, int KV, int back);
void tr_gelu_forward(const tr_model *m, float *out, const float *x, size_t n);
void tr_gelu_backward(const tr_model *m, float *dinp, const float *x, const float *dout, size_t n);
void tr_swiglu_forward(const tr_model *m, float *out, const float *g, const float *u, size_t n);
void tr_swiglu_backward(const tr_model *m, float *dg, float *du, const float *g, const float *u, const float *dh, size_t n);
void tr_residual_forward(const tr_model *m, float *out, const float *a, const float *b, size_t n);
void tr_crossentropy_forward(const tr_model *m, float *probs, float *losses, const float *logits, const int32_t *targets, int BT);
void tr_crossentropy_backward(const tr_model *m, float *dlogits, const float *probs, const int32_t *targets, float dloss, int BT);
// demo.c, shared with loco.c and device_cuda.c: the gradient clipping
// scale, the momentum (zero) and lookahead buffers allocated on first use,
// and the lookahead point refreshed on the host.
#define TR_DEMO_MAX_CHUNK 256 // the largest chunk edge (m->dct holds a base per edge)
int tr_grad_scale(tr_model *m, float clip, float *scale);
int tr_delta_alloc(tr_model *m);
int tr_lookahead_alloc(tr_model *m);
// The pending update's buffer (on: allocated if missing; off: freed).
int tr_pending_alloc(tr_model *m, int on);
int tr_lookahead_wanted(const tr_model *m, int on);
int tr_demo_refresh_lookahead(tr_model *m, int on);
// With hp->overlap, m->pending becomes U of this client's own payload (len
// bytes, just generated; the lookahead buffer allocated); without, it goes.
int tr_demo_pending(tr_model *m, const tr_demo *hp, const uint8_t *own, size_t len);
// The same for SparseLoCo: outer_lr times own's decoded values, scattered.
int tr_loco_pending(tr_model *m, const tr_loco *hp, const uint8_t *own, size_t len);
// The parts of DeMo's entry points that run on the host whichever side
// computes: argument checks, payloads decoded into in-chunk indices and
// values (all n or none: client c's E entries at idx, val + c*E, E = the
// layout's entries; free both) and the payload written from the selected
// entries (returns its length).
int tr_demo_check(const tr_demo *hp);
int tr_demo_generate_check(const tr_model *m, const tr_demo *hp, const uint8_t *out, size_t cap, const size_t *len);
int tr_demo_decode(const tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n, uint32_t **idx,
                   float **val);
size_t tr_demo_pack(const tr_model *m, const tr_demo *hp, const uint32_t *idx, const float *val, uint8_t *out);
// loco.c, the same for SparseLoCo (scale: one per chunk of all tensors), and
// the bookkeeping of a round that both sides share.
int tr_loco_check(const tr_loco *hp);
int tr_loco_generate_check(const tr_model *m, const tr_loco *hp, const uint8_t *out, size_t cap, const size_t *len);
int tr_loco_decode(const tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n, uint32_t **idx,
                   float **val);
size_t tr_loco_pack(const tr_model *m, const tr_loco *hp, const uint32_t *sel, const uint32_t *code, const float *scale,
                    uint8_t *out);
int tr_anchor_alloc(tr_model *m);
void tr_loco_started(tr_model *m);
void tr_loco_ended(tr_model *m);
void tr_loco_applied(tr_model *m);
// adamw.c, shared with device_cuda.c: the hyperparameter and gradient
// checks, and the moments (zero) allocated on first use or dropped.
int tr_adamw_check(const tr_model *m, const tr_adamw *hp);
int tr_adam_alloc(tr_model *m);
void tr_adam_free(tr_model *m);

// Little-endian byte helpers for the payload and state formats.
static inline void tr_put_u16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tr_put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline uint32_t tr_get_u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t tr_get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline void tr_put_f32(uint8_t *p, float f) { tr_put_u32(p, tr_f2bits(f)); }
static inline float tr_get_f32(const uint8_t *p) { return tr_bits2f(tr_get_u32(p)); }

#endif

// trainer.h: the C API of the native trainer, called from Go through cgo.
//
// Contract: every function returns TR_OK or a negative TR_E* code and never
// exits or asserts on input. C copies data in and out of caller buffers during
// a call and keeps no caller pointer afterwards. A tr_model is used by one
// caller at a time (the Go wrapper serialises calls).
#ifndef TRAINER_H
#define TRAINER_H

#include <stddef.h>
#include <stdint.h>

enum {
    TR_OK = 0,
    TR_EINVAL = -1,   // bad argument (shape, range, token id, config)
    TR_ENOMEM = -2,   // allocation failed
    TR_EPAYLOAD = -3, // malformed or mismatching DeMo payload
    TR_ESTATE = -4,   // state blob does not match this model
    TR_ESHORT = -5,   // output buffer too small
    TR_ENOGRAD = -6,  // optimizer step without accumulated gradients
    TR_EDEVICE = -7,  // GPU runtime failure
};

enum { TR_ARCH_GPT2 = 0, TR_ARCH_LLAMA = 1 };

typedef struct {
    int vocab;        // real vocabulary size V
    int padded_vocab; // Vp >= V, rows of wte (padding keeps GEMM tiles aligned)
    int layers;       // L
    int channels;     // C
    int heads;        // NH, divides C
    int seq_len;      // maximum T (rows of wpe)
    int micro_batch;  // sequences per forward/backward pass (activation memory)
    int arch;         // TR_ARCH_GPT2 (the fields below 0) or TR_ARCH_LLAMA
    int kv_heads;     // llama: key/value heads (grouped-query attention), divides heads
    int hidden;       // llama: SwiGLU intermediate size
    int untied;       // llama: 1 for a separate lm-head, 0 to share wte
    float rope_theta; // llama: base of the rotary position embedding, e.g. 10000
    int arith;        // numeric contract of the matrix products: TR_ARITH_FP32 (v2) or TR_ARITH_MX8 (v3)
    int grad_shards;  // token shards a step's gradients and loss sum over (layout.h); a power of
                      // two up to TR_MAX_SHARDS, 0 meaning 1
    int recompute;    // GPU path, 0 or 1: keep each layer's input only and recompute the layer in
                      // backward (less memory, one more forward; the same bits)
    float rms_eps;    // llama: RMSNorm's epsilon, in (0, 0.1]; 0 means 1e-5 (TR_RMS_EPS_DEFAULT)
    // llama: the rotary frequencies' scaling, TR_ROPE_PLAIN (the fields below 0) or
    // TR_ROPE_LLAMA3 (Llama 3.1's: factor >= 1, 0 < low_freq < high_freq, orig_ctx >= 1)
    int rope_scaling;
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    int qkv_bias; // llama, 0 or 1: biases on the q, k and v projections (Qwen2's attention)
} tr_config;

enum { TR_MAX_SHARDS = 64, TR_MAX_SHARD_LEVELS = 7 }; // levels: log2(TR_MAX_SHARDS) + 1

enum { TR_ARITH_FP32 = 0, TR_ARITH_MX8 = 1 };

enum { TR_ROPE_PLAIN = 0, TR_ROPE_LLAMA3 = 1 };
#define TR_RMS_EPS_DEFAULT 1e-5f

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float clip_norm; // <= 0: no clipping
} tr_adamw;

typedef struct {
    float lr;
    float decay;        // momentum decay (beta), e.g. 0.999
    float weight_decay; // decoupled, applied as x *= 1 - lr*wd
    float clip_norm;    // <= 0: no clipping
    int chunk;          // DCT chunk edge, e.g. 64
    int topk;           // coefficients kept per chunk
    int one_bit;        // 1: values sent as sign bits (decoded as +1/-1)
    int lookahead;      // 1: forward/backward at x - lr*sign(delta)
    int overlap;        // 1 (generate): the payload is applied one step late, so until this
                        // client's next generate its forward point is x - lr*sign(U), U the
                        // update its own payload asks for (the pending update)
} tr_demo;

// SparseLoCo: H inner AdamW steps, then the pseudo-gradient (weights at the
// round's start minus the local result) plus error feedback, sent as each
// chunk's top-k entries quantised to value_bits with one scale per chunk.
typedef struct {
    float outer_lr;  // the rate summed over members: a round applying n payloads takes
                     // x -= min(1, outer_lr / n) * their scatter-mean (trk_loco_rate)
    float decay;     // error feedback decay, e.g. 0.95
    int chunk;       // chunk edge of the 2-D views (as DeMo's, no transform)
    int topk;        // entries kept per chunk
    int value_bits;  // 1, 2, 4, 8 (scaled codes) or 32 (raw f32)
    int overlap;     // 1 (generate): the payload is applied one round late, so the next
                     // round trains from x less this client's own share of it (the pending update)
    int members;     // with overlap: the round's member count, which sets that share's rate
} tr_loco;

typedef struct tr_model tr_model;

// ISA levels for the GEMM kernels; all give identical bits. The VNNI and
// AMX levels matter to mx8 (int8 dot products); fp32 runs their AVX2 or
// AVX-512 kernels.
enum {
    TR_ISA_AUTO = 0,
    TR_ISA_BASE = 1,
    TR_ISA_AVX2 = 2,
    TR_ISA_AVXVNNI = 3,
    TR_ISA_AVX512 = 4,
    TR_ISA_AVX512VNNI = 5,
    TR_ISA_AMX = 6, // AMX-INT8 tiles (Linux: granted by arch_prctl), with AVX-512
};
// Not a level to choose: the AMX mx8 kernel with its tile instructions
// emulated in C and everything else at x86-64, on any CPU, for the tests.
#define TR_ISA_AMX_EMULATED 7

int tr_create(const tr_config *cfg, uint64_t seed, tr_model **out);
void tr_destroy(tr_model *m);
int tr_set_threads(tr_model *m, int n);
int tr_set_isa(tr_model *m, int isa); // returns the level chosen (>0) or an error
size_t tr_num_params(const tr_model *m);

// A target the loss skips: fine-tuning data trains only the positions its
// loss mask marks, and the rest carry TR_IGNORE.
#define TR_IGNORE (-1)

// Forward+backward over n sequences of length t (t <= seq_len), accumulated in
// micro-batches; gradients are of the mean loss over the n*t targets that are
// not TR_IGNORE (0 when all are) and are replaced (not added to) by each
// call. *loss receives the mean loss.
int tr_step(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
// A step that computes nothing: the gradients become zero, as if the batch
// had taught the model nothing (the client's dummy training mode).
int tr_zero_step(tr_model *m);
// Forward only: mean loss, parameters and gradients untouched.
int tr_eval(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
// Copies the gradients (after tr_step) into out, which holds tr_num_params floats.
int tr_get_grads(tr_model *m, float *out, size_t len);
int tr_get_params(tr_model *m, float *out, size_t len);
int tr_set_params(tr_model *m, const float *in, size_t len);

int tr_adamw_step(tr_model *m, const tr_adamw *hp);

// DeMo: generate this client's payload from the current gradients (updating
// its own momentum), then apply all accepted payloads in the given order.
int tr_demo_payload_size(const tr_model *m, const tr_demo *hp, size_t *size);
int tr_demo_generate(tr_model *m, const tr_demo *hp, uint8_t *out, size_t cap, size_t *len);
int tr_demo_validate(const tr_model *m, const tr_demo *hp, const uint8_t *p, size_t len);
// payloads: n payloads concatenated in client order, lens[i] bytes each.
int tr_demo_apply(tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n);

// SparseLoCo round: begin snapshots the weights and optimizer state; inner
// steps are tr_step + tr_adamw_step; generate folds the pseudo-gradient into
// the error feedback, writes the payload and puts the round-start weights
// back; abort (instead of generate) restores everything begin saw. Apply
// takes x -= min(1, outer_lr / n) * u, u the scatter-mean of the n decoded
// payloads (each position's sum in the given order over the payloads that
// hold it, divided by their count).
int tr_loco_payload_size(const tr_model *m, const tr_loco *hp, size_t *size);
int tr_loco_begin(tr_model *m);
int tr_loco_abort(tr_model *m);
int tr_loco_generate(tr_model *m, const tr_loco *hp, uint8_t *out, size_t cap, size_t *len);
int tr_loco_validate(const tr_model *m, const tr_loco *hp, const uint8_t *p, size_t len);
int tr_loco_apply(tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n);

// Test hooks for the transform: chunked orthonormal DCT-II of x (rows x cols)
// and its inverse; chunk edges are the largest divisors <= chunk.
int tr_dct_forward(int rows, int cols, int chunk, const float *x, float *y);
int tr_dct_inverse(int rows, int cols, int chunk, const float *y, float *x);

// Full state (parameters, optimizer buffers, counters) as a canonical,
// versioned little-endian blob; see README.md.
int tr_state_size(const tr_model *m, size_t *size);
int tr_state_export(tr_model *m, uint8_t *out, size_t cap);
int tr_state_import(tr_model *m, const uint8_t *in, size_t len);
// The same blob in pieces, for hashing large states without a full copy: the
// header (56 bytes for GPT-2, 76 for Llama; *len), and floats
// [first, first+count) of the float section.
int tr_state_header(const tr_model *m, uint8_t *out, size_t cap, size_t *len);
int tr_state_floats(tr_model *m, size_t first, size_t count, uint8_t *out);

// Parameter tensors, for checkpoints: name, shape and offset into the flat
// parameter array.
int tr_num_tensors(const tr_model *m);
// Shape of tensor i of a model of config c without creating one: ndim, or 0
// past the last tensor (or for a bad config).
int tr_config_shape(const tr_config *c, int i, int shape[3]);
int tr_tensor_info(const tr_model *m, int i, const char **name, int *ndim, int shape[3], size_t *offset);

// Forward only at the master weights: the logits of n sequences of t
// tokens, out (n*t*vocab floats) row by row, the padded columns left out.
int tr_logits(tr_model *m, const int32_t *tokens, int n, int t, float *out);

// Text generation with a key/value cache: reset, then one token at a time;
// tr_decode_next writes the logits of the next token (vocab floats) after
// the tokens so far, equal to tr_logits' row for that prefix. At most seq_len
// tokens; the cache follows the weights as they are at each call.
int tr_decode_reset(tr_model *m);
int tr_decode_next(tr_model *m, int32_t token, float *logits);

// Test hook: the first len floats of the last micro-batch's forward
// activations, in layout.h's order (tr_act_layout), to compare with the GPU path.
int tr_activations(const tr_model *m, float *out, size_t len);

// GEMM hook (benchmarks, tests): out(M,N) = A(M,K) * B(N,K)^T with the
// model's kernel, in contract arith (TR_ARITH_*); for mx8, mx_slices bit 0
// puts A and bit 1 puts B in two slices (README).
int tr_gemm(tr_model *m, int arith, int mx_slices, int M, int N, int K, const float *a, const float *b, float *out);

// Memory footprint (footprint.c): the bytes a model of cfg allocates for
// training with an optimizer, computed from the layouts without allocating.
// Steady state: what stays allocated from one step to the next once the
// optimizer's buffers exist (a SparseLoCo round's start with its AdamW
// moments, as from the second round on); transient: the most that one
// call (an optimizer step, a generate, an apply) holds on top and frees
// before it returns. The GPU path keeps every host buffer of the CPU path
// too (weights, gradients, optimizer state, the CPU's activations and
// scratch), so host memory is counted for both paths, device memory only
// for the GPU's. Not counted: the model structs (a few KiB), text
// generation's key/value cache (tr_decode_reset), tr_gemm's own mx8
// scratch, and what the caller holds (payloads, state blobs).
enum { TR_OPT_ADAMW = 0, TR_OPT_DEMO = 1, TR_OPT_LOCO = 2 };
typedef struct {
    int optimizer; // TR_OPT_*; SparseLoCo's inner steps are AdamW's
    int gpu;       // 1: the CUDA path (cuda/model.cu), 0: the CPU path
    int threads;   // the most threads the model has run on: tr_create sizes the
                   // per-thread scratch for tr_default_threads(), tr_set_threads grows it
    int chunk, topk; // DeMo's or SparseLoCo's chunk edge and top-k
    int lookahead;   // DeMo's lookahead (tr_demo.lookahead)
    int overlap;     // overlapped steps (tr_demo.overlap, tr_loco.overlap)
    int payloads;    // payloads an apply takes (>= 1)
} tr_footprint_opts;
typedef struct {
    size_t weights;     // the parameters
    size_t grads;       // their gradients and the embedding's share of wte's
    size_t optimizer;   // AdamW moments, DeMo momentum, lookahead and pending
                        // update, SparseLoCo error feedback and round start
    size_t activations; // a micro-batch's activations and their gradients (the GPU's
                        // attention scratch and token ids too)
    size_t mx8;         // quantized GEMM operands (mx8 only)
    size_t scratch;     // per-thread GEMM and attention scratch, rotary tables, DCT
                        // bases, DeMo's tensor buffers, the GPU's payload scratch and
                        // gradient-norm blocks, page-locked host buffers
    size_t transient;   // the most one call allocates and frees again
} tr_mem;
// Returns TR_EINVAL for a bad config or options, or sizes beyond 64 bits.
int tr_footprint(const tr_config *cfg, const tr_footprint_opts *o, tr_mem *host, tr_mem *device);
// The threads tr_create gives a model: the processors, at most 256.
int tr_default_threads(void);

#endif

// trainer_cuda.h: forward/backward of the GPT and the optimizers (AdamW,
// DeMo, SparseLoCo) on an NVIDIA GPU, built by scripts/build-cuda.sh into
// libtrainer_cuda.a and linked under the `cuda` build tag. Same model,
// layout and error codes as the CPU path (trainer.h). The device keeps its
// own weights, gradients and optimizer state; device_cuda.c decides when
// they cross to or from the host.
#ifndef TRAINER_CUDA_H
#define TRAINER_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trg_model trg_model;

// Number of usable devices; 0 when there is no driver or no GPU.
int trg_device_count(void);
// Creates device buffers for cfg on CUDA device `device`, with `levels`
// gradient-sized buffers for the shard tree above TRG_GRADS (a model that
// steps or joins 2^k shards needs k; ../layout.h). *out is NULL on error.
int trg_create(const tr_config *cfg, int device, int levels, trg_model **out);
void trg_destroy(trg_model *g);
// CUDA device `device`'s memory in bytes and its name (name_len bytes).
int trg_device_memory(int device, size_t *total, char *name, size_t name_len);
// Name of the device and last CUDA error, for messages.
const char *trg_device_name(const trg_model *g);
const char *trg_last_error(const trg_model *g);
// The device buffers, nparams floats each in the flat layout of trainer.h:
// the weights, the last step's gradients, AdamW's moments, the DeMo momentum
// or SparseLoCo error feedback, the DeMo lookahead point, and a SparseLoCo
// round's start (weights and moments).
enum {
    TRG_PARAMS = 0,
    TRG_GRADS = 1,
    TRG_ADAM_M = 2,
    TRG_ADAM_V = 3,
    TRG_DELTA = 4,
    TRG_LOOKAHEAD = 5,
    TRG_ANCHOR = 6,
    TRG_ANCHOR_M = 7,
    TRG_ANCHOR_V = 8,
    TRG_PENDING = 9,
};
// Copy buffer buf between host and device. Buffers other than TRG_PARAMS
// and TRG_GRADS are allocated by their first upload or trg_copy (downloading
// one before: TR_EINVAL). Host buffers of TRG_PARAMS and TRG_GRADS are
// page-locked on first use, so they must stay allocated until trg_destroy.
int trg_upload(trg_model *g, int buf, const float *host, size_t nparams);
int trg_download(trg_model *g, int buf, float *host, size_t nparams);
// Device buffer src into dst (SparseLoCo's round start and its restores).
int trg_copy(trg_model *g, int dst, int src);
// Forward+backward of shards first .. first+count-1 of a step of n
// sequences of length t (all n passed; the config's shard count S, count a
// power of two dividing first and S: one subtree of the shard tree,
// ../layout.h) in micro-batches at the device weights in buffer w
// (TRG_PARAMS or TRG_LOOKAHEAD): the subtree's gradients of the step's mean
// loss replace TRG_GRADS, the subtree's loss sum (not yet divided by n*t)
// goes to *sum.
int trg_step(trg_model *g, int w, const int32_t *tokens, const int32_t *targets, int n, int t, int first, int count, float *sum);
// One node of the shard tree across devices: g's TRG_GRADS (the left
// subtree) += right's (the right one, of the same size), copied to g's
// device first, into its first tree buffer (g needs levels >= 1).
int trg_join(trg_model *g, const trg_model *right);
// dst's buffer dbuf = src's buffer sbuf, across devices.
int trg_copy_peer(trg_model *dst, int dbuf, const trg_model *src, int sbuf);
// Makes g the leader of a tensor-parallel group with the n models ranks
// (same config, each on a device of its own or a logical device): trg_step
// and trg_eval on g then run on the whole group, each linear layer's GEMMs
// split along N over the ranks (model.cu), with one device's bits. Each
// rank must hold g's weights (trg_copy_peer) and its tree buffers; the
// gradients end on g. Destroying any member dissolves the group.
int trg_tp_attach(trg_model *g, trg_model *const *ranks, int n);
// Forward only, at TRG_PARAMS (each rank's, in a group).
int trg_eval(trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
// AdamW step t (1 for the first) with adamw.c's arithmetic: the gradient
// norm (clipping), then weights and moments updated from TRG_GRADS. hp must
// pass tr_adamw_step's checks. NaN or Inf gradients: TR_EINVAL, nothing changed.
int trg_adamw(trg_model *g, const tr_adamw *hp, uint64_t t);
// DeMo with demo.c's arithmetic (hp passed its checks; entries in the order
// of tr_chunk_layout's tensors, chunks and top-k, E = its entries). Generate
// folds TRG_GRADS into TRG_DELTA, selects each chunk's top-k DCT
// coefficients and removes them from TRG_DELTA; their in-chunk indices and
// values come back in idx and val (E each). NaN or Inf gradients: TR_EINVAL,
// nothing changed. Apply takes the step on TRG_PARAMS from n clients'
// decoded entries (client c's at idx, val + c*E).
int trg_demo_generate(trg_model *g, const tr_demo *hp, uint32_t *idx, float *val);
int trg_demo_apply(trg_model *g, const tr_demo *hp, int n, const uint32_t *idx, const float *val);
// TRG_LOOKAHEAD = TRG_PARAMS - lr * sign(src), src TRG_DELTA or TRG_PENDING.
int trg_lookahead(trg_model *g, int src, float lr);
// SparseLoCo with loco.c's arithmetic, entries as DeMo's. Start makes
// TRG_PARAMS the round's start, TRG_ANCHOR less TRG_PENDING. Generate folds
// TRG_ANCHOR (less TRG_PENDING when shifted) - TRG_PARAMS into TRG_DELTA and selects and quantises each
// chunk's top-k: indices sel and codes code (E each), one scale per chunk
// (all tensors' chunks in order). Apply takes the outer step on TRG_PARAMS
// from n >= 1 clients' decoded entries.
int trg_loco_start(trg_model *g);
int trg_loco_generate(trg_model *g, const tr_loco *hp, int shifted, uint32_t *sel, uint32_t *code, float *scale);
int trg_loco_apply(trg_model *g, const tr_loco *hp, int n, const uint32_t *idx, const float *val);
// Copies the first len floats of the last micro-batch's activations
// (tr_act_layout order) to out, for tests.
int trg_activations(const trg_model *g, float *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif

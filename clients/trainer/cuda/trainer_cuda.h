// trainer_cuda.h: forward/backward of the GPT and AdamW on an NVIDIA GPU,
// built by scripts/build-cuda.sh into libtrainer_cuda.a and linked under the
// `cuda` build tag. Same model, layout and error codes as the CPU path
// (trainer.h). The device keeps its own weights, gradients and AdamW
// moments; device_cuda.c decides when they cross to or from the host.
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
// Creates device buffers for cfg on device 0. *out is NULL on error.
int trg_create(const tr_config *cfg, trg_model **out);
void trg_destroy(trg_model *g);
// Name of the device and last CUDA error, for messages.
const char *trg_device_name(const trg_model *g);
const char *trg_last_error(const trg_model *g);
// The device buffers, nparams floats each in the flat layout of trainer.h:
// the weights the forward pass sees, the last step's gradients, AdamW's moments.
enum { TRG_PARAMS = 0, TRG_GRADS = 1, TRG_ADAM_M = 2, TRG_ADAM_V = 3 };
// Copy buffer buf between host and device. The moments are allocated by
// their first upload (downloading one before: TR_EINVAL). Host buffers of
// TRG_PARAMS and TRG_GRADS are page-locked on first use, so they must stay
// allocated until trg_destroy.
int trg_upload(trg_model *g, int buf, const float *host, size_t nparams);
int trg_download(trg_model *g, int buf, float *host, size_t nparams);
// Forward+backward over n sequences of length t in micro-batches at the
// device weights; the gradients of the mean loss replace TRG_GRADS, the mean
// loss goes to *loss.
int trg_step(trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
// Forward only.
int trg_eval(trg_model *g, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
// AdamW step t (1 for the first) with adamw.c's arithmetic: the gradient
// norm (clipping), then weights and moments updated from TRG_GRADS. hp must
// pass tr_adamw_step's checks. NaN or Inf gradients: TR_EINVAL, nothing changed.
int trg_adamw(trg_model *g, const tr_adamw *hp, uint64_t t);
// Copies the first len floats of the last micro-batch's activations
// (tr_act_layout order) to out, for tests.
int trg_activations(const trg_model *g, float *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif

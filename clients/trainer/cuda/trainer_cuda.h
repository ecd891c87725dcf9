// trainer_cuda.h: forward/backward of the GPT on an NVIDIA GPU, built by
// scripts/build-cuda.sh into libtrainer_cuda.a and linked under the `cuda`
// build tag. Same model, layout and error codes as the CPU path (trainer.h);
// the optimizers stay in the C library on the host.
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
// Uploads the weights (nparams floats, flat layout of trainer.h), runs
// forward+backward over n sequences of length t in micro-batches, writes the
// gradients of the mean loss to grads (nparams floats) and the mean loss.
// weights and grads are page-locked on first use, so they must stay
// allocated until trg_destroy.
int trg_step(trg_model *g, const float *weights, size_t nparams, const int32_t *tokens, const int32_t *targets,
             int n, int t, float *grads, float *loss);
// Forward only.
int trg_eval(trg_model *g, const float *weights, size_t nparams, const int32_t *tokens, const int32_t *targets,
             int n, int t, float *loss);
// Copies the first len floats of the last micro-batch's activations
// (tr_act_layout order) to out, for tests.
int trg_activations(const trg_model *g, float *out, size_t len);

#ifdef __cplusplus
}
#endif

#endif

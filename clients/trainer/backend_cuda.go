//go:build cuda || cudaemu

package trainer

/*
#include <stdlib.h>
#include "trainer.h"
#include "cuda/trainer_cuda.h"

int tr_device_attach(tr_model *m, trg_model *g);
int tr_step_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
int tr_eval_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss);
int tr_adamw_step_device(tr_model *m, const tr_adamw *hp);
int tr_demo_generate_device(tr_model *m, const tr_demo *hp, uint8_t *out, size_t cap, size_t *len);
int tr_demo_apply_device(tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n);
int tr_loco_begin_device(tr_model *m);
int tr_loco_abort_device(tr_model *m);
int tr_loco_generate_device(tr_model *m, const tr_loco *hp, uint8_t *out, size_t cap, size_t *len);
int tr_loco_apply_device(tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n);
*/
import "C"

import "fmt"

// backend holds the GPU model when a device was found; nil g means CPU.
// The C model knows g too (tr_device_attach) and moves the weights,
// gradients and optimizer state between host and device as its entry
// points need them, whichever path runs.
type backend struct {
	g   *C.trg_model
	gpu bool // forward/backward and the optimizers on the GPU
}

// Backend names the compute path in use: "cuda:<device>" or "cpu".
func (t *Trainer) Backend() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.be.gpu && t.be.g != nil {
		return "cuda:" + C.GoString(C.trg_device_name(t.be.g))
	}
	return "cpu"
}

// GPUAvailable says why this process cannot train on a GPU (nil: it can).
func GPUAvailable() error {
	if C.trg_device_count() < 1 {
		return fmt.Errorf("%w: no CUDA device or driver found", ErrNoGPU)
	}
	return nil
}

// SetGPU switches forward/backward and the optimizers (AdamW, DeMo,
// SparseLoCo) between the GPU (the default when one was found) and the CPU.
// The state moves with them as needed.
func (t *Trainer) SetGPU(on bool) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if on && t.be.g == nil {
		return fmt.Errorf("GPU requested: %w (no CUDA device found)", ErrDevice)
	}
	t.be.gpu = on
	return nil
}

// initBackend opens the GPU when there is one; without a device or driver
// the trainer runs on the CPU (the caller says so: GPUAvailable).
func (t *Trainer) initBackend() error {
	if C.trg_device_count() < 1 {
		return nil
	}
	cc := t.cfg.c()
	var g *C.trg_model
	if err := codeErr(C.trg_create(&cc, &g), "create GPU model"); err != nil {
		return err
	}
	if err := codeErr(C.tr_device_attach(t.m, g), "attach GPU model"); err != nil {
		C.trg_destroy(g)
		return err
	}
	t.be = backend{g: g, gpu: !emulatedGPU}
	return nil
}

func (t *Trainer) closeBackend() {
	if t.be.g != nil {
		C.trg_destroy(t.be.g)
		t.be.g = nil
	}
}

// backendErr adds the CUDA error text to device failures.
func (t *Trainer) backendErr(rc C.int, what string) error {
	err := codeErr(rc, what)
	if err != nil && rc == C.TR_EDEVICE {
		return fmt.Errorf("%w: %s", err, C.GoString(C.trg_last_error(t.be.g)))
	}
	return err
}

func (t *Trainer) stepBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	if !t.be.gpu {
		return C.tr_step(t.m, tokens, targets, n, seqLen, loss)
	}
	return C.tr_step_device(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) evalBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	if !t.be.gpu {
		return C.tr_eval(t.m, tokens, targets, n, seqLen, loss)
	}
	return C.tr_eval_device(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) adamwBackend(hp *C.tr_adamw) C.int {
	if !t.be.gpu {
		return C.tr_adamw_step(t.m, hp)
	}
	return C.tr_adamw_step_device(t.m, hp)
}

func (t *Trainer) demoGenerateBackend(hp *C.tr_demo, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	if !t.be.gpu {
		return C.tr_demo_generate(t.m, hp, out, size, n)
	}
	return C.tr_demo_generate_device(t.m, hp, out, size, n)
}

func (t *Trainer) demoApplyBackend(hp *C.tr_demo, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	if !t.be.gpu {
		return C.tr_demo_apply(t.m, hp, buf, lens, n)
	}
	return C.tr_demo_apply_device(t.m, hp, buf, lens, n)
}

func (t *Trainer) locoBeginBackend() C.int {
	if !t.be.gpu {
		return C.tr_loco_begin(t.m)
	}
	return C.tr_loco_begin_device(t.m)
}

func (t *Trainer) locoAbortBackend() C.int {
	if !t.be.gpu {
		return C.tr_loco_abort(t.m)
	}
	return C.tr_loco_abort_device(t.m)
}

func (t *Trainer) locoGenerateBackend(hp *C.tr_loco, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	if !t.be.gpu {
		return C.tr_loco_generate(t.m, hp, out, size, n)
	}
	return C.tr_loco_generate_device(t.m, hp, out, size, n)
}

func (t *Trainer) locoApplyBackend(hp *C.tr_loco, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	if !t.be.gpu {
		return C.tr_loco_apply(t.m, hp, buf, lens, n)
	}
	return C.tr_loco_apply_device(t.m, hp, buf, lens, n)
}

//go:build !cuda && !cudaemu

package trainer

/*
#include "trainer.h"
*/
import "C"

import "fmt"

// backend is empty without the cuda build tag.
type backend struct{}

// Backend names the compute path in use: "cpu" in this build.
func (t *Trainer) Backend() string { return "cpu" }

// GPUAvailable says why this process cannot train on a GPU: this build has
// no CUDA path.
func GPUAvailable() error {
	return fmt.Errorf("%w: this psyche-client was built without the cuda tag (scripts/build-cuda.sh, then go build -tags cuda)", ErrNoGPU)
}

// SetGPU selects the GPU for forward/backward and the optimizers. This build
// has no CUDA path (build with -tags cuda after scripts/build-cuda.sh), so
// only false is valid.
func (t *Trainer) SetGPU(on bool) error {
	if on {
		return fmt.Errorf("GPU requested: %w (built without the cuda tag)", ErrDevice)
	}
	return nil
}

// SetDevices trains on CUDA devices: not in this build (see SetGPU).
func (t *Trainer) SetDevices(ids []int, tensor int) error {
	return fmt.Errorf("CUDA devices %v requested: %w (built without the cuda tag)", ids, ErrDevice)
}

// GPUMemory fails: this build has no CUDA path.
func GPUMemory(id int) (int64, string, error) {
	return 0, "", fmt.Errorf("CUDA device %d: %w (built without the cuda tag)", id, ErrDevice)
}

// GPUCount is 0: this build has no CUDA path.
func GPUCount() int { return 0 }

func (t *Trainer) initBackend() error { return nil }

func (t *Trainer) closeBackend() {}

func (t *Trainer) backendErr(rc C.int, what string) error { return codeErr(rc, what) }

func (t *Trainer) stepBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	return C.tr_step(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) evalBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	return C.tr_eval(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) adamwBackend(hp *C.tr_adamw) C.int { return C.tr_adamw_step(t.m, hp) }

func (t *Trainer) demoGenerateBackend(hp *C.tr_demo, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	return C.tr_demo_generate(t.m, hp, out, size, n)
}

func (t *Trainer) demoApplyBackend(hp *C.tr_demo, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	return C.tr_demo_apply(t.m, hp, buf, lens, n)
}

func (t *Trainer) locoBeginBackend() C.int { return C.tr_loco_begin(t.m) }

func (t *Trainer) locoAbortBackend() C.int { return C.tr_loco_abort(t.m) }

func (t *Trainer) locoGenerateBackend(hp *C.tr_loco, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	return C.tr_loco_generate(t.m, hp, out, size, n)
}

func (t *Trainer) locoApplyBackend(hp *C.tr_loco, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	return C.tr_loco_apply(t.m, hp, buf, lens, n)
}

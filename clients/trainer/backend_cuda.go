//go:build cuda || cudaemu

package trainer

/*
#include <stdlib.h>
#include "trainer.h"
#include "cuda/trainer_cuda.h"

int tr_device_attach(tr_model *m, trg_model *g, trg_model *const *peers, int npeers, int tensor);
int tr_device_detach(tr_model *m);
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

import (
	"fmt"
	"math/bits"
	"slices"
	"unsafe"
)

// backend holds the GPU model once a device is open (g); gpu says the
// trainer computes there, and a trainer that never does never opens one
// (New only notes that a GPU is there: the first call that needs it, or
// SetGPU(true), opens device 0). The C model knows g too
// (tr_device_attach) and moves the weights, gradients and optimizer state
// between host and device as its entry points need them, whichever path
// runs.
type backend struct {
	g       *C.trg_model
	peers   []*C.trg_model // parallelism: the other devices (SetDevices)
	devices []int          // the CUDA ordinals of g and peers
	tensor  int            // tensor-parallel ranks per group
	gpu     bool           // forward/backward and the optimizers on the GPU
}

// Backend names the compute path in use: "cuda:<device>", with " xN" for N
// devices and " (D groups of M)" with tensor parallelism, or "cpu". It
// opens no device: one not yet open is named by GPUMemory.
func (t *Trainer) Backend() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.be.gpu && t.be.g == nil {
		if _, name, err := GPUMemory(0); err == nil {
			return "cuda:" + name
		}
		return "cpu"
	}
	if t.be.gpu {
		name := "cuda:" + C.GoString(C.trg_device_name(t.be.g))
		if len(t.be.devices) > 1 {
			name += fmt.Sprintf(" x%d", len(t.be.devices))
		}
		if t.be.tensor > 1 {
			name += fmt.Sprintf(" (%d groups of %d)", len(t.be.devices)/t.be.tensor, t.be.tensor)
		}
		return name
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
	if !on {
		t.be.gpu = false
		return nil
	}
	if C.trg_device_count() < 1 {
		return fmt.Errorf("GPU requested: %w (no CUDA device found)", ErrDevice)
	}
	if t.be.g == nil {
		return t.openDevices([]int{0}, 1)
	}
	t.be.gpu = true
	return nil
}

// initBackend notes whether there is a GPU: a trainer computes there (from
// the first call that needs it) unless the build emulates it; without a
// device or driver it runs on the CPU (the caller says so: GPUAvailable).
func (t *Trainer) initBackend() error {
	t.be.gpu = C.trg_device_count() >= 1 && !emulatedGPU
	return nil
}

// onGPU says whether the next call computes on the GPU, opening device 0
// the first time; a device that cannot be opened leaves the trainer on the
// CPU (SetGPU(true) says why).
func (t *Trainer) onGPU() bool {
	if t.be.gpu && t.be.g == nil && t.openDevices([]int{0}, 1) != nil {
		t.be.gpu = false
	}
	return t.be.gpu
}

// GPUMemory is CUDA device id's memory in bytes and its name.
func GPUMemory(id int) (int64, string, error) {
	var total C.size_t
	var name [256]C.char
	if err := codeErr(C.trg_device_memory(C.int(id), &total, &name[0], C.size_t(len(name))), fmt.Sprintf("query cuda:%d", id)); err != nil {
		return 0, "", err
	}
	return int64(total), C.GoString(&name[0]), nil
}

// GPUCount is the number of CUDA devices this process sees.
func GPUCount() int { return int(C.trg_device_count()) }

// SetDevices trains on the CUDA devices ids: len(ids)/tensor groups with
// data parallelism, each of tensor devices with tensor parallelism (ids
// grouped in order). Each group steps Shards()/groups of every step's token
// shards, its linear layers' GEMMs split along N over its ranks, and the
// first device joins the groups' gradients by the shard tree (README
// "Shards", "Tensor parallelism"), so any split gives one device's bits; the
// first also keeps the weights and the optimizer state. The group count
// must be a power of two dividing the shard count. A device named twice is
// two logical devices on one GPU (tests). Bad ids change nothing; a device
// that cannot be opened leaves the trainer on the CPU, its state intact.
func (t *Trainer) SetDevices(ids []int, tensor int) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := checkDevices(ids, tensor, int(C.trg_device_count()), t.cfg.Shards()); err != nil {
		return err
	}
	if t.be.g != nil {
		if err := t.backendErr(C.tr_device_detach(t.m), "bring the state back from the GPU"); err != nil {
			return err
		}
		t.closeBackend()
	}
	return t.openDevices(ids, tensor)
}

// checkDevices says what is wrong with training on devices ids of count,
// in groups of tensor, with shards token shards a step.
func checkDevices(ids []int, tensor, count, shards int) error {
	if len(ids) == 0 || len(ids) > MaxGradShards {
		return fmt.Errorf("%w: %d CUDA devices named: 1 to %d can share a step", ErrInvalid, len(ids), MaxGradShards)
	}
	for _, id := range ids {
		if id < 0 || id >= count {
			return fmt.Errorf("%w: CUDA device %d does not exist (this machine has %d: 0 to %d)", ErrInvalid, id, count, count-1)
		}
	}
	if tensor < 1 || tensor > MaxTensorParallelism {
		return fmt.Errorf("%w: tensor parallelism %d: must be 1 to %d", ErrInvalid, tensor, MaxTensorParallelism)
	}
	if len(ids)%tensor != 0 {
		return fmt.Errorf("%w: %d devices do not split into groups of %d (tensor parallelism)", ErrInvalid, len(ids), tensor)
	}
	d := len(ids) / tensor
	if d&(d-1) != 0 {
		return fmt.Errorf("%w: data parallelism over %d groups of devices: the count must be a power of two (1, 2, 4, ...)", ErrInvalid, d)
	}
	if shards%d != 0 {
		return fmt.Errorf("%w: data parallelism over %d groups of devices needs the run's grad_shards (%d) to be a multiple of %d", ErrInvalid, d, shards, d)
	}
	return nil
}

// openDevices creates the device models and attaches them (the trainer
// then computes there), each with the buffers of its group's subtree of
// the shard tree, and one at least where it joins another group's
// (device_cuda.c: the even ones).
func (t *Trainer) openDevices(ids []int, tensor int) error {
	cc := t.cfg.c()
	gs := make([]*C.trg_model, len(ids))
	destroy := func() {
		for _, g := range gs {
			if g != nil {
				C.trg_destroy(g)
			}
		}
	}
	for i, id := range ids {
		l := treeLevels(t.cfg.Shards(), len(ids)/tensor, i/tensor)
		if err := codeErr(C.trg_create(&cc, C.int(id), C.int(l), &gs[i]), fmt.Sprintf("create GPU model on cuda:%d", id)); err != nil {
			destroy()
			return err
		}
	}
	// gs holds C pointers only, so C may read it during the call (it copies them).
	var peers **C.trg_model
	if len(gs) > 1 {
		peers = (**C.trg_model)(unsafe.Pointer(&gs[1]))
	}
	if err := codeErr(C.tr_device_attach(t.m, gs[0], peers, C.int(len(gs)-1), C.int(tensor)), "attach GPU model"); err != nil {
		destroy()
		return err
	}
	t.be = backend{g: gs[0], peers: gs[1:], devices: slices.Clone(ids), tensor: tensor, gpu: true}
	return nil
}

// treeLevels is how many gradient-sized buffers device i of d holds for
// the shard tree of shards (layout.h): its subtree's, and one where it
// joins another's.
func treeLevels(shards, d, i int) int {
	l := bits.Len(uint(shards/d)) - 1
	if d > 1 && i%2 == 0 {
		l = max(l, 1)
	}
	return l
}

func (t *Trainer) closeBackend() {
	if t.be.g != nil {
		C.trg_destroy(t.be.g)
	}
	for _, g := range t.be.peers {
		C.trg_destroy(g)
	}
	t.be = backend{}
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
	if !t.onGPU() {
		return C.tr_step(t.m, tokens, targets, n, seqLen, loss)
	}
	return C.tr_step_device(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) evalBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	if !t.onGPU() {
		return C.tr_eval(t.m, tokens, targets, n, seqLen, loss)
	}
	return C.tr_eval_device(t.m, tokens, targets, n, seqLen, loss)
}

func (t *Trainer) adamwBackend(hp *C.tr_adamw) C.int {
	if !t.onGPU() {
		return C.tr_adamw_step(t.m, hp)
	}
	return C.tr_adamw_step_device(t.m, hp)
}

func (t *Trainer) demoGenerateBackend(hp *C.tr_demo, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	if !t.onGPU() {
		return C.tr_demo_generate(t.m, hp, out, size, n)
	}
	return C.tr_demo_generate_device(t.m, hp, out, size, n)
}

func (t *Trainer) demoApplyBackend(hp *C.tr_demo, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	if !t.onGPU() {
		return C.tr_demo_apply(t.m, hp, buf, lens, n)
	}
	return C.tr_demo_apply_device(t.m, hp, buf, lens, n)
}

func (t *Trainer) locoBeginBackend() C.int {
	if !t.onGPU() {
		return C.tr_loco_begin(t.m)
	}
	return C.tr_loco_begin_device(t.m)
}

func (t *Trainer) locoAbortBackend() C.int {
	if !t.onGPU() {
		return C.tr_loco_abort(t.m)
	}
	return C.tr_loco_abort_device(t.m)
}

func (t *Trainer) locoGenerateBackend(hp *C.tr_loco, out *C.uint8_t, size C.size_t, n *C.size_t) C.int {
	if !t.onGPU() {
		return C.tr_loco_generate(t.m, hp, out, size, n)
	}
	return C.tr_loco_generate_device(t.m, hp, out, size, n)
}

func (t *Trainer) locoApplyBackend(hp *C.tr_loco, buf *C.uint8_t, lens *C.size_t, n C.int) C.int {
	if !t.onGPU() {
		return C.tr_loco_apply(t.m, hp, buf, lens, n)
	}
	return C.tr_loco_apply_device(t.m, hp, buf, lens, n)
}

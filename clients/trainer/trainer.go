// Package trainer drives the native GPT trainer (C with OpenMP, and CUDA under
// the cuda build tag): forward/backward, AdamW, the DeMo optimizer with its
// compact payloads, full-state export/import, per-step digests and
// safetensors checkpoints. Results are bit-for-bit reproducible on the same
// backend whatever the thread count or x86-64 ISA level; see README.md.
package trainer

/*
#cgo CFLAGS: -O3 -std=c11 -fopenmp -Wall -Wno-psabi -Wno-unknown-pragmas
#cgo LDFLAGS: -fopenmp -lm
#include <stdlib.h>
#include "trainer.h"
#include "layout.h"
*/
import "C"

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Errors returned (wrapped) by the trainer.
var (
	ErrInvalid  = errors.New("invalid argument")
	ErrNoMemory = errors.New("out of memory")
	ErrPayload  = errors.New("malformed or mismatching payload")
	ErrState    = errors.New("state does not match this model")
	ErrNoGrad   = errors.New("no gradients: run Step first")
	ErrDevice   = errors.New("GPU runtime failure")
	// ErrNoGPU means this process has no GPU to train on (GPUAvailable).
	ErrNoGPU  = errors.New("no GPU")
	ErrClosed = errors.New("trainer is closed")
)

func codeErr(rc C.int, what string) error {
	var base error
	switch rc {
	case C.TR_OK:
		return nil
	case C.TR_EINVAL:
		base = ErrInvalid
	case C.TR_ENOMEM:
		base = ErrNoMemory
	case C.TR_EPAYLOAD:
		base = ErrPayload
	case C.TR_ESTATE:
		base = ErrState
	case C.TR_ENOGRAD:
		base = ErrNoGrad
	case C.TR_EDEVICE:
		base = ErrDevice
	default:
		base = fmt.Errorf("native trainer error code %d", int(rc))
	}
	return fmt.Errorf("%s: %w", what, base)
}

// Trainer owns one native model. Its methods are safe for concurrent use
// (calls are serialised). The C handle is the only C pointer Go keeps; no
// Go memory is retained by C after a call returns.
type Trainer struct {
	mu  sync.Mutex
	m   *C.tr_model
	be  backend
	cfg Config
	n   int // parameter count
	hdr int // state blob header bytes
}

// CConfig is cfg as the C API's tr_config, in that struct's bytes: for the
// cgo package beside this one (cuda/emu), whose C.tr_config is another Go
// type of the same layout.
func (cfg Config) CConfig() []byte {
	cc := cfg.c()
	return C.GoBytes(unsafe.Pointer(&cc), C.sizeof_tr_config)
}

// c is cfg as the C API's tr_config.
func (cfg Config) c() C.tr_config {
	cc := C.tr_config{
		vocab: C.int(cfg.Vocab), padded_vocab: C.int(cfg.PaddedVocab), layers: C.int(cfg.Layers),
		channels: C.int(cfg.Channels), heads: C.int(cfg.Heads), seq_len: C.int(cfg.SeqLen), micro_batch: C.int(cfg.MicroBatch),
		grad_shards: C.int(cfg.GradShards),
	}
	if cfg.IsMX8() {
		cc.arith = C.TR_ARITH_MX8
	}
	if cfg.Recompute {
		cc.recompute = 1
	}
	if cfg.IsLlama() {
		cc.arch = C.TR_ARCH_LLAMA
		cc.kv_heads, cc.hidden, cc.rope_theta = C.int(cfg.KVHeads), C.int(cfg.Hidden), C.float(cfg.RopeTheta)
		if cfg.Untied {
			cc.untied = 1
		}
		cc.rms_eps = C.float(cfg.RMSNormEps)
		if cfg.RopeScaling == RopeLlama3 {
			cc.rope_scaling = C.TR_ROPE_LLAMA3
			cc.rope_factor, cc.rope_low_freq, cc.rope_high_freq = C.float(cfg.RopeFactor), C.float(cfg.RopeLowFreq), C.float(cfg.RopeHighFreq)
			cc.rope_orig_ctx = C.int(cfg.RopeOrigCtx)
		}
		if cfg.QKVBias {
			cc.qkv_bias = 1
		}
	}
	return cc
}

// arithCode is a numeric contract's C code.
func arithCode(arith string) (C.int, error) {
	switch arith {
	case "", ArithFP32:
		return C.TR_ARITH_FP32, nil
	case ArithMX8:
		return C.TR_ARITH_MX8, nil
	}
	return 0, fmt.Errorf("unknown numeric contract %q (known: fp32, mx8): %w", arith, ErrInvalid)
}

// shapes lists the parameter tensors' shapes of a model of cfg (layout.h).
func (cfg Config) shapes() [][]int {
	cc := cfg.c()
	var out [][]int
	for i := 0; ; i++ {
		var s [3]C.int
		nd := int(C.tr_config_shape(&cc, C.int(i), &s[0]))
		if nd == 0 {
			return out
		}
		dims := make([]int, nd)
		for d := range dims {
			dims[d] = int(s[d])
		}
		out = append(out, dims)
	}
}

// New builds a model of cfg's architecture with its initialisation drawn from seed.
func New(cfg Config, seed uint64) (*Trainer, error) { return create(cfg, seed, true) }

// create is New; without device the trainer opens no GPU in any build
// (the host footprint test measures the CPU path alone).
func create(cfg Config, seed uint64, device bool) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A valid config can still size buffers beyond 64 bits (1024 layers
	// of 65536-token sequences), which tr_create's arithmetic would wrap.
	if _, err := Footprint(cfg, FootprintOptions{Optimizer: "adamw", Threads: 1}); err != nil {
		return nil, err
	}
	cc := cfg.c()
	var m *C.tr_model
	if err := codeErr(C.tr_create(&cc, C.uint64_t(seed), &m), "create model"); err != nil {
		return nil, err
	}
	var hdr [128]byte
	var hl C.size_t
	if err := codeErr(C.tr_state_header(m, (*C.uint8_t)(&hdr[0]), C.size_t(len(hdr)), &hl), "state header"); err != nil {
		C.tr_destroy(m)
		return nil, err
	}
	t := &Trainer{m: m, cfg: cfg, n: int(C.tr_num_params(m)), hdr: int(hl)}
	if !device {
		return t, nil
	}
	if err := t.initBackend(); err != nil {
		C.tr_destroy(m)
		return nil, err
	}
	return t, nil
}

// Close frees the native model. Later calls return ErrClosed.
func (t *Trainer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		return ErrClosed
	}
	t.closeBackend()
	C.tr_destroy(t.m)
	t.m = nil
	return nil
}

// Config returns the model configuration.
func (t *Trainer) Config() Config { return t.cfg }

// NumParams returns the number of fp32 parameters.
func (t *Trainer) NumParams() int { return t.n }

func (t *Trainer) lock() error {
	t.mu.Lock()
	if t.m == nil {
		t.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// SetThreads sets the OpenMP threads used by this trainer's kernels
// (default: all processors). Results do not depend on it.
func (t *Trainer) SetThreads(n int) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_set_threads(t.m, C.int(n)), fmt.Sprintf("set %d threads", n))
}

// ISA selects the GEMM kernel's instruction set; all levels give the same bits.
type ISA int

// ISA levels, in order; a cap picks the highest one the CPU has at or
// below it. The VNNI and AMX levels add int8 dot products for mx8; fp32
// runs the AVX2 or AVX-512 kernels on them.
const (
	ISAAuto       ISA = C.TR_ISA_AUTO
	ISABase       ISA = C.TR_ISA_BASE // x86-64 baseline (SSE2)
	ISAAVX2       ISA = C.TR_ISA_AVX2
	ISAAVXVNNI    ISA = C.TR_ISA_AVXVNNI
	ISAAVX512     ISA = C.TR_ISA_AVX512
	ISAAVX512VNNI ISA = C.TR_ISA_AVX512VNNI
	ISAAMX        ISA = C.TR_ISA_AMX // AMX-INT8 tiles; on Linux only once the kernel grants them

	// isaAMXEmulated runs the AMX kernel with its tile instructions
	// emulated in C (everything else at x86-64) on any CPU: the tests'
	// check of that kernel where the CPU has no AMX. Not in ISALevels.
	isaAMXEmulated ISA = C.TR_ISA_AMX_EMULATED
)

// ISALevels lists the levels from the lowest.
var ISALevels = []ISA{ISABase, ISAAVX2, ISAAVXVNNI, ISAAVX512, ISAAVX512VNNI, ISAAMX}

func (i ISA) String() string {
	switch i {
	case ISAAuto:
		return "auto"
	case ISABase:
		return "x86-64"
	case ISAAVX2:
		return "avx2"
	case ISAAVXVNNI:
		return "avx-vnni"
	case ISAAVX512:
		return "avx512"
	case ISAAVX512VNNI:
		return "avx512-vnni"
	case ISAAMX:
		return "amx-int8"
	case isaAMXEmulated:
		return "amx-int8-emulated"
	}
	return fmt.Sprintf("isa(%d)", int(i))
}

// SetISA caps the GEMM kernel at level (ISAAuto: best available) and returns
// the level in use.
func (t *Trainer) SetISA(level ISA) (ISA, error) {
	if err := t.lock(); err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	rc := C.tr_set_isa(t.m, C.int(level))
	if rc < 0 {
		return 0, codeErr(rc, "set ISA "+level.String())
	}
	return ISA(rc), nil
}

// checkBatch validates tokens/targets for sequences of length seqLen.
func (t *Trainer) checkBatch(tokens, targets []int32, seqLen int) (int, error) {
	if seqLen < 1 || seqLen > t.cfg.SeqLen {
		return 0, fmt.Errorf("sequence length %d out of range [1, %d]: %w", seqLen, t.cfg.SeqLen, ErrInvalid)
	}
	if len(tokens) == 0 || len(tokens)%seqLen != 0 || len(targets) != len(tokens) {
		return 0, fmt.Errorf("batch of %d tokens and %d targets is not a whole number of %d-token sequences: %w",
			len(tokens), len(targets), seqLen, ErrInvalid)
	}
	for i := range tokens {
		if tokens[i] < 0 || int(tokens[i]) >= t.cfg.Vocab {
			return 0, fmt.Errorf("token %d at position %d outside vocabulary of %d: %w", tokens[i], i, t.cfg.Vocab, ErrInvalid)
		}
		if targets[i] < Ignore || int(targets[i]) >= t.cfg.Vocab {
			return 0, fmt.Errorf("target %d at position %d outside vocabulary of %d (or Ignore): %w", targets[i], i, t.cfg.Vocab, ErrInvalid)
		}
	}
	return len(tokens) / seqLen, nil
}

// Ignore is the target of a position the loss skips (C's TR_IGNORE): a
// fine-tuning batch trains only the targets its loss mask marks.
const Ignore = C.TR_IGNORE

// Step runs forward and backward over the batch (sequences of seqLen tokens,
// targets[i] the token after tokens[i], or Ignore), in micro-batches of
// Config.MicroBatch sequences, and returns the mean loss over the targets
// it trains (0 when it trains none). The gradients of the
// mean loss replace those of the previous step. ctx is checked before the
// native call; a step, once started, runs to completion.
func (t *Trainer) Step(ctx context.Context, tokens, targets []int32, seqLen int) (float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := t.checkBatch(tokens, targets, seqLen)
	if err != nil {
		return 0, err
	}
	if err := t.lock(); err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	var loss C.float
	rc := t.stepBackend((*C.int32_t)(unsafe.Pointer(&tokens[0])), (*C.int32_t)(unsafe.Pointer(&targets[0])), C.int(n), C.int(seqLen), &loss)
	if err := t.backendErr(rc, "training step"); err != nil {
		return 0, err
	}
	return float32(loss), nil
}

// ZeroStep stands in for Step without computing anything: the gradients
// become zero (psyche-client train --dummy-training).
func (t *Trainer) ZeroStep() error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_zero_step(t.m), "zero step")
}

// Eval returns the mean loss of the batch under the current weights
// (forward only; nothing changes).
func (t *Trainer) Eval(ctx context.Context, tokens, targets []int32, seqLen int) (float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := t.checkBatch(tokens, targets, seqLen)
	if err != nil {
		return 0, err
	}
	if err := t.lock(); err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	var loss C.float
	rc := t.evalBackend((*C.int32_t)(unsafe.Pointer(&tokens[0])), (*C.int32_t)(unsafe.Pointer(&targets[0])), C.int(n), C.int(seqLen), &loss)
	if err := t.backendErr(rc, "evaluation"); err != nil {
		return 0, err
	}
	return float32(loss), nil
}

// Grads returns a copy of the gradients of the last Step.
func (t *Trainer) Grads() ([]float32, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	out := make([]float32, t.n)
	return out, codeErr(C.tr_get_grads(t.m, (*C.float)(&out[0]), C.size_t(t.n)), "read gradients")
}

// Params returns a copy of the (master) parameters in the flat layout of Tensors.
func (t *Trainer) Params() ([]float32, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	out := make([]float32, t.n)
	return out, codeErr(C.tr_get_params(t.m, (*C.float)(&out[0]), C.size_t(t.n)), "read parameters")
}

// SetParams replaces the parameters (all finite, NumParams long). Optimizer
// buffers are kept; the DeMo lookahead is switched off until the next apply.
func (t *Trainer) SetParams(p []float32) error {
	if len(p) != t.n {
		return fmt.Errorf("got %d parameters, model has %d: %w", len(p), t.n, ErrInvalid)
	}
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_set_params(t.m, (*C.float)(&p[0]), C.size_t(t.n)), "set parameters")
}

// Tensor describes one parameter tensor inside the flat parameter array.
type Tensor struct {
	Name   string
	Shape  []int
	Offset int // in floats
	Size   int // in floats
}

// Tensors lists the parameter tensors in storage order.
func (t *Trainer) Tensors() ([]Tensor, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	n := int(C.tr_num_tensors(t.m))
	out := make([]Tensor, n)
	for i := range n {
		var name *C.char
		var ndim C.int
		var shape [3]C.int
		var off C.size_t
		if err := codeErr(C.tr_tensor_info(t.m, C.int(i), &name, &ndim, &shape[0], &off), "tensor info"); err != nil {
			return nil, err
		}
		size := 1
		dims := make([]int, int(ndim))
		for d := range dims {
			dims[d] = int(shape[d])
			size *= dims[d]
		}
		out[i] = Tensor{Name: C.GoString(name), Shape: dims, Offset: int(off), Size: size}
	}
	return out, nil
}

// AdamW holds AdamW hyperparameters.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	ClipNorm                           float32 // <= 0: no gradient clipping
}

// AdamWStep updates the parameters from the gradients of the last Step.
func (t *Trainer) AdamWStep(hp AdamW) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	c := C.tr_adamw{lr: C.float(hp.LR), beta1: C.float(hp.Beta1), beta2: C.float(hp.Beta2), eps: C.float(hp.Eps),
		weight_decay: C.float(hp.WeightDecay), clip_norm: C.float(hp.ClipNorm)}
	return t.backendErr(t.adamwBackend(&c), "AdamW step")
}

// DeMo holds the DeMo/DisTrO hyperparameters. Chunk, TopK and OneBit fix the
// payload layout: every client of a run must use the same values.
type DeMo struct {
	LR          float32
	Decay       float32 // momentum decay, e.g. 0.999
	WeightDecay float32
	ClipNorm    float32 // <= 0: no gradient clipping
	Chunk       int     // DCT chunk edge, 1..256, e.g. 64
	TopK        int     // coefficients kept per chunk, 1..65535, e.g. 8
	OneBit      bool    // send sign bits only, decoded as +1/-1
	Lookahead   bool    // compute gradients at x - lr*sign(delta)
	// Overlap (DeMoGenerate): the payload is applied one step late, after
	// the next step's gradients, so those are taken at x - lr*sign(U),
	// U the update this payload asks for (the pending update; see README.md,
	// "Overlapped steps"). Not with Lookahead.
	Overlap bool
}

func (hp DeMo) c() C.tr_demo {
	return C.tr_demo{lr: C.float(hp.LR), decay: C.float(hp.Decay), weight_decay: C.float(hp.WeightDecay),
		clip_norm: C.float(hp.ClipNorm), chunk: cInt(hp.Chunk), topk: cInt(hp.TopK), one_bit: cBool(hp.OneBit),
		lookahead: cBool(hp.Lookahead), overlap: cBool(hp.Overlap)}
}

func cBool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// cInt converts a setting for C. Beyond C's int a value would wrap (2^32 +
// 12 to 12); -1 is out of range for every setting, so the trainer rejects
// it as the Go decoders do.
func cInt(v int) C.int {
	if v != int(int32(v)) {
		return -1
	}
	return C.int(v)
}

// PayloadSize returns the exact size of a DeMo payload for hp.
func (t *Trainer) PayloadSize(hp DeMo) (int, error) {
	if err := t.lock(); err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	return t.payloadSize(hp)
}

func (t *Trainer) payloadSize(hp DeMo) (int, error) {
	c := hp.c()
	var size C.size_t
	if err := codeErr(C.tr_demo_payload_size(t.m, &c, &size), "DeMo payload size"); err != nil {
		return 0, err
	}
	return int(size), nil
}

// DeMoGenerate folds the gradients of the last Step into this client's
// momentum and returns the payload to broadcast (format in README.md).
func (t *Trainer) DeMoGenerate(hp DeMo) ([]byte, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	size, err := t.payloadSize(hp)
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	c := hp.c()
	var n C.size_t
	if err := t.backendErr(t.demoGenerateBackend(&c, (*C.uint8_t)(&out[0]), C.size_t(size), &n), "DeMo generate"); err != nil {
		return nil, err
	}
	return out[:n], nil
}

// ValidatePayload checks a peer's payload against this model and hp without
// changing anything.
func (t *Trainer) ValidatePayload(hp DeMo, p []byte) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	c := hp.c()
	var ptr *C.uint8_t
	if len(p) > 0 {
		ptr = (*C.uint8_t)(&p[0])
	}
	return codeErr(C.tr_demo_validate(t.m, &c, ptr, C.size_t(len(p))), "validate DeMo payload")
}

// DeMoApply applies the scatter-mean of the payloads, in the given (client)
// order, as one sign-SGD step. Either all payloads are valid and the step is
// taken, or nothing changes.
func (t *Trainer) DeMoApply(hp DeMo, payloads [][]byte) error {
	buf, lens := concat(payloads)
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	c := hp.c()
	return t.backendErr(t.demoApplyBackend(&c, (*C.uint8_t)(&buf[0]), &lens[0], C.int(len(payloads))), "DeMo apply")
}

// concat copies payloads into one buffer with their lengths: C may not
// receive Go memory holding Go pointers. Both have a spare element, so
// neither is empty.
func concat(payloads [][]byte) ([]byte, []C.size_t) {
	total := 0
	for _, p := range payloads {
		total += len(p)
	}
	buf := make([]byte, 0, total+1)
	lens := make([]C.size_t, len(payloads)+1)
	for i, p := range payloads {
		buf = append(buf, p...)
		lens[i] = C.size_t(len(p))
	}
	return buf[:total+1], lens
}

// ExportState returns the full state (parameters, optimizer buffers, step
// counters, last DeMo lr) as a canonical blob; ImportState restores it.
func (t *Trainer) ExportState() ([]byte, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return t.exportState()
}

func (t *Trainer) exportState() ([]byte, error) {
	var size C.size_t
	if err := codeErr(C.tr_state_size(t.m, &size), "state size"); err != nil {
		return nil, err
	}
	out := make([]byte, int(size))
	return out, codeErr(C.tr_state_export(t.m, (*C.uint8_t)(&out[0]), size), "export state")
}

// ImportState restores a blob from ExportState of a model with the same
// shape. A malformed blob is rejected and changes nothing.
func (t *Trainer) ImportState(state []byte) error {
	if len(state) == 0 {
		return fmt.Errorf("import state: empty blob: %w", ErrState)
	}
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_state_import(t.m, (*C.uint8_t)(&state[0]), C.size_t(len(state))), "import state")
}

// Digest is sha256 over the canonical state blob, then the payload length as
// u64 little-endian, then the payload: one value per step that an auditor
// replaying the same inputs on the same backend must reproduce bit for bit.
// The state is hashed in pieces, so large models need no full copy.
func (t *Trainer) Digest(payload []byte) ([32]byte, error) {
	if err := t.lock(); err != nil {
		return [32]byte{}, err
	}
	defer t.mu.Unlock()
	var size C.size_t
	if err := codeErr(C.tr_state_size(t.m, &size), "state size"); err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	buf := make([]byte, min(int(size), digestChunk*4))
	var hl C.size_t
	if err := codeErr(C.tr_state_header(t.m, (*C.uint8_t)(&buf[0]), C.size_t(len(buf)), &hl), "state header"); err != nil {
		return [32]byte{}, err
	}
	h.Write(buf[:hl])
	floats := (int(size) - int(hl)) / 4
	for first := 0; first < floats; first += digestChunk {
		n := min(digestChunk, floats-first)
		if err := codeErr(C.tr_state_floats(t.m, C.size_t(first), C.size_t(n), (*C.uint8_t)(&buf[0])), "state floats"); err != nil {
			return [32]byte{}, err
		}
		h.Write(buf[:4*n])
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write(n[:])
	h.Write(payload)
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d, nil
}

// stateHeader returns the header of this trainer's state blob (state.c).
func (t *Trainer) stateHeader() ([]byte, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	buf := make([]byte, t.hdr)
	var hl C.size_t
	if err := codeErr(C.tr_state_header(t.m, (*C.uint8_t)(&buf[0]), C.size_t(len(buf)), &hl), "state header"); err != nil {
		return nil, err
	}
	return buf, nil
}

// digestChunk is how many state floats Digest hashes per piece.
const digestChunk = 1 << 20

// Logits runs the forward pass at the master weights over tokens (n
// sequences of seqLen) and returns the logits, n*seqLen rows of Vocab.
func (t *Trainer) Logits(ctx context.Context, tokens []int32, seqLen int) ([]float32, error) {
	n, err := t.checkBatch(tokens, tokens, seqLen)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	out := make([]float32, len(tokens)*t.cfg.Vocab)
	rc := C.tr_logits(t.m, (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.int(n), C.int(seqLen), (*C.float)(&out[0]))
	return out, codeErr(rc, "logits")
}

// DecodeReset starts generation: the key/value cache is emptied.
func (t *Trainer) DecodeReset() error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_decode_reset(t.m), "decode reset")
}

// DecodeNext appends token to the sequence being generated and returns the
// logits of the next token (Vocab values): the same bits as Logits' last row
// over the whole sequence, without recomputing it. At most SeqLen tokens
// after DecodeReset.
func (t *Trainer) DecodeNext(token int32) ([]float32, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if token < 0 || int(token) >= t.cfg.Vocab {
		return nil, fmt.Errorf("token %d outside vocabulary of %d: %w", token, t.cfg.Vocab, ErrInvalid)
	}
	out := make([]float32, t.cfg.Vocab)
	if err := codeErr(C.tr_decode_next(t.m, C.int32_t(token), (*C.float)(&out[0])), "decode"); err != nil {
		return nil, fmt.Errorf("%w (after DecodeReset, at most %d tokens)", err, t.cfg.SeqLen)
	}
	return out, nil
}

// Activations returns the first n floats of the last micro-batch's forward
// activations in the layout of layout.h (for tests of the GPU path).
func (t *Trainer) Activations(n int) ([]float32, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if n < 1 {
		return nil, fmt.Errorf("activations: %d floats: %w", n, ErrInvalid)
	}
	out := make([]float32, n)
	return out, codeErr(C.tr_activations(t.m, (*C.float)(&out[0]), C.size_t(n)), "activations")
}

// MXSlices says which operands of an mx8 GEMM take two int8 slices
// (README, "Two slices"): MXSliceA, MXSliceB, both or neither.
type MXSlices int

const (
	MXSliceA MXSlices = 1
	MXSliceB MXSlices = 2

	// MXInputGradSlices are the slices of the model's input-gradient GEMMs.
	MXInputGradSlices = MXSlices(C.TR_MX_DINP_SLICES)
)

// String names the operands in two slices: "", "A2", "B2" or "A2B2".
func (s MXSlices) String() string {
	var out string
	if s&MXSliceA != 0 {
		out += "A2"
	}
	if s&MXSliceB != 0 {
		out += "B2"
	}
	return out
}

// GEMM computes out(M,N) = a(M,K) * b(N,K)^T with the model's kernel in
// the numeric contract arith (ArithFP32 or ArithMX8; slices only with
// mx8), for benchmarks and tests.
func (t *Trainer) GEMM(arith string, slices MXSlices, m, n, k int, a, b, out []float32) error {
	ca, err := arithCode(arith)
	if err != nil {
		return err
	}
	if m < 1 || n < 1 || k < 1 || len(a) != m*k || len(b) != n*k || len(out) != m*n {
		return fmt.Errorf("GEMM shapes (%d,%d,%d) do not match buffers: %w", m, n, k, ErrInvalid)
	}
	if slices < 0 || slices > MXSliceA|MXSliceB || (slices != 0 && arith != ArithMX8) {
		return fmt.Errorf("GEMM slices %d with arith %s: %w", slices, arith, ErrInvalid)
	}
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return codeErr(C.tr_gemm(t.m, ca, C.int(slices), C.int(m), C.int(n), C.int(k), (*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&out[0])), "GEMM")
}

// ChunkedDCT returns the chunked orthonormal 2-D DCT-II that DeMo applies to
// a (rows, cols) tensor: chunks of (largest divisor of rows <= chunk) x
// (largest divisor of cols <= chunk), each transformed on its own.
func ChunkedDCT(rows, cols, chunk int, x []float32) ([]float32, error) {
	return chunkedDCT(rows, cols, chunk, x, false)
}

// ChunkedIDCT inverts ChunkedDCT.
func ChunkedIDCT(rows, cols, chunk int, y []float32) ([]float32, error) {
	return chunkedDCT(rows, cols, chunk, y, true)
}

func chunkedDCT(rows, cols, chunk int, in []float32, inverse bool) ([]float32, error) {
	if rows < 1 || cols < 1 || len(in) != rows*cols {
		return nil, fmt.Errorf("DCT of %dx%d over %d values: %w", rows, cols, len(in), ErrInvalid)
	}
	out := make([]float32, len(in))
	r, c, ch, src, dst := C.int(rows), C.int(cols), C.int(chunk), (*C.float)(&in[0]), (*C.float)(&out[0])
	var rc C.int
	if inverse {
		rc = C.tr_dct_inverse(r, c, ch, src, dst)
	} else {
		rc = C.tr_dct_forward(r, c, ch, src, dst)
	}
	return out, codeErr(rc, "chunked DCT")
}

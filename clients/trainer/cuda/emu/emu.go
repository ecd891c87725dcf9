// Package emu runs the trainer's CUDA path (cuda/model.cu) on the host: the
// same source, compiled as C++ with emu.h standing in for the CUDA runtime,
// each kernel launch run thread by thread. Its tests check, on any machine,
// that the GPU kernels compute exactly the CPU path's bits.
package emu

/*
#cgo CXXFLAGS: -std=c++17 -O2 -I${SRCDIR}/..
#include <stdlib.h>
#include "api.h"
#include "../../layout.h"

// Name, offset and size of activation buffer i (TR_ACTS or TR_LLAMA_ACTS
// order) for batch sequences of length seq; -1 past the last.
static int emu_act(const tr_config *c, int batch, int seq, int i, const char **name, size_t *off, size_t *n) {
    TR_DIMS_(c, batch, seq);
    size_t o = 0;
    int k = 0;
#define EMU_X(nm, sz) if (k++ == i) { *name = #nm; *off = o; *n = (sz); return 0; } o += (sz);
    if (tr_is_llama(c)) {
        TR_LLAMA_ACTS(EMU_X)
    } else {
        TR_ACTS(EMU_X)
    }
#undef EMU_X
    return -1;
}
*/
import "C"

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/psyche-go/psyche/clients/trainer"
)

// Model is the emulated GPU model of one config.
type Model struct {
	g      *C.trgemu_model
	cfg    trainer.Config
	params int
}

// cConfig is cfg as this package's C.tr_config: trainer.Config.CConfig's bytes.
func cConfig(cfg trainer.Config) C.tr_config {
	b := cfg.CConfig()
	if len(b) != C.sizeof_tr_config {
		panic("trainer.Config.CConfig: not a tr_config")
	}
	return *(*C.tr_config)(unsafe.Pointer(&b[0]))
}

// New allocates the emulated device buffers for cfg, which holds params parameters.
func New(cfg trainer.Config, params int) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc := cConfig(cfg)
	var g *C.trgemu_model
	levels := bits.Len(uint(cfg.Shards())) - 1 // the shard tree's buffers above the gradients
	if rc := C.trgemu_create(&cc, 0, C.int(levels), &g); rc != 0 {
		return nil, fmt.Errorf("emulated GPU model: error %d", int(rc))
	}
	return &Model{g: g, cfg: cfg, params: params}, nil
}

func (m *Model) Close() { C.trgemu_destroy(m.g) }

// Device buffers (trainer_cuda.h's TRG_*).
const (
	Params = C.TRG_PARAMS
	Grads  = C.TRG_GRADS
	AdamM  = C.TRG_ADAM_M
	AdamV  = C.TRG_ADAM_V
)

// Upload copies data (one float per parameter) into device buffer buf.
func (m *Model) Upload(buf int, data []float32) error {
	if len(data) != m.params {
		return fmt.Errorf("emulated upload: %d floats, model has %d parameters", len(data), m.params)
	}
	if rc := C.trgemu_upload(m.g, C.int(buf), (*C.float)(&data[0]), C.size_t(len(data))); rc != 0 {
		return fmt.Errorf("emulated upload of buffer %d: error %d", buf, int(rc))
	}
	return nil
}

// Download returns a copy of device buffer buf.
func (m *Model) Download(buf int) ([]float32, error) {
	out := make([]float32, m.params)
	if rc := C.trgemu_download(m.g, C.int(buf), (*C.float)(&out[0]), C.size_t(len(out))); rc != 0 {
		return nil, fmt.Errorf("emulated download of buffer %d: error %d", buf, int(rc))
	}
	return out, nil
}

// Train runs forward and backward over n sequences of length t (tokens and
// targets hold n*t each) at the device weights, the gradients staying on
// the device, and returns the loss.
func (m *Model) Train(tokens, targets []int32, n, t int) (float32, error) {
	if len(tokens) != n*t || len(targets) != n*t || n < 1 || t < 1 {
		return 0, fmt.Errorf("emulated step: bad sizes")
	}
	var sum C.float
	rc := C.trgemu_step(m.g, C.TRG_PARAMS, (*C.int32_t)(unsafe.Pointer(&tokens[0])), (*C.int32_t)(unsafe.Pointer(&targets[0])), C.int(n), C.int(t),
		0, C.int(m.cfg.Shards()), &sum)
	if rc != 0 {
		return 0, fmt.Errorf("emulated step: error %d", int(rc))
	}
	return float32(sum) / (float32(n) * float32(t)), nil
}

// Step uploads weights, trains (Train) and returns the gradients and the loss.
func (m *Model) Step(weights []float32, tokens, targets []int32, n, t int) ([]float32, float32, error) {
	if err := m.Upload(Params, weights); err != nil {
		return nil, 0, err
	}
	loss, err := m.Train(tokens, targets, n, t)
	if err != nil {
		return nil, 0, err
	}
	grads, err := m.Download(Grads)
	return grads, loss, err
}

// AdamW takes AdamW step t (1 for the first) on the device's weights and
// moments (uploaded before the first) from its gradients.
func (m *Model) AdamW(hp trainer.AdamW, t uint64) error {
	c := C.tr_adamw{lr: C.float(hp.LR), beta1: C.float(hp.Beta1), beta2: C.float(hp.Beta2), eps: C.float(hp.Eps),
		weight_decay: C.float(hp.WeightDecay), clip_norm: C.float(hp.ClipNorm)}
	if rc := C.trgemu_adamw(m.g, &c, C.uint64_t(t)); rc != 0 {
		return fmt.Errorf("emulated AdamW step %d: error %d", t, int(rc))
	}
	return nil
}

// Activations returns the first n floats of the last micro-batch's activations.
func (m *Model) Activations(n int) ([]float32, error) {
	out := make([]float32, n)
	if rc := C.trgemu_activations(m.g, (*C.float)(&out[0]), C.size_t(n)); rc != 0 {
		return nil, fmt.Errorf("emulated activations: error %d", int(rc))
	}
	return out, nil
}

// Buffer is one activation buffer of layout.h.
type Buffer struct {
	Name         string
	Offset, Size int
}

// ActivationBuffers lists the activation buffers for batch sequences of length seq.
func ActivationBuffers(cfg trainer.Config, batch, seq int) []Buffer {
	cc := cConfig(cfg)
	var out []Buffer
	for i := 0; ; i++ {
		var name *C.char
		var off, n C.size_t
		if C.emu_act(&cc, C.int(batch), C.int(seq), C.int(i), &name, &off, &n) != 0 {
			return out
		}
		out = append(out, Buffer{Name: C.GoString(name), Offset: int(off), Size: int(n)})
	}
}

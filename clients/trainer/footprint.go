package trainer

/*
#include <malloc.h>
#include "trainer.h"
#include "layout.h"

// glibc's mallinfo2 (2.33 and later): the bytes in use, and usmblks, which
// glibc leaves 0 and the footprint test's malloc counter fills with the
// most in use since the last call. -1 without mallinfo2.
static long long tr_heap_bytes(long long *peak) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    *peak = (long long)mi.usmblks;
    return (long long)(mi.uordblks + mi.hblkhd);
#else
    *peak = -1;
    return -1;
#endif
}
*/
import "C"

import "fmt"

// FootprintOptions says how a model is trained, which sets what it
// allocates beyond its weights, gradients and activations.
type FootprintOptions struct {
	Optimizer string // "adamw", "demo" or "sparseloco" (whose inner steps are AdamW's)
	// Overlap: DeMo or SparseLoCo with overlapped steps (DeMo.Overlap,
	// SparseLoCo.Overlap), which keep the pending update (and DeMo its
	// lookahead point).
	Overlap   bool
	Lookahead bool // DeMo's momentum lookahead (DeMo.Lookahead), which keeps a lookahead point
	GPU       bool // the CUDA path: device buffers, plus the host copies it keeps
	// Threads is the most threads the trainer runs on: New sizes the
	// per-thread scratch for this machine's processors, and SetThreads
	// grows it (never shrinks it). 0: the processors here, 1 to 256 otherwise.
	Threads int
	// Chunk and TopK are DeMo's or SparseLoCo's (0: 64 and 32, the run
	// configs' compression_chunk and compression_topk); Payloads is how many
	// payloads an apply takes, the members of a step (0: 1). They size the
	// optimizers' scratch; AdamW takes none of them.
	Chunk, TopK, Payloads int
}

// MemoryBytes is what one memory (the host's or the GPU's) holds, in bytes,
// by category (trainer.h, tr_mem, says what each covers).
type MemoryBytes struct {
	Weights     int64 // the parameters
	Gradients   int64 // their gradients and the embedding's share of wte's
	Optimizer   int64 // AdamW moments, DeMo momentum, lookahead and pending update, SparseLoCo error feedback and round start
	Activations int64 // a micro-batch's activations and their gradients (on the GPU also attention's score gradients, row scratch, token ids)
	MX8         int64 // quantized GEMM operands (mx8 only)
	Scratch     int64 // per-thread GEMM and attention scratch, rotary tables, DCT bases, DeMo's tensor buffers, the GPU's payload scratch, page-locked buffers
	// Transient is the most one call (an optimizer step, a generate, an
	// apply) allocates on top of the rest and frees before it returns.
	Transient int64
}

// Steady is what stays allocated between calls: all but Transient.
func (b MemoryBytes) Steady() int64 {
	return b.Weights + b.Gradients + b.Optimizer + b.Activations + b.MX8 + b.Scratch
}

// Peak is the most allocated at once: the steady bytes and one call's.
func (b MemoryBytes) Peak() int64 { return b.Steady() + b.Transient }

// MemoryFootprint is the memory a trainer allocates for training, on the
// host and on the GPU (Footprint computes it; Go has one name for a type
// and a function, so the type takes the longer one). The host's counts on the GPU path too: the trainer keeps
// the CPU path's buffers (weights, gradients, optimizer state, activations,
// scratch) beside the device's. Not counted: a few KiB of model structs,
// Go's own allocations (payloads, state blobs, what the caller holds), and
// buffers that training does not use (text generation's key/value cache,
// GEMM's benchmark scratch).
type MemoryFootprint struct {
	OnHost, OnDevice MemoryBytes
}

// Host is the peak host memory.
func (f MemoryFootprint) Host() int64 { return f.OnHost.Peak() }

// Device is the peak GPU memory (0 on the CPU path). The GPU path's
// transient buffers are all on the host: device scratch, once grown, stays.
func (f MemoryFootprint) Device() int64 { return f.OnDevice.Peak() }

// Params returns the number of parameters of a model of c (layout.h), or
// 0 when c is not a valid config.
func (c Config) Params() int64 {
	if c.Validate() != nil {
		return 0
	}
	cc := c.c()
	return int64(C.tr_param_layout(&cc, nil, nil))
}

// The optimizers' defaults for FootprintOptions' zero values.
const (
	footprintChunk = 64
	footprintTopK  = 32
)

// Footprint computes the memory a trainer of cfg allocates for training as
// opt says, per memory and category, without allocating it. The figures
// are exact for the buffers the trainer allocates (the tests compare them
// with the allocator's counts); the allocator's own overhead comes on top
// (16 bytes or so a buffer, a page for large ones).
func Footprint(cfg Config, opt FootprintOptions) (MemoryFootprint, error) {
	if err := cfg.Validate(); err != nil {
		return MemoryFootprint{}, fmt.Errorf("footprint: %w: %w", err, ErrInvalid)
	}
	o := C.tr_footprint_opts{gpu: cBool(opt.GPU), lookahead: cBool(opt.Lookahead), overlap: cBool(opt.Overlap)}
	switch opt.Optimizer {
	case "adamw":
		o.optimizer = C.TR_OPT_ADAMW
		switch {
		case opt.Overlap || opt.Lookahead:
			return MemoryFootprint{}, fmt.Errorf("footprint: Overlap and Lookahead are DeMo's and SparseLoCo's, not AdamW's: %w", ErrInvalid)
		case opt.Chunk != 0 || opt.TopK != 0 || opt.Payloads != 0:
			return MemoryFootprint{}, fmt.Errorf("footprint: Chunk, TopK and Payloads are DeMo's and SparseLoCo's, not AdamW's: %w", ErrInvalid)
		}
	case "demo", "sparseloco":
		o.optimizer = C.TR_OPT_DEMO
		if opt.Optimizer == "sparseloco" {
			o.optimizer = C.TR_OPT_LOCO
		}
		chunk, topk, payloads := opt.Chunk, opt.TopK, opt.Payloads
		if chunk == 0 {
			chunk = footprintChunk
		}
		if topk == 0 {
			topk = footprintTopK
		}
		if payloads == 0 {
			payloads = 1
		}
		switch {
		case chunk < 1 || chunk > 256:
			return MemoryFootprint{}, fmt.Errorf("footprint: Chunk %d out of range [1, 256]: %w", opt.Chunk, ErrInvalid)
		case topk < 1 || topk > 65535:
			return MemoryFootprint{}, fmt.Errorf("footprint: TopK %d out of range [1, 65535]: %w", opt.TopK, ErrInvalid)
		case payloads < 1 || payloads > maxLoCoMembers:
			return MemoryFootprint{}, fmt.Errorf("footprint: Payloads %d out of range [1, %d]: %w", opt.Payloads, maxLoCoMembers, ErrInvalid)
		case opt.Lookahead && opt.Optimizer != "demo":
			return MemoryFootprint{}, fmt.Errorf("footprint: Lookahead is DeMo's, not SparseLoCo's: %w", ErrInvalid)
		case opt.Lookahead && opt.Overlap:
			return MemoryFootprint{}, fmt.Errorf("footprint: Lookahead and Overlap exclude each other: %w", ErrInvalid)
		}
		o.chunk, o.topk, o.payloads = C.int(chunk), C.int(topk), C.int(payloads)
	default:
		return MemoryFootprint{}, fmt.Errorf("footprint: Optimizer %q (known: adamw, demo, sparseloco): %w", opt.Optimizer, ErrInvalid)
	}
	threads := opt.Threads
	if threads == 0 {
		threads = defaultThreads()
	}
	if threads < 1 || threads > 256 {
		return MemoryFootprint{}, fmt.Errorf("footprint: Threads %d out of range [1, 256] (0: the processors here): %w", opt.Threads, ErrInvalid)
	}
	o.threads = C.int(threads)
	cc := cfg.c()
	var h, d C.tr_mem
	if C.tr_footprint(&cc, &o, &h, &d) != C.TR_OK {
		return MemoryFootprint{}, fmt.Errorf("footprint: %d layers of width %d, %d heads, micro-batches of %d sequences of %d: sizes beyond 64 bits: %w",
			cfg.Layers, cfg.Channels, cfg.Heads, cfg.MicroBatch, cfg.SeqLen, ErrInvalid)
	}
	return MemoryFootprint{OnHost: memoryBytes(h), OnDevice: memoryBytes(d)}, nil
}

// defaultThreads is the thread count New gives a trainer (its scratch's).
func defaultThreads() int { return int(C.tr_default_threads()) }

func memoryBytes(m C.tr_mem) MemoryBytes {
	return MemoryBytes{Weights: int64(m.weights), Gradients: int64(m.grads), Optimizer: int64(m.optimizer),
		Activations: int64(m.activations), MX8: int64(m.mx8), Scratch: int64(m.scratch), Transient: int64(m.transient)}
}

// heapBytes is glibc's count of the bytes malloc has handed out and not
// taken back (mallinfo2: in arenas and in mmapped blocks, chunk headers
// and rounding included), for the footprint tests;
// -1 without glibc 2.33 or later.
func heapBytes() int64 {
	n, _ := heapStats()
	return n
}

// heapStats is mallinfo2's bytes in use and its usmblks: 0 from glibc,
// from the footprint test's malloc counter (LD_PRELOAD) the most bytes in
// use since the last call.
func heapStats() (inUse, peak int64) {
	var p C.longlong
	n := C.tr_heap_bytes(&p)
	return int64(n), int64(p)
}

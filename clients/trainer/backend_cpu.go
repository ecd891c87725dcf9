//go:build !cuda

package trainer

/*
#include "trainer.h"
*/
import "C"

// Backend names the compute path in use.
func (t *Trainer) Backend() string { return "cpu" }

func (t *Trainer) initBackend() error { return nil }

func (t *Trainer) closeBackend() {}

func (t *Trainer) stepBackend(tokens, targets *C.int32_t, n, seqLen C.int, loss *C.float) C.int {
	return C.tr_step(t.m, tokens, targets, n, seqLen, loss)
}

package trainer

/*
#include "trainer.h"
*/
import "C"

// SparseLoCo holds the multi-step mode's outer settings. Chunk, TopK and
// ValueBits fix the payload layout: every client of a run must use the same
// values. The inner steps are Step and AdamWStep between LoCoBegin and
// LoCoGenerate.
type SparseLoCo struct {
	// OuterLR is the outer rate summed over members: a round that applies
	// n payloads takes x -= min(1, OuterLR/n) * their scatter-mean (each
	// entry's sum over the payloads that hold it, divided by their count).
	// Each payload weighs OuterLR/n, and no entry moves past its senders'
	// mean (README.md, "A stable outer step").
	OuterLR   float32
	Decay     float32 // error feedback decay, 0..1
	Chunk     int     // chunk edge of the 2-D views, 1..256
	TopK      int     // entries kept per chunk, 1..65535
	ValueBits int     // 1, 2, 4, 8 (per-chunk scaled codes) or 32 (f32)
	// Overlap (LoCoGenerate): the payload is applied one round late, after
	// the next round has trained, so that round trains from the weights
	// less this client's own share of the step to come: its payload's
	// values at the rate of a round applying all Members' payloads (the
	// pending update; README.md, "Overlapped rounds").
	Overlap bool
	Members int // with Overlap: the round's member count, 1..65535
}

// maxLoCoMembers bounds SparseLoCo.Members (TR_LOCO_MAX_MEMBERS).
const maxLoCoMembers = 65535

func (hp SparseLoCo) c() C.tr_loco {
	return C.tr_loco{outer_lr: C.float(hp.OuterLR), decay: C.float(hp.Decay), chunk: cInt(hp.Chunk),
		topk: cInt(hp.TopK), value_bits: cInt(hp.ValueBits), overlap: cBool(hp.Overlap), members: cInt(hp.Members)}
}

// LoCoPayloadSize returns the exact size of a SparseLoCo payload for hp.
func (t *Trainer) LoCoPayloadSize(hp SparseLoCo) (int, error) {
	if err := t.lock(); err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	return t.locoSize(hp)
}

func (t *Trainer) locoSize(hp SparseLoCo) (int, error) {
	c := hp.c()
	var size C.size_t
	if err := codeErr(C.tr_loco_payload_size(t.m, &c, &size), "SparseLoCo payload size"); err != nil {
		return 0, err
	}
	return int(size), nil
}

// LoCoBegin starts a round: it saves the weights, the AdamW moments and the
// counters, which LoCoGenerate measures the pseudo-gradient from and
// LoCoAbort restores. A round already begun is an error.
func (t *Trainer) LoCoBegin() error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return t.backendErr(t.locoBeginBackend(), "begin SparseLoCo round")
}

// LoCoAbort ends a round without a payload: weights, AdamW moments and
// counters are as LoCoBegin found them.
func (t *Trainer) LoCoAbort() error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return t.backendErr(t.locoAbortBackend(), "abort SparseLoCo round")
}

// LoCoGenerate ends a round: it folds the pseudo-gradient (the weights at
// LoCoBegin minus the current ones) into the error feedback, returns the
// payload to broadcast (format in README.md), and puts the round's starting
// weights back, ready for LoCoApply. The AdamW moments carry on.
func (t *Trainer) LoCoGenerate(hp SparseLoCo) ([]byte, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	size, err := t.locoSize(hp)
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	c := hp.c()
	var n C.size_t
	if err := t.backendErr(t.locoGenerateBackend(&c, (*C.uint8_t)(&out[0]), C.size_t(size), &n), "SparseLoCo generate"); err != nil {
		return nil, err
	}
	return out[:n], nil
}

// LoCoValidate checks a peer's payload against this model and hp without
// changing anything.
func (t *Trainer) LoCoValidate(hp SparseLoCo, p []byte) error {
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	c := hp.c()
	var ptr *C.uint8_t
	if len(p) > 0 {
		ptr = (*C.uint8_t)(&p[0])
	}
	return codeErr(C.tr_loco_validate(t.m, &c, ptr, C.size_t(len(p))), "validate SparseLoCo payload")
}

// LoCoApply takes the outer step x -= min(1, OuterLR/n) * u, u the
// scatter-mean of the n decoded payloads: at each position the sum over
// the payloads that hold it, in the given client order, divided by their
// count. Either all payloads are valid and the step is taken, or nothing
// changes. No payloads: the weights stay and the step counter advances.
func (t *Trainer) LoCoApply(hp SparseLoCo, payloads [][]byte) error {
	buf, lens := concat(payloads)
	if err := t.lock(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	c := hp.c()
	return t.backendErr(t.locoApplyBackend(&c, (*C.uint8_t)(&buf[0]), &lens[0], C.int(len(payloads))), "SparseLoCo apply")
}

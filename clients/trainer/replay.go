package trainer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Replay state: everything a training step depends on besides the model's
// parameters and the batch: the state blob (state.c) with its parameter
// section cut out, i.e. the header (counters, the last DeMo learning rate,
// flags) and the optimizer buffers (DeMo's momentum). A trainer commits to
// its hash before and after a step; an auditor that holds the same
// parameters rebuilds the whole state, replays the step, and compares bits.

// stateHeaderLen is the length of the header of a state blob or replay
// state (state.c): 56 bytes in version 1 (GPT-2), 76 in version 2 (Llama),
// 100 in version 3 (a Llama with other RMSNorm or rotary knobs); 0 when b
// is too short or of an unknown version.
func stateHeaderLen(b []byte) int {
	if len(b) < 8 {
		return 0
	}
	n := 0
	switch binary.LittleEndian.Uint32(b[4:]) {
	case 1:
		n = 56
	case 2:
		n = 76
	case 3:
		n = 100
	}
	if len(b) < n {
		return 0
	}
	return n
}

// ReplayState returns this trainer's replay state.
func (t *Trainer) ReplayState() ([]byte, error) {
	full, err := t.ExportState()
	if err != nil {
		return nil, err
	}
	params, hl := 4*t.n, t.hdr
	if len(full) < hl+params {
		return nil, fmt.Errorf("replay state: state blob of %d bytes is shorter than its parameters: %w", len(full), ErrState)
	}
	return append(full[:hl:hl], full[hl+params:]...), nil
}

// LoadReplayState makes this trainer's state the replay state rs with
// params as its parameters. A malformed rs is rejected and changes nothing.
func (t *Trainer) LoadReplayState(rs []byte, params []float32) error {
	if len(params) != t.n {
		return fmt.Errorf("load replay state: got %d parameters, model has %d: %w", len(params), t.n, ErrInvalid)
	}
	hl := t.hdr
	if len(rs) < hl {
		return fmt.Errorf("load replay state: %d bytes, shorter than the state header: %w", len(rs), ErrState)
	}
	full := make([]byte, 0, len(rs)+4*t.n)
	full = append(full, rs[:hl]...)
	for _, p := range params {
		full = binary.LittleEndian.AppendUint32(full, math.Float32bits(p))
	}
	full = append(full, rs[hl:]...)
	return t.ImportState(full)
}

// FreshReplayState reports whether rs holds no optimizer history: every
// buffer after the header is zero (or there is none). A trainer may start
// over from such a state at any step; its history otherwise must continue
// the state it committed last.
func FreshReplayState(rs []byte) bool {
	hl := stateHeaderLen(rs)
	if hl == 0 {
		return false
	}
	for _, b := range rs[hl:] {
		if b != 0 {
			return false
		}
	}
	return true
}

// Header fields of the state blob (state.c): the ones applying a round
// changes, and the flags (also the checkpoint's tensor list).
const (
	stateStepOff  = 32
	stateLROff    = 48
	stateFlagsOff = 52
	flagAdam      = 1
	flagDelta     = 2
	flagLookahead = 4
	flagPending   = 16
)

// AfterApply is the replay state rs becomes when the round is applied
// (DeMoApply at lr): the apply leaves the momentum and the pending update
// as they are and sets the header as tr_demo_apply does (last learning
// rate, step counter, the lookahead on when there is a pending update, or
// when hp asks for it and there is momentum). A trainer
// commits to this state as its state after a step, so that its next
// step's state before continues it exactly.
func AfterApply(rs []byte, hp DeMo) ([]byte, error) {
	if stateHeaderLen(rs) == 0 {
		return nil, fmt.Errorf("replay state of %d bytes: %w", len(rs), ErrState)
	}
	out := bytes.Clone(rs)
	binary.LittleEndian.PutUint64(out[stateStepOff:], binary.LittleEndian.Uint64(out[stateStepOff:])+1)
	binary.LittleEndian.PutUint32(out[stateLROff:], math.Float32bits(hp.LR))
	flags := binary.LittleEndian.Uint32(out[stateFlagsOff:]) &^ flagLookahead
	if flags&flagPending != 0 || hp.Lookahead && flags&flagDelta != 0 {
		flags |= flagLookahead
	}
	binary.LittleEndian.PutUint32(out[stateFlagsOff:], flags)
	return out, nil
}

// FreshCopy is rs with its optimizer buffers zeroed: fresh, same header.
func FreshCopy(rs []byte) []byte {
	out := bytes.Clone(rs)
	if hl := stateHeaderLen(out); hl > 0 {
		clear(out[hl:])
	}
	return out
}

// ResetOptimizer zeroes the optimizer buffers (DeMo's momentum, AdamW's
// moments), keeping the parameters and counters: the replay state becomes
// fresh.
func (t *Trainer) ResetOptimizer() error {
	full, err := t.ExportState()
	if err != nil {
		return err
	}
	clear(full[t.hdr+4*t.n:])
	return t.ImportState(full)
}

// AfterLoCoApply is the replay state rs becomes when a SparseLoCo round is
// applied (LoCoApply): the error feedback and AdamW moments stay as they
// are, the step counter advances, and the lookahead is off.
func AfterLoCoApply(rs []byte) ([]byte, error) {
	if stateHeaderLen(rs) == 0 {
		return nil, fmt.Errorf("replay state of %d bytes: %w", len(rs), ErrState)
	}
	out := bytes.Clone(rs)
	binary.LittleEndian.PutUint64(out[stateStepOff:], binary.LittleEndian.Uint64(out[stateStepOff:])+1)
	binary.LittleEndian.PutUint32(out[stateFlagsOff:], binary.LittleEndian.Uint32(out[stateFlagsOff:])&^flagLookahead)
	return out, nil
}

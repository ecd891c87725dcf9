// Package evaluate is a competition validator's deterministic evaluation
// (programs/competition/README.md, "Which model a round evaluates" and
// "Off-chain"): which pages of the competition's dataset a round draws from
// its seed (Pages), fetching and checking each entry's model (Fetch, Check:
// every failure that is the miner's is an *Invalid), and the loss table of
// every eligible entry on every page, with its hash (LossTable). Two honest
// validators of a round compute the same table bit for bit, whatever their
// machine, thread count or micro-batch; see README.md. It reads no chain:
// the caller passes the round's seed, its eligible entries and the
// competition's constraints.
package evaluate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Submission is the model an entry has in a round (the Submission
// account's current or prev fields, as programs/competition/README.md's rule picks them).
type Submission struct {
	Index      uint16           // the entry's index on the board
	Miner      solana.PublicKey // who committed it
	Commitment [32]byte         // sha256(checkpoint file bytes ‖ miner pubkey)
	Revision   [32]byte         // sha256(checkpoint file bytes): the hub's name for it
	Params     uint64           // the parameter count the miner declared
	Slot       uint64           // the slot of its commit
	Repo       string           // the hub repo: http(s):// or file://, as runs name it
}

// RoundModel is the commit of an entry that a round opened at openSlot
// evaluates (programs/competition/README.md, "Which model a round evaluates"): current when it
// was committed before openSlot, else prev when there is one (a commit
// during the round moved the earlier one there); ok is false when neither
// was (the entry is not eligible).
func RoundModel(current, prev Submission, openSlot uint64) (sub Submission, ok bool) {
	switch {
	case current.Slot < openSlot:
		return current, true
	case prev.Slot != 0 && prev.Slot < openSlot:
		return prev, true
	}
	return Submission{}, false
}

// Constraints are what a competition requires of a model (the Competition
// account's architecture, max_params, seq_len and precision, and the
// vocabulary of its dataset).
type Constraints struct {
	Architecture string // trainer.ArchGPT2 or trainer.ArchLlama
	MaxParams    uint64 // the most parameters a model may have (padded vocabulary rows included)
	// Vocab is the dataset's vocabulary size: a model's must equal it.
	Vocab uint32
	// Tokenizer is the name the dataset's manifest gives its tokenizer
	// (provider.Info.Tokenizer); DataFits checks the data against it. ""
	// checks nothing.
	Tokenizer string
	SeqLen    uint32 // tokens a sequence is evaluated on; a model's context must hold them
	Precision string // the numeric contract models are evaluated under: trainer.ArithFP32 or trainer.ArithMX8
}

// Architecture and precision tags of the Competition account.
const (
	ArchGPT2Tag      = 0
	ArchLlamaTag     = 1
	PrecisionFP32Tag = 0
	PrecisionMX8Tag  = 1
)

// ArchitectureOf is the trainer's architecture for the Competition
// account's tag.
func ArchitectureOf(tag uint8) (string, error) {
	switch tag {
	case ArchGPT2Tag:
		return trainer.ArchGPT2, nil
	case ArchLlamaTag:
		return trainer.ArchLlama, nil
	}
	return "", fmt.Errorf("the competition's architecture tag %d is neither gpt2 (0) nor llama (1), the ones this client evaluates", tag)
}

// PrecisionOf is the trainer's numeric contract for the Competition
// account's tag.
func PrecisionOf(tag uint8) (string, error) {
	switch tag {
	case PrecisionFP32Tag:
		return trainer.ArithFP32, nil
	case PrecisionMX8Tag:
		return trainer.ArithMX8, nil
	}
	return "", fmt.Errorf("the competition's precision tag %d is neither fp32 (0) nor mx8 (1), the ones this client evaluates", tag)
}

// Validate says what makes c unusable.
func (c Constraints) Validate() error {
	switch {
	case c.Architecture != trainer.ArchGPT2 && c.Architecture != trainer.ArchLlama:
		return fmt.Errorf("competition architecture %q: want %s or %s", c.Architecture, trainer.ArchGPT2, trainer.ArchLlama)
	case c.Precision != trainer.ArithFP32 && c.Precision != trainer.ArithMX8:
		return fmt.Errorf("competition precision %q: want %s or %s", c.Precision, trainer.ArithFP32, trainer.ArithMX8)
	case c.MaxParams < 1:
		return errors.New("competition max_params is 0: no model fits")
	case c.SeqLen < 1 || c.SeqLen > 65536:
		return fmt.Errorf("competition seq_len %d out of range [1, 65536]", c.SeqLen)
	case c.Vocab < 2:
		return fmt.Errorf("competition vocabulary %d: a dataset has at least 2 tokens", c.Vocab)
	}
	return nil
}

// DataFits says whether the dataset described by info is the one c's models
// are evaluated on: its sequences are c.SeqLen tokens long, its vocabulary
// is c.Vocab and its tokenizer c.Tokenizer.
func DataFits(info provider.Info, c Constraints) error {
	switch {
	case info.SeqLen != c.SeqLen:
		return fmt.Errorf("the dataset's sequences are %d tokens long, the competition evaluates %d", info.SeqLen, c.SeqLen)
	case info.VocabSize != c.Vocab:
		return fmt.Errorf("the dataset's vocabulary is %d tokens, the competition's %d", info.VocabSize, c.Vocab)
	case c.Tokenizer != "" && info.Tokenizer != c.Tokenizer:
		return fmt.Errorf("the dataset was tokenized by %s, the competition's by %s", info.Tokenizer, c.Tokenizer)
	case info.NumSequences == 0:
		return errors.New("the dataset has no sequences")
	}
	return nil
}

// Reasons an entry's model is invalid (Invalid.Reason). Each is the miner's
// doing; none depends on the validator's machine.
const (
	ReasonBadRepo            = "bad repo"            // the repo is not an http(s):// or file:// URL the hub accepts
	ReasonNotFound           = "not found"           // the hub does not hold the revision (404, 410, no such file)
	ReasonUnavailable        = "unavailable"         // the hub could not be reached or refused, after its retries
	ReasonTooLarge           = "too large"           // a file or parameter count over the competition's bounds
	ReasonRevisionMismatch   = "revision mismatch"   // what the hub served does not hash to the revision
	ReasonCommitmentMismatch = "commitment mismatch" // sha256(file ‖ miner) is not the commitment
	ReasonBadCheckpoint      = "bad checkpoint"      // not a well-formed parameters-only model file of a valid config
	ReasonArchitecture       = "wrong architecture"  // not the competition's architecture
	ReasonParams             = "params mismatch"     // the file's parameter count is not the declared one
	ReasonVocab              = "wrong vocabulary"    // the model's vocabulary is not the dataset's
	ReasonContext            = "context too short"   // the model's context is shorter than the competition's seq_len
)

// Invalid is an entry's model that the round scores as invalid: +Inf on
// every page, excluded when the round is final. Errors of any other type
// (cancellation, the validator's own disk or memory) say nothing about the
// model: the validator must not vote on them.
type Invalid struct {
	Reason string // one of the Reason constants
	Detail string // what was found, for logs
	Err    error  // the underlying error, if any
}

func (e *Invalid) Error() string {
	if e.Detail == "" {
		return "invalid model: " + e.Reason
	}
	return "invalid model: " + e.Reason + ": " + e.Detail
}

func (e *Invalid) Unwrap() error { return e.Err }

// AsInvalid reports whether err says the model is invalid, and why.
func AsInvalid(err error) (*Invalid, bool) {
	var inv *Invalid
	ok := errors.As(err, &inv)
	return inv, ok
}

func invalid(reason string, err error, format string, args ...any) *Invalid {
	return &Invalid{Reason: reason, Detail: fmt.Sprintf(format, args...), Err: err}
}

// MaxHeaderBytes is the largest safetensors header a model file may have
// (the trainer's own bound on what it reads).
const MaxHeaderBytes = 16 << 20

// MaxFileSize is the largest checkpoint file of a model of params
// parameters: its 8-byte header length, a header of at most MaxHeaderBytes
// and 4 bytes a parameter. A download stops there. The bound is a function
// of the submission only, so every validator draws the same line.
func MaxFileSize(params uint64) int64 {
	const most = math.MaxInt64 - 8 - MaxHeaderBytes
	if params > most/4 {
		return math.MaxInt64
	}
	return 8 + MaxHeaderBytes + 4*int64(params)
}

// TableHash is sha256 over the losses' f32 little-endian bits, in the
// table's order (model-major, then page): what a validator votes.
func TableHash(losses []float32) [32]byte {
	buf := make([]byte, 4*len(losses))
	for i, l := range losses {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(l))
	}
	return sha256.Sum256(buf)
}

// Commitment is sha256(file bytes ‖ miner pubkey): what a miner commits
// for its checkpoint file's bytes.
func Commitment(file []byte, miner solana.PublicKey) [32]byte {
	h := sha256.New()
	h.Write(file)
	h.Write(miner[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

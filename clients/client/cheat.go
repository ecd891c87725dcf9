package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/trainer"
)

// Cheat makes a client dishonest in one way, for the verification tests:
// the CLI offers it only in binaries built with the verificationtest tag.
// Every cheat starts in epoch CheatFrom and otherwise follows the protocol,
// so each test sees one kind of fraud.
type Cheat int

const (
	CheatNone Cheat = iota
	// CheatOtherData trains on sequences other than its assignment.
	CheatOtherData
	// CheatRandomPayload publishes (and commits to) a well-formed payload
	// whose values it made up.
	CheatRandomPayload
	// CheatCopyPayload republishes another member's payload of the round.
	CheatCopyPayload
	// CheatWrongReplayData commits to and serves a fresh replay state
	// instead of the momentum it trained from.
	CheatWrongReplayData
	// CheatWithholdReplayData commits honestly and serves no replay state.
	CheatWithholdReplayData
	// CheatFalseAccusation, as a verifier, accuses every trainer it checks.
	CheatFalseAccusation
	// CheatCopyAnswer trains on other data, as CheatOtherData, and answers
	// each dispute with the accuser's published hashes, without a rerun.
	CheatCopyAnswer
	// CheatFalseNoData, as a verifier, says NO_DATA of every trainer it
	// checks: honest work left out, which the committee refutes.
	CheatFalseNoData
)

var cheatNames = [...]string{"none", "other-data", "random-payload", "copy-payload", "wrong-replay-data", "withhold-replay-data", "false-accusation", "copy-answer", "false-no-data"}

func (c Cheat) String() string { return cheatNames[c] }

// ParseCheat reads a Cheat by its name.
func ParseCheat(s string) (Cheat, error) {
	for i, n := range cheatNames {
		if n == s {
			return Cheat(i), nil
		}
	}
	return 0, fmt.Errorf("unknown cheat %q (one of %s)", s, strings.Join(cheatNames[:], ", "))
}

// cheating says whether the client cheats with c now.
func (cl *Client) cheating(c Cheat) bool {
	return cl.cfg.Cheat == c && cl.epoch >= cl.cfg.CheatFrom
}

// otherSequences moves a batch far from its assignment.
func otherSequences(b batchRange) batchRange { return batchRange{b.start + 7919, b.len} }

// madeUpPayload keeps a payload's indices and flips its values: well formed,
// and not what the trainer computed.
func madeUpPayload(cfg trainer.Config, hp trainer.DeMo, p []byte) ([]byte, error) {
	d, err := trainer.DecodePayload(cfg, hp, p)
	if err != nil {
		return nil, err
	}
	for i := range d.Tensors {
		t := &d.Tensors[i]
		for j := range t.Signs {
			t.Signs[j] = !t.Signs[j]
		}
		for j := range t.Values {
			t.Values[j] = -t.Values[j]
		}
	}
	return d.Encode(), nil
}

// cheatPayload is the payload a cheating client sends instead of its own.
func (cl *Client) cheatPayload(ctx context.Context, step uint32, p []byte) ([]byte, error) {
	switch {
	case cl.cheating(CheatRandomPayload):
		cfg, err := TrainerConfig(&cl.model, cl.cfg.MicroBatch)
		if err != nil {
			return nil, err
		}
		return madeUpPayload(cfg, DeMo(&cl.model, 0), p)
	case cl.cheating(CheatCopyPayload):
		// Another member's payload of the round, once one is here.
		for range 40 {
			if other := cl.inbox.anyPayload(step); other != nil {
				return other, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return p, nil
}

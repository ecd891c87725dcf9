package competition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/competition/rules"
	"github.com/psyche-go/psyche/clients/data/provider"
)

// Evaluation is a validator's result for one round: what its vote carries.
type Evaluation struct {
	Round     uint64
	Seed      [32]byte
	TableHash [32]byte
	// Wins has one count per entry of the round (0 where not eligible or
	// invalid); Invalid marks the eligible entries whose model was invalid.
	Wins    []uint16
	Invalid [32]byte
	// Entries are the eligible entries' indices, in table order, and Eval the
	// evaluation they were scored by (pages, losses, reasons).
	Entries []uint16
	Eval    *evaluate.Round
}

// Digest is what the program stores for the vote (rules.VoteDigest).
func (e *Evaluation) Digest() [32]byte {
	return rules.VoteDigest(e.Round, e.Seed, e.TableHash, e.Wins, e.Invalid)
}

// RoundSubmissions are the models the board's round evaluates, in entry
// order: for each eligible entry its miner's submission as it stood when the
// round opened (evaluate.RoundModel), read from the Submission accounts.
func (k Competition) RoundSubmissions(ctx context.Context, c *chain.Client, b *Board) ([]evaluate.Submission, error) {
	r := b.Round
	var subs []evaluate.Submission
	for i := range int(r.Entries) {
		if !rules.Bit(r.Eligible, i) {
			continue
		}
		miner := b.Submissions[i].Miner
		s, err := k.ReadSubmission(ctx, c, miner)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, fmt.Errorf("entry %d (%s) has no submission account", i, miner)
		}
		sub, ok := evaluate.RoundModel(SubmissionOf(s, s.Current), SubmissionOf(s, s.Prev), r.OpenSlot)
		if !ok {
			return nil, fmt.Errorf("entry %d (%s) has no model committed before slot %d, yet the round holds it eligible", i, miner, r.OpenSlot)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// SubmissionOf is one of a Submission account's two models (Current or
// Prev) as the evaluator takes it.
func SubmissionOf(s *Submission, m Model) evaluate.Submission {
	return evaluate.Submission{Index: s.Index, Miner: s.Miner, Commitment: m.Commitment, Revision: m.Revision, Params: m.Params, Slot: m.Slot, Repo: m.Repo}
}

// EvaluateRound is a validator's work on the board's round: its models,
// their losses on the round's pages of data (fetched into dir), the table's
// hash, and the wins by the round's epsilon among the valid models. Every
// honest validator gets the same bytes; `competition check` reruns it to
// show who voted what.
func (k Competition) EvaluateRound(ctx context.Context, c *chain.Client, acc *Account, b *Board, data provider.Provider, dir string,
	cons evaluate.Constraints, opts evaluate.Options) (*Evaluation, error) {
	r := b.Round
	if Phase(r.State) != PhaseEvaluating && Phase(r.State) != PhaseFinal {
		return nil, fmt.Errorf("round %d is %v: it has no seed to evaluate", r.Number, Phase(r.State))
	}
	subs, err := k.RoundSubmissions(ctx, c, b)
	if err != nil {
		return nil, err
	}
	ev, err := evaluate.Evaluate(ctx, subs, dir, data, r.Seed, int(r.Pages), acc.SequencesPerPage, cons, opts)
	if err != nil {
		return nil, err
	}
	out := &Evaluation{Round: r.Number, Seed: r.Seed, TableHash: ev.TableHash, Wins: make([]uint16, r.Entries), Eval: ev}
	pages := len(ev.Pages)
	var valid []float32
	var slots []uint64
	var validIdx []uint16
	for j, s := range subs {
		out.Entries = append(out.Entries, s.Index)
		if ev.Invalid[j] != nil {
			rules.SetBit(&out.Invalid, int(s.Index))
			continue
		}
		valid = append(valid, ev.Losses[j*pages:(j+1)*pages]...)
		slots = append(slots, s.Slot)
		validIdx = append(validIdx, s.Index)
	}
	if len(validIdx) > 0 {
		eps := rules.Epsilon{StartPPM: r.EpsilonStartPpm, EndPPM: r.EpsilonEndPpm, DecaySlots: r.EpsilonDecaySlots}
		wins, err := rules.Wins(valid, len(validIdx), pages, slots, r.OpenSlot, eps)
		if err != nil {
			return nil, err
		}
		for j, idx := range validIdx {
			out.Wins[idx] = wins[j]
		}
	}
	return out, nil
}

// Validator runs a validator's loop for one competition (Decide): it ticks
// rounds forward, evaluates each round and votes, until the context ends or
// it is no validator of the competition any more.
type Validator struct {
	Chain       *chain.Client
	Competition Competition
	Key         solana.PrivateKey
	// Data is the competition's dataset; Dir caches the models.
	Data        provider.Provider
	Dir         string
	Constraints evaluate.Constraints
	Options     evaluate.Options
	// Poll is the pause between reads of the chain when there is nothing to do.
	Poll time.Duration
	Log  *slog.Logger
	// OnVote, when set, is told of each vote that landed.
	OnVote func(*Evaluation)
}

// ErrNotValidator ends Run: the key is not an active validator of the
// competition (it never joined, left, or was faulted), or the competition
// is closed.
var ErrNotValidator = errors.New("not an active validator of an open competition")

// Run is the loop.
func (v *Validator) Run(ctx context.Context) error {
	me := v.Key.PublicKey()
	var held *Evaluation
	for {
		acc, err := v.Competition.Account(ctx, v.Chain)
		if err != nil {
			return err
		}
		b, err := v.Competition.ReadBoard(ctx, v.Chain)
		if err != nil {
			return err
		}
		slot, err := v.Chain.RPC.GetSlot(ctx, "confirmed")
		if err != nil {
			return fmt.Errorf("reading the slot: %w", err)
		}
		view := ViewOf(acc, b, me, slot)
		view.Evaluated = held != nil && held.Round == b.Round.Number
		switch Decide(view) {
		case Stop:
			return fmt.Errorf("%s: %w", me, ErrNotValidator)
		case Tick:
			ix, err := v.Competition.Tick()
			if err != nil {
				return err
			}
			if _, err := v.Chain.Send(ctx, v.Key, []solana.Instruction{ix}); err != nil && !isProgramError(err, "NothingToTick") {
				v.Log.Warn("round_tick failed", "err", err)
				if err := sleep(ctx, v.Poll); err != nil {
					return err
				}
			}
		case Evaluate:
			start := time.Now()
			ev, err := v.Competition.EvaluateRound(ctx, v.Chain, acc, b, v.Data, v.Dir, v.Constraints, v.Options)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				// Not a vote: a validator that cannot evaluate stays silent.
				v.Log.Error("evaluating the round failed; not voting", "round", b.Round.Number, "err", err)
				if err := sleep(ctx, v.Poll); err != nil {
					return err
				}
				continue
			}
			v.Log.Info("evaluated", "round", ev.Round, "models", len(ev.Entries), "pages", len(ev.Eval.Pages),
				"downloaded", ev.Eval.Downloaded, "secs", time.Since(start).Seconds(), "table", fmt.Sprintf("%x", ev.TableHash[:8]))
			for j, inv := range ev.Eval.Invalid {
				if inv != nil {
					v.Log.Warn("invalid model", "entry", ev.Entries[j], "reason", inv.Reason, "detail", inv.Detail)
				}
			}
			held = ev
		case Vote:
			ixs, err := v.Competition.Vote(me, held.Round, held.TableHash, held.Wins, held.Invalid)
			if err != nil {
				return err
			}
			if _, err := v.Chain.Send(ctx, v.Key, ixs); err != nil {
				v.Log.Warn("round_vote failed", "round", held.Round, "err", err)
				held = nil
				if err := sleep(ctx, v.Poll); err != nil {
					return err
				}
				continue
			}
			d := held.Digest()
			v.Log.Info("voted", "round", held.Round, "digest", fmt.Sprintf("%x", d[:8]), "wins", held.Wins)
			if v.OnVote != nil {
				v.OnVote(held)
			}
		case Wait:
			if err := sleep(ctx, v.Poll); err != nil {
				return err
			}
		}
	}
}

// ViewOf is what Decide sees of the chain, for validator me at slot.
func ViewOf(acc *Account, b *Board, me solana.PublicKey, slot uint64) View {
	r := b.Round
	view := View{Slot: slot, Paused: acc.Paused, Closed: acc.Closed, Round: r.Number, Phase: Phase(r.State),
		SeedSlot: r.SeedSlot, Deadline: r.DeadlineSlot}
	mine := -1
	for i := range int(b.ValidatorCount) {
		if b.Validators[i].Key.Equals(me) && b.Validators[i].Status == ValidatorActive {
			mine, view.Member = i, true
		}
	}
	for _, vote := range r.Votes[:r.VoteCount] {
		if int(vote.Validator) == mine {
			view.Voted = true
		}
	}
	// A round opens at most once per round length (the program's rule).
	due := r.Number == 0 || slot >= r.OpenSlot+acc.RoundSlots
	for i := range int(b.SubmissionCount) {
		e := b.Submissions[i]
		if due && e.Status == EntryActive && (e.Slot < slot || (e.PrevSlot != 0 && e.PrevSlot < slot)) {
			view.Openable = true
		}
	}
	return view
}

func isProgramError(err error, name string) bool {
	var te *chain.TxError
	return errors.As(err, &te) && te.Name == name
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

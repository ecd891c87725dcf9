// Package explorertest drives Coordinator runs on a local validator for the
// explorer's tests and benchmark, as clients would: it creates runs (plain
// or owned by a Treasurer run), has fresh wallets join, and plays rounds
// whose elected witnesses publish a chosen loss, through the real
// instructions.
package explorertest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gagliardetto/solana-go"
	"golang.org/x/sync/errgroup"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// Programs are the programs a Net needs (programtest.Launch or Start).
var Programs = []string{deploy.Authorizer, deploy.Coordinator, deploy.Treasurer, deploy.Competition}

// Run is a run on a Net and the wallets that joined it.
type Run struct {
	Net       *programtest.Net
	ID        string
	Authority solana.PrivateKey
	Coord     coordinator.Run
	// Treasury is the Treasurer run that owns the run (nil for a plain run);
	// Mint is its token.
	Treasury *treasurer.Run
	Mint     solana.PrivateKey
	Clients  []solana.PrivateKey
	grant    solana.PublicKey // everyone's join authorization
}

// coordinatorOf is n's Coordinator deployment.
func coordinatorOf(n *programtest.Net) coordinator.Program {
	return coordinator.Program{ID: n.IDs[deploy.Coordinator]}
}

// TreasurerProgram is n's Treasurer deployment.
func TreasurerProgram(n *programtest.Net) treasurer.Program {
	return treasurer.Program{ID: n.IDs[deploy.Treasurer], Coordinator: coordinatorOf(n)}
}

// NewRun creates run id, funded authority and all, and lets everyone join.
// With tokens > 0 it is a Treasurer run holding that many base units of a
// fresh mint (decimals 6), else a plain Coordinator run.
func NewRun(ctx context.Context, n *programtest.Net, id string, tokens uint64) (*Run, error) {
	c := n.Chain
	r := &Run{Net: n, ID: id, Authority: solana.NewWallet().PrivateKey}
	a := r.Authority.PublicKey()
	if _, err := c.Airdrop(ctx, a, 100*solana.LAMPORTS_PER_SOL); err != nil {
		return nil, err
	}
	account := solana.NewWallet().PrivateKey
	if tokens == 0 {
		ixs, run, err := coordinatorOf(n).CreateRun(ctx, c, a, account.PublicKey(), coordinator.CreateParams{
			RunID: id, MainAuthority: a, JoinAuthority: a, ClientVersion: "v1"})
		if err != nil {
			return nil, err
		}
		if _, err := c.Send(ctx, r.Authority, ixs, account); err != nil {
			return nil, fmt.Errorf("create run %q: %w", id, err)
		}
		r.Coord = run
	} else {
		r.Mint = solana.NewWallet().PrivateKey
		mint := r.Mint.PublicKey()
		ixs, err := treasurer.CreateMint(ctx, c, a, mint, a, 6, solana.TokenProgramID)
		if err != nil {
			return nil, err
		}
		if _, err := c.Send(ctx, r.Authority, ixs, r.Mint); err != nil {
			return nil, fmt.Errorf("create mint: %w", err)
		}
		ixs, run, err := TreasurerProgram(n).CreateRun(ctx, c, a, account.PublicKey(), treasurer.CreateParams{
			RunID: id, MainAuthority: a, JoinAuthority: a, ClientVersion: "v1", Mint: mint, TokenProgram: solana.TokenProgramID})
		if err != nil {
			return nil, err
		}
		if _, err := c.Send(ctx, r.Authority, ixs, account); err != nil {
			return nil, fmt.Errorf("create treasurer run %q: %w", id, err)
		}
		if _, err := c.Send(ctx, r.Authority, []solana.Instruction{treasurer.MintTo(solana.TokenProgramID, mint, run.Collateral, a, tokens)}); err != nil {
			return nil, fmt.Errorf("fund run %q: %w", id, err)
		}
		r.Treasury, r.Coord = &run, run.Coordinator
	}
	auth := authorizer.Default()
	create, grant, err := auth.Create(a, a, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		return nil, err
	}
	activate, err := auth.SetActive(a, grant, true)
	if err != nil {
		return nil, err
	}
	if _, err := c.Send(ctx, r.Authority, []solana.Instruction{create, activate}); err != nil {
		return nil, fmt.Errorf("grant joins to %q: %w", id, err)
	}
	r.grant = grant
	return r, nil
}

// Config is config/smoke.toml for a run of members clients that keeps
// training: every member is an elected witness, rounds end when the
// witnesses reported (one second of RoundWitness), epochs last 10 minutes.
func Config(members int) (coordinator.UpdateParams, error) {
	repo, err := deploy.FindRepo(".")
	if err != nil {
		return coordinator.UpdateParams{}, err
	}
	p, err := coordinator.LoadParams(filepath.Join(repo.Root, "config", "smoke.toml"))
	if err != nil {
		return coordinator.UpdateParams{}, err
	}
	p.Config.InitMinClients, p.Config.MinClients, p.Config.WitnessNodes = uint16(members), uint16(members), uint16(min(members, schedule.MaxWitnesses))
	p.Config.EpochTime, p.Config.MaxRoundTrainTime, p.Config.WarmupTime = 600, 60, 60
	p.Config.GlobalBatchSizeStart, p.Config.GlobalBatchSizeEnd = uint16(max(members, 8)), uint16(max(members, 8))
	return p, nil
}

// Configure applies p (metadata, config and model) and an earning rate, and
// resumes the run.
func (r *Run) Configure(ctx context.Context, p coordinator.UpdateParams, earning uint64) error {
	a := r.Authority.PublicKey()
	var ixs []solana.Instruction
	add := func(ix solana.Instruction, err error) error {
		ixs = append(ixs, ix)
		return err
	}
	paused := false
	parts := []coordinator.UpdateParams{{Metadata: p.Metadata}, {Config: p.Config, Model: p.Model}}
	var err error
	if r.Treasury != nil {
		for _, part := range parts {
			err = errors.Join(err, add(r.Treasury.Update(a, treasurer.UpdateParams{Coordinator: part})))
		}
		err = errors.Join(err, add(r.Treasury.Update(a, treasurer.UpdateParams{EarningRate: &earning, Paused: &paused})))
	} else {
		for _, part := range parts {
			err = errors.Join(err, add(r.Coord.Update(a, part)))
		}
		err = errors.Join(err, add(r.Coord.SetFutureEpochRates(a, &earning, nil)), add(r.Coord.SetPaused(a, false)))
	}
	if err != nil {
		return err
	}
	for _, ix := range ixs { // one by one: the metadata and the model do not fit one transaction
		if _, err := r.Net.Chain.Send(ctx, r.Authority, []solana.Instruction{ix}); err != nil {
			return fmt.Errorf("configure %q: %w", r.ID, err)
		}
	}
	return nil
}

// Join has n fresh funded wallets join the run, several at a time.
func (r *Run) Join(ctx context.Context, n int) error {
	keys := make([]solana.PrivateKey, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range keys {
		keys[i] = solana.NewWallet().PrivateKey
		g.Go(func() error {
			k := keys[i]
			if _, err := r.Net.Chain.Airdrop(gctx, k.PublicKey(), solana.LAMPORTS_PER_SOL); err != nil {
				return err
			}
			_, p2p, _ := ed25519.GenerateKey(rand.Reader)
			ixs, err := r.Coord.JoinRunProven(k.PublicKey(), r.grant, p2p)
			if err != nil {
				return err
			}
			_, err = r.Net.Chain.Send(gctx, k, ixs)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("join %q: %w", r.ID, err)
	}
	r.Clients = append(r.Clients, keys...)
	return nil
}

// State reads the run's coordinator account.
func (r *Run) State(ctx context.Context) (*coordinator.State, error) {
	return r.Coord.FetchState(ctx, r.Net.Chain)
}

// key is the private key of a client of the run.
func (r *Run) key(signer solana.PublicKey) (solana.PrivateKey, bool) {
	for _, k := range r.Clients {
		if k.PublicKey().Equals(signer) {
			return k, true
		}
	}
	return nil, false
}

// TickUntil ticks until done(state) holds, tolerating TickTooEarly.
func (r *Run) TickUntil(ctx context.Context, what string, done func(*coordinator.State) bool) (*coordinator.State, error) {
	for {
		s, err := r.State(ctx)
		if err != nil || done(s) {
			return s, err
		}
		ix, err := r.Coord.Tick(r.Authority.PublicKey())
		if err != nil {
			return nil, err
		}
		_, err = r.Net.Chain.Send(ctx, r.Authority, []solana.Instruction{ix})
		var te *chain.TxError
		if err != nil && (!errors.As(err, &te) || te.Name != "TickTooEarly") {
			return nil, fmt.Errorf("tick toward %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %q did not reach %s (%v now): %w", r.ID, what, coordinator.Phase(s), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Start forms the epoch and has the elected witnesses report ready, which
// starts the first round.
func (r *Run) Start(ctx context.Context) error {
	s, err := r.TickUntil(ctx, "Warmup", func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.Warmup })
	if err != nil {
		return err
	}
	members := coordinator.Members(s)
	for _, m := range members[:schedule.WitnessCount(s.Config.WitnessNodes, uint16(len(members)))] {
		if err := r.send(ctx, m.Signer, func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.WarmupWitness(k) }); err != nil {
			return err
		}
	}
	_, err = r.TickUntil(ctx, "RoundTrain", func(s *coordinator.State) bool { return coordinator.Phase(s) == coordinator.RoundTrain })
	return err
}

// send sends the instruction build makes for signer, signed by it.
func (r *Run) send(ctx context.Context, signer solana.PublicKey, build func(solana.PublicKey) (solana.Instruction, error)) error {
	k, ok := r.key(signer)
	if !ok {
		return fmt.Errorf("run %q: %s is not one of its clients", r.ID, signer)
	}
	ix, err := build(signer)
	if err != nil {
		return err
	}
	_, err = r.Net.Chain.Send(ctx, k, []solana.Instruction{ix})
	return err
}

// PlayRound has every elected witness of the current round (RoundTrain)
// report loss, every member a participant, then ticks into the next round.
// It returns the step played.
func (r *Run) PlayRound(ctx context.Context, loss float32) (uint32, error) {
	s, err := r.State(ctx)
	if err != nil {
		return 0, err
	}
	if coordinator.Phase(s) != coordinator.RoundTrain {
		return 0, fmt.Errorf("run %q is in %v, not RoundTrain", r.ID, coordinator.Phase(s))
	}
	round := coordinator.CurrentRound(s)
	if err := r.witness(ctx, s, loss); err != nil {
		return 0, err
	}
	return round.Step, r.nextRound(ctx, round.Step)
}

// witness has every elected witness of the current round report loss,
// every member a participant.
func (r *Run) witness(ctx context.Context, s *coordinator.State, loss float32) error {
	round := coordinator.CurrentRound(s)
	members := coordinator.Members(s)[:round.ClientsLen]
	participants, broadcasts, err := filters(len(members))
	if err != nil {
		return err
	}
	for _, m := range members {
		participants.Add(m.Signer)
		broadcasts.Add(sha256.Sum256(append(m.Signer[:], byte(round.Step))))
	}
	for _, i := range schedule.Witnesses(round.ClientsLen, s.Config.WitnessNodes, schedule.Seed(round.Seed)) {
		// As clients report: the loss and the tokens/s trained; they leave
		// the metadata's bandwidth and efficiency 0.
		report := coordinator.WitnessReport{Step: round.Step, Index: i, Participants: participants, Broadcasts: broadcasts,
			Loss: loss, TokensPerSec: 1000 + uint64(i)}
		if err := r.send(ctx, members[i].Signer, func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.Witness(k, report) }); err != nil {
			return fmt.Errorf("witness %d of step %d: %w", i, round.Step, err)
		}
	}
	return nil
}

// nextRound ticks until the round of step is over.
func (r *Run) nextRound(ctx context.Context, step uint32) error {
	_, err := r.TickUntil(ctx, "the next round", func(s *coordinator.State) bool {
		p := coordinator.Phase(s)
		return p != coordinator.RoundWitness && (p != coordinator.RoundTrain || coordinator.CurrentRound(s).Step != step)
	})
	return err
}

// PlayDisputedRound plays the current round (RoundTrain) of a run that
// verifies every contribution (verification_percent 100, at least 3
// members, a round_witness_time that leaves time for the verdicts) with
// member 0 caught: every member commits, the witnesses report loss, member
// 0's verifier posts MISMATCH (opening a dispute), member 1's MATCH, and
// the dispute's committee votes MISMATCH, which finds member 0 at fault
// (TRAINER_FAULT); then it ticks out of the round. It returns member 0.
func (r *Run) PlayDisputedRound(ctx context.Context, loss float32) (solana.PublicKey, error) {
	s, err := r.State(ctx)
	if err != nil {
		return solana.PublicKey{}, err
	}
	if coordinator.Phase(s) != coordinator.RoundTrain {
		return solana.PublicKey{}, fmt.Errorf("run %q is in %v, not RoundTrain", r.ID, coordinator.Phase(s))
	}
	round := coordinator.CurrentRound(s)
	members := coordinator.Members(s)[:round.ClientsLen]
	if len(members) < 3 || s.Config.VerificationPercent != 100 {
		return solana.PublicKey{}, fmt.Errorf("run %q: a disputed round needs 3 members (%d) and verification_percent 100 (%d)",
			r.ID, len(members), s.Config.VerificationPercent)
	}
	for i, m := range members {
		c := coordinator.CommitArgs{Step: round.Step, Index: uint16(i), Payload: [32]byte{byte(i), 1}, StateBefore: [32]byte{byte(i), 2},
			StateAfter: [32]byte{byte(i), 3}, Fresh: true}
		if err := r.send(ctx, m.Signer, func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.Commit(k, c) }); err != nil {
			return solana.PublicKey{}, fmt.Errorf("commit of member %d: %w", i, err)
		}
	}
	if err := r.witness(ctx, s, loss); err != nil {
		return solana.PublicKey{}, err
	}
	// The verify seed comes from a slot after training closed: a tick draws it.
	if s, err = r.TickUntil(ctx, "the verify seed", func(s *coordinator.State) bool {
		return coordinator.Phase(s) == coordinator.RoundWitness && coordinator.CurrentRound(s).VerifySeed != [32]byte{}
	}); err != nil {
		return solana.PublicKey{}, err
	}
	seed, n := schedule.Seed(coordinator.CurrentRound(s).VerifySeed), round.ClientsLen
	for trainer, verdict := range []uint8{coordinator.VerdictMismatch, coordinator.VerdictMatch} {
		v, _ := schedule.Verifier(seed, uint16(trainer), n)
		args := coordinator.VerifyArgs{Step: round.Step, VerifierIndex: v, Index: uint16(trainer), Verdict: verdict}
		if verdict == coordinator.VerdictMismatch {
			args.ClaimedPayload, args.ClaimedAfter = [32]byte{0xaa}, [32]byte{0xbb}
		}
		if err := r.send(ctx, members[v].Signer, func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.Verify(k, args) }); err != nil {
			return solana.PublicKey{}, fmt.Errorf("verdict on member %d: %w", trainer, err)
		}
	}
	if s, err = r.State(ctx); err != nil {
		return solana.PublicKey{}, err
	}
	d, ok := coordinator.FindDispute(s, s.DisputesOpened)
	if !ok || d.CommitteeLen == 0 {
		return solana.PublicKey{}, fmt.Errorf("run %q: the MISMATCH opened no dispute with a committee", r.ID)
	}
	id := d.Id
	for _, slot := range d.Committee[:d.CommitteeLen] { // until a majority settles it
		judge := coordinator.SlotSigner(s, slot)
		if err := r.send(ctx, judge, func(k solana.PublicKey) (solana.Instruction, error) {
			return r.Coord.JudgeDispute(k, id, coordinator.VerdictMismatch)
		}); err != nil {
			return solana.PublicKey{}, fmt.Errorf("vote on dispute %d: %w", id, err)
		}
		if s, err = r.State(ctx); err != nil {
			return solana.PublicKey{}, err
		}
		if d, ok := coordinator.FindDispute(s, id); !ok || d.State != coordinator.DisputeOpen {
			break
		}
	}
	return members[0].Signer, r.nextRound(ctx, round.Step)
}

func filters(items int) (*schedule.Bloom, *schedule.Bloom, error) {
	bits, hashes := schedule.BloomParams(items)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	p, err := schedule.NewBloom(bits, hashes, salt)
	if err != nil {
		return nil, nil, err
	}
	b, err := schedule.NewBloom(bits, hashes, salt)
	return p, b, err
}

// ReportPrompt publishes the first client's tokens for a trained step.
func (r *Run) ReportPrompt(ctx context.Context, step uint32, prompt uint16, tokens []uint32) error {
	if len(r.Clients) == 0 {
		return fmt.Errorf("run %q has no client to report", r.ID)
	}
	p := coordinator.PromptReport{Step: step, Prompt: prompt, Tokens: tokens}
	return r.send(ctx, r.Clients[0].PublicKey(), func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.ReportPrompt(k, p) })
}

// ReportEval publishes the first client's score of a trained step.
func (r *Run) ReportEval(ctx context.Context, step uint32, task string, accNorm float32) error {
	if len(r.Clients) == 0 {
		return fmt.Errorf("run %q has no client to report", r.ID)
	}
	e := coordinator.EvalReport{Step: step, Task: task, Acc: accNorm / 2, AccNorm: accNorm, Count: 100}
	return r.send(ctx, r.Clients[0].PublicKey(), func(k solana.PublicKey) (solana.Instruction, error) { return r.Coord.ReportEval(k, e) })
}

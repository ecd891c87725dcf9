// Command coordinator-bench deploys the Authorizer and the Coordinator on a
// fresh local validator, drives a run of 8, 64 and the most (MaxClients) clients through join,
// warmup, rounds with witnesses, a health check, checkpoint, a benchmark
// report, a prompt report, leave and pause, and prints the compute units of each instruction
// at each size, plus the coordinator account's size and rent.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/localnet"
)

// The last size fills the run: a build with a larger MAX_CLIENTS measures it.
var sizes = []int{8, 64, coordinator.MaxClients}

// roundWitnessTime leaves the verdicts of a round time to land before the
// bench's tick ends it.
const roundWitnessTime = 8

func main() {
	flag.Parse() // no flags: -h prints the usage line instead of running
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator-bench:", err)
		os.Exit(1)
	}
}

// bench is one validator with both programs and a permissionless join grant.
type bench struct {
	ctx       context.Context
	net       *programtest.Net
	c         *chain.Client
	p         coordinator.Program
	authority solana.PrivateKey
	authAddr  solana.PublicKey
	// cu[label][size index]
	cu     map[string][]uint64
	labels []string
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	net, err := programtest.Launch(ctx, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Coordinator)
	if err != nil {
		return err
	}
	defer net.Stop()
	c := net.Chain
	authority := solana.NewWallet().PrivateKey
	if _, err := c.Airdrop(ctx, authority.PublicKey(), 500*solana.LAMPORTS_PER_SOL); err != nil {
		return err
	}
	b := &bench{ctx: ctx, net: net, c: c, p: coordinator.Program{ID: net.IDs[deploy.Coordinator]}, authority: authority, cu: map[string][]uint64{}}
	a := authorizer.Default()
	me := authority.PublicKey()
	create, addr, err := a.Create(me, me, authorizer.Everyone, authorizer.JoinRunScope)
	if err != nil {
		return err
	}
	activate, err := a.SetActive(me, addr, true)
	if err != nil {
		return err
	}
	if _, err := c.Send(ctx, authority, []solana.Instruction{create, activate}); err != nil {
		return err
	}
	b.authAddr = addr

	for i, n := range sizes {
		if err := b.runOf(i, n); err != nil {
			return fmt.Errorf("%d clients: %w", n, err)
		}
	}
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, coordinator.AccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		return err
	}
	fmt.Printf("coordinator account: %d bytes, rent-exempt minimum %d lamports (%.4f SOL)\n\n",
		coordinator.AccountSize, rent, float64(rent)/float64(solana.LAMPORTS_PER_SOL))
	fmt.Printf("%-52s", "instruction (compute units)")
	for _, n := range sizes {
		fmt.Printf(" %9s", fmt.Sprintf("%d cl.", n))
	}
	fmt.Println()
	for _, l := range b.labels {
		fmt.Printf("%-52s", l)
		for _, v := range b.cu[l] {
			fmt.Printf(" %9d", v)
		}
		fmt.Println()
	}
	return nil
}

// measure sends ixs and records the transaction's compute units under label.
func (b *bench) measure(i int, label string, payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) error {
	cu, err := b.net.Measure(b.ctx, label, payer, ixs, signers...)
	if err != nil {
		return err
	}
	if _, ok := b.cu[label]; !ok {
		b.labels = append(b.labels, label)
		b.cu[label] = make([]uint64, len(sizes))
	}
	b.cu[label][i] = cu
	return nil
}

func one(ix solana.Instruction, err error) ([]solana.Instruction, error) {
	if err != nil {
		return nil, err
	}
	return []solana.Instruction{ix}, nil
}

// tickUntil ticks until the run is in phase.
func (b *bench) tickUntil(r coordinator.Run, phase coordinator.RunState) (*coordinator.State, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		s, err := r.FetchState(b.ctx, b.c)
		if err != nil {
			return nil, err
		}
		if coordinator.Phase(s) == phase {
			return s, nil
		}
		ixs, err := one(r.Tick(b.authority.PublicKey()))
		if err != nil {
			return nil, err
		}
		_, err = b.c.Send(b.ctx, b.authority, ixs)
		var te *chain.TxError
		if err != nil && (!errors.As(err, &te) || te.Name != "TickTooEarly") {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("run did not reach %v", phase)
}

func (b *bench) runOf(i, n int) error {
	ctx, c, me := b.ctx, b.c, b.authority.PublicKey()
	account := solana.NewWallet().PrivateKey
	ixs, r, err := b.p.CreateRun(ctx, c, me, account.PublicKey(), coordinator.CreateParams{
		RunID: fmt.Sprintf("bench-%d", n), MainAuthority: me, JoinAuthority: me, ClientVersion: "v1",
	})
	if err != nil {
		return err
	}
	if err := b.measure(i, "init_coordinator (+ system create_account)", b.authority, ixs, account); err != nil {
		return err
	}
	config := coordinator.Config{
		WarmupTime: 600, CooldownTime: 1, MaxRoundTrainTime: 600, RoundWitnessTime: roundWitnessTime, EpochTime: 3600,
		TotalSteps: 1000, InitMinClients: uint16(n), MinClients: 1, WitnessNodes: 0,
		GlobalBatchSizeStart: uint16(n), GlobalBatchSizeEnd: uint16(n), WaitingForMembersExtraTime: 1,
		// Every commitment verified (and everyone is in its first epoch anyway).
		VerificationPercent: 100, ForgivePerEpoch: 1, VestingEpochs: 2,
	}
	var model coordinator.Model
	model.Architecture, model.Tokenizer, model.DataType, model.CheckpointKind, model.DataLocationKind = 1, 1, 1, 2, 2
	model.LrSchedule, model.Optimizer, model.InnerSteps, model.MaxSeqLen = 1, coordinator.OptimizerDistro, 1, 128
	model.NLayer, model.NHead, model.NEmbd, model.VocabSize = 4, 4, 128, 256
	model.LearningRate, model.ClipGradNorm, model.CompressionDecay = 0.001, 1, 0.978
	model.CompressionTopk, model.CompressionChunk = 32, 64
	copy(model.CheckpointRepo[:], "http://127.0.0.1:9000/ckpt")
	copy(model.DataLocation[:], "http://127.0.0.1:9000/data")
	var meta coordinator.RunMetadata
	copy(meta.Name[:], "bench")
	steps := []struct {
		label string
		ix    func() (solana.Instruction, error)
	}{
		{"update (metadata)", func() (solana.Instruction, error) { return r.Update(me, coordinator.UpdateParams{Metadata: &meta}) }},
		{"update (config + model)", func() (solana.Instruction, error) {
			return r.Update(me, coordinator.UpdateParams{Config: &config, Model: &model})
		}},
		{"set_future_epoch_rates", func() (solana.Instruction, error) {
			e, s := uint64(1000), uint64(10)
			return r.SetFutureEpochRates(me, &e, &s)
		}},
		{"update_client_version", func() (solana.Instruction, error) { return r.UpdateClientVersion(me, "v2") }},
		{"set_paused (pause before start)", func() (solana.Instruction, error) { return r.SetPaused(me, true) }},
	}
	for _, s := range steps {
		ixs, err := one(s.ix())
		if err != nil {
			return err
		}
		if err := b.measure(i, s.label, b.authority, ixs); err != nil {
			return err
		}
	}

	// n clients join while paused; the last join scans the fullest table.
	clients := make([]solana.PrivateKey, n)
	for k := range clients {
		clients[k] = solana.NewWallet().PrivateKey
	}
	if err := b.parallel(clients[:n-1], func(k solana.PrivateKey) error {
		if _, err := c.Airdrop(ctx, k.PublicKey(), solana.LAMPORTS_PER_SOL); err != nil {
			return err
		}
		_, p2p, _ := ed25519.GenerateKey(rand.Reader)
		ixs, err := r.JoinRunProven(k.PublicKey(), b.authAddr, p2p)
		if err != nil {
			return err
		}
		_, err = c.Send(ctx, k, ixs)
		return err
	}); err != nil {
		return err
	}
	last := clients[n-1]
	if _, err := c.Airdrop(ctx, last.PublicKey(), solana.LAMPORTS_PER_SOL); err != nil {
		return err
	}
	_, lastP2P, _ := ed25519.GenerateKey(rand.Reader)
	if ixs, err = r.JoinRunProven(last.PublicKey(), b.authAddr, lastP2P); err != nil {
		return err
	}
	if err := b.measure(i, "join_run (the n-th client)", last, ixs); err != nil {
		return err
	}
	if ixs, err = one(r.SetPaused(me, false)); err != nil {
		return err
	}
	if err := b.measure(i, "set_paused (resume)", b.authority, ixs); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond)
	if ixs, err = one(r.Tick(me)); err != nil {
		return err
	}
	if err := b.measure(i, "tick (WaitingForMembers -> Warmup, epoch forms)", b.authority, ixs); err != nil {
		return err
	}
	s, err := r.FetchState(ctx, c)
	if err != nil {
		return err
	}
	if coordinator.Phase(s) != coordinator.Warmup || len(coordinator.Members(s)) != n {
		return fmt.Errorf("after forming: %v with %d members", coordinator.Phase(s), len(coordinator.Members(s)))
	}
	keys := map[solana.PublicKey]solana.PrivateKey{}
	for _, k := range clients {
		keys[k.PublicKey()] = k
	}
	members := coordinator.Members(s)
	ready := int(schedule.WitnessCount(config.WitnessNodes, uint16(n)))
	for k, m := range members[:ready] {
		label := "warmup_witness"
		if k == ready-1 {
			label = "warmup_witness (the last: Warmup -> RoundTrain)"
		}
		if ixs, err = one(r.WarmupWitness(m.Signer)); err != nil {
			return err
		}
		if k == 0 || k == ready-1 {
			err = b.measure(i, label, keys[m.Signer], ixs)
		} else {
			_, err = c.Send(ctx, keys[m.Signer], ixs)
		}
		if err != nil {
			return err
		}
	}

	// Three rounds; in each the first member is left out of every participant
	// filter, so that in the third a health check drops it.
	// (Rounds end when every elected witness reported; max_round_train_time is long.)
	// In round 1 every member commits (fresh), a tick draws the verify seed
	// over all of them, and the verifiers of members 2..5 post verdicts:
	// MATCH, MISMATCH (answered by the trainer's rerun, which the committee
	// fetched: TRANSIENT), MISMATCH (the committee's majority puts the
	// trainer at fault) and NO_DATA (left open); in round 2 members 2 and 3
	// commit again (linked).
	victim := members[0].Signer
	trainers := []uint16{2, 3, 4, 5}
	var faulted solana.PublicKey
	for round := 0; round < 3; round++ {
		s, err := b.tickUntil(r, coordinator.RoundTrain)
		if err != nil {
			return err
		}
		cr := coordinator.CurrentRound(s)
		witnesses := schedule.Witnesses(cr.ClientsLen, s.Config.WitnessNodes, schedule.Seed(cr.Seed))
		ms := coordinator.Members(s)
		if round >= 1 {
			committing := trainers[:2]
			if round == 1 {
				committing = make([]uint16, len(ms))
				for k := range committing {
					committing[k] = uint16(k)
				}
			}
			for k, t := range committing {
				signer := ms[t].Signer
				if ixs, err = one(r.Commit(signer, commitArgs(s, cr, t, round == 1))); err != nil {
					return err
				}
				label := "commit (fresh)"
				if round == 2 {
					label = "commit (linked to the previous one)"
				}
				if k == 0 {
					err = b.measure(i, label, keys[signer], ixs)
				} else {
					_, err = c.Send(ctx, keys[signer], ixs)
				}
				if err != nil {
					return err
				}
			}
		}
		for w, idx := range witnesses {
			signer := ms[idx].Signer
			rep, err := report(s, cr, idx, victim)
			if err != nil {
				return err
			}
			if ixs, err = one(r.Witness(signer, rep)); err != nil {
				return err
			}
			switch {
			case round == 1 && w == 0:
				err = b.measure(i, "witness", keys[signer], ixs)
			case round == 1 && w == len(witnesses)-1:
				err = b.measure(i, "witness (the last: RoundTrain -> RoundWitness)", keys[signer], ixs)
			default:
				_, err = c.Send(ctx, keys[signer], ixs)
			}
			if err != nil {
				return err
			}
		}
		if round == 2 {
			// After the reports (the victim may be an elected witness), a
			// member accuses the victim of missing the previous round.
			if ixs, err = one(r.HealthCheck(ms[1].Signer, cr.Step, 0, victim)); err != nil {
				return err
			}
			if err := b.measure(i, "health_check (accused dropped)", keys[ms[1].Signer], ixs); err != nil {
				return err
			}
		}
		if round == 1 {
			// RoundWitness: the drawn verifiers judge the commitments.
			s, err := r.FetchState(ctx, c)
			if err != nil {
				return err
			}
			if coordinator.Phase(s) != coordinator.RoundWitness {
				return fmt.Errorf("after the witnesses: %v", coordinator.Phase(s))
			}
			// The verify seed comes from a slot after RoundTrain's last: a
			// tick draws it and counts the commitments to judge (all of
			// them: everyone is in its first epoch).
			time.Sleep(250 * time.Millisecond)
			if ixs, err = one(r.Tick(me)); err != nil {
				return err
			}
			if err := b.measure(i, "tick (draws the verify seed, every member committed)", b.authority, ixs); err != nil {
				return err
			}
			if s, err = r.FetchState(ctx, c); err != nil {
				return err
			}
			cr := coordinator.CurrentRound(s)
			if cr.VerifySeed == ([32]byte{}) || int(cr.Unjudged) != len(coordinator.Members(s)) {
				return fmt.Errorf("after the draw: %d unjudged of %d", cr.Unjudged, len(coordinator.Members(s)))
			}
			ms := coordinator.Members(s)
			verdicts := []struct {
				verdict uint8
				label   string
			}{
				{coordinator.VerdictMatch, "verify (MATCH)"},
				{coordinator.VerdictMismatch, "verify (MISMATCH: opens a dispute)"},
				{coordinator.VerdictMismatch, ""},
				{coordinator.VerdictNoData, ""},
			}
			claimed := [2][32]byte{{0xaa}, {0xbb}}
			for k, t := range trainers {
				if !coordinator.MustVerify(s, cr, t) {
					return fmt.Errorf("member %d's commitment is not to be verified", t)
				}
				v, _ := schedule.Verifier(schedule.Seed(cr.VerifySeed), t, cr.ClientsLen)
				args := coordinator.VerifyArgs{Step: cr.Step, VerifierIndex: v, Index: t, Verdict: verdicts[k].verdict}
				if args.Verdict == coordinator.VerdictMismatch {
					args.ClaimedPayload, args.ClaimedAfter = claimed[0], claimed[1]
				}
				if ixs, err = one(r.Verify(ms[v].Signer, args)); err != nil {
					return err
				}
				if verdicts[k].label != "" {
					err = b.measure(i, verdicts[k].label, keys[ms[v].Signer], ixs)
				} else {
					_, err = c.Send(ctx, keys[ms[v].Signer], ixs)
				}
				if err != nil {
					return err
				}
			}
			// Dispute 1 (member 3): the trainer's rerun reproduces the
			// accuser's hashes. Dispute 2 (member 4): two committee votes.
			s, err = r.FetchState(ctx, c)
			if err != nil {
				return err
			}
			if s.DisputesOpened != 3 {
				return fmt.Errorf("%d disputes opened, want 3", s.DisputesOpened)
			}
			if ixs, err = one(r.AnswerDispute(ms[3].Signer, 1, claimed[0], claimed[1])); err != nil {
				return err
			}
			if err := b.measure(i, "answer_dispute (the rerun is served)", keys[ms[3].Signer], ixs); err != nil {
				return err
			}
			d1, _ := coordinator.FindDispute(s, 1)
			for k, label := range []string{"", "judge_dispute (RERUN majority: TRANSIENT)"} {
				voter := s.Clients[d1.Committee[k]].Signer
				if ixs, err = one(r.JudgeDispute(voter, 1, coordinator.VoteRerun)); err != nil {
					return err
				}
				if label != "" {
					err = b.measure(i, label, keys[voter], ixs)
				} else {
					_, err = c.Send(ctx, keys[voter], ixs)
				}
				if err != nil {
					return err
				}
			}
			d, _ := coordinator.FindDispute(s, 2)
			for k, label := range []string{"judge_dispute (a vote)", "judge_dispute (the majority: trainer at fault)"} {
				voter := s.Clients[d.Committee[k]].Signer
				if ixs, err = one(r.JudgeDispute(voter, 2, coordinator.VerdictMismatch)); err != nil {
					return err
				}
				if err := b.measure(i, label, keys[voter], ixs); err != nil {
					return err
				}
			}
			s, err = r.FetchState(ctx, c)
			if err != nil {
				return err
			}
			d1, _ = coordinator.FindDispute(s, 1)
			d2, _ := coordinator.FindDispute(s, 2)
			if d1.State != coordinator.DisputeTransient || d2.State != coordinator.DisputeTrainerFault || s.Epoch.Clients[4].State != coordinator.MemberFaulted {
				return fmt.Errorf("disputes settled %d and %d, member 4 in state %d", d1.State, d2.State, s.Epoch.Clients[4].State)
			}
			faulted = ms[4].Signer
			time.Sleep(roundWitnessTime*time.Second + 100*time.Millisecond)
			if ixs, err = one(r.Tick(me)); err != nil {
				return err
			}
			if err := b.measure(i, "tick (RoundWitness -> next round)", b.authority, ixs); err != nil {
				return err
			}
		}
	}
	s, err = r.FetchState(ctx, c)
	if err != nil {
		return err
	}
	// Only the current round's reporting witnesses may announce a checkpoint.
	ms := coordinator.Members(s)
	cr := coordinator.CurrentRound(s)
	var member solana.PrivateKey
	for _, w := range cr.Witnesses[:cr.WitnessesLen] {
		if m := ms[w.Index]; m.State == coordinator.MemberHealthy {
			member = keys[m.Signer]
			break
		}
	}
	if member == nil {
		return fmt.Errorf("no healthy witness reported in the current round")
	}
	if ixs, err = one(r.Checkpoint(member.PublicKey(), "http://127.0.0.1:9000/ckpt", "step-3")); err != nil {
		return err
	}
	if err := b.measure(i, "checkpoint", member, ixs); err != nil {
		return err
	}
	// A benchmark score of the latest trained step (the slot lookup scans the 256 slots).
	report := coordinator.EvalReport{Step: s.Progress.Step - 1, Task: "hellaswag", Acc: 0.3, AccNorm: 0.35, Count: 1000}
	if ixs, err = one(r.ReportEval(member.PublicKey(), report)); err != nil {
		return err
	}
	if err := b.measure(i, "report_eval", member, ixs); err != nil {
		return err
	}
	// The longest continuation a client publishes (32 tokens).
	tokens := make([]uint32, coordinator.MaxPromptTokens)
	for k := range tokens {
		tokens[k] = uint32(k)
	}
	prompt := coordinator.PromptReport{Step: s.Progress.Step - 1, Prompt: 3, Tokens: tokens}
	if ixs, err = one(r.ReportPrompt(member.PublicKey(), prompt)); err != nil {
		return err
	}
	if err := b.measure(i, "report_prompt", member, ixs); err != nil {
		return err
	}
	if ixs, err = one(r.LeaveRun(member.PublicKey())); err != nil {
		return err
	}
	if err := b.measure(i, "leave_run", member, ixs); err != nil {
		return err
	}
	if ixs, err = one(r.SetPaused(me, true)); err != nil {
		return err
	}
	if err := b.measure(i, "set_paused (pause pending mid-epoch)", b.authority, ixs); err != nil {
		return err
	}
	if _, err := b.tickUntil(r, coordinator.Cooldown); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond)
	if ixs, err = one(r.Tick(me)); err != nil {
		return err
	}
	if err := b.measure(i, "tick (Cooldown -> Paused: rewards, vesting)", b.authority, ixs); err != nil {
		return err
	}
	if s, err = r.FetchState(ctx, c); err != nil {
		return err
	}
	if coordinator.Phase(s) != coordinator.Paused {
		return fmt.Errorf("after the epoch: %v", coordinator.Phase(s))
	}
	// The faulted member's burned points (none in its first epoch: nothing
	// had vested into a bucket yet), as the Treasurer takes them by CPI.
	if ixs, err = one(r.TakeBurned(me, faulted)); err != nil {
		return err
	}
	if err := b.measure(i, "take_burned", b.authority, ixs); err != nil {
		return err
	}
	if ixs, err = one(r.Free(me, me)); err != nil {
		return err
	}
	return b.measure(i, "free_coordinator", b.authority, ixs)
}

// commitArgs is a commitment of member t to the current round: fresh, or
// continuing its slot's latest state.
func commitArgs(s *coordinator.State, r *coordinator.Round, t uint16, fresh bool) coordinator.CommitArgs {
	ms := coordinator.Members(s)
	slot, _ := coordinator.Slot(s, ms[t].Signer)
	a := coordinator.CommitArgs{Step: r.Step, Index: t, Fresh: fresh, StateBefore: slot.StateAfter}
	_, _ = rand.Read(a.Payload[:])
	_, _ = rand.Read(a.StateAfter[:])
	if fresh {
		_, _ = rand.Read(a.StateBefore[:])
	}
	return a
}

// report is a witness report in which every round member but victim took part.
func report(s *coordinator.State, r *coordinator.Round, index uint16, victim solana.PublicKey) (coordinator.WitnessReport, error) {
	bits, hashes := schedule.BloomParams(int(r.ClientsLen))
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	participants, err := schedule.NewBloom(bits, hashes, salt)
	if err != nil {
		return coordinator.WitnessReport{}, err
	}
	broadcasts, err := schedule.NewBloom(bits, hashes, salt)
	if err != nil {
		return coordinator.WitnessReport{}, err
	}
	for _, m := range coordinator.Members(s)[:r.ClientsLen] {
		if !m.Signer.Equals(victim) {
			participants.Add(m.Signer)
			broadcasts.Add(m.P2PIdentity)
		}
	}
	return coordinator.WitnessReport{Step: r.Step, Index: index, Participants: participants, Broadcasts: broadcasts}, nil
}

// parallel runs f for every key, 16 at a time.
func (b *bench) parallel(keys []solana.PrivateKey, f func(solana.PrivateKey) error) error {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(k); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

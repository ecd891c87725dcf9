package coordsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/idl"
)

// testConfig: 3 members to start, 2 to go on, 2 elected witnesses per round,
// second-scale timers, 6-second epochs (about 8 rounds with the drain) and 16
// steps, so a run takes a few epochs.
const testConfig = `
[metadata]
name = "coordsim"
description = "simulated run"
vocab_size = 256

[config]
waiting_for_members_extra_time = 1
warmup_time = 3
max_round_train_time = 3
round_witness_time = 1
cooldown_time = 1
epoch_time = 6
total_steps = 16
init_min_clients = 3
min_clients = 2
witness_nodes = 2
global_batch_size_start = 8
global_batch_size_end = 8
global_batch_size_warmup_tokens = 0

[model]
architecture = "gpt2"
tokenizer = "byte"
vocab_size = 256
n_layer = 1
n_head = 1
n_embd = 16
max_seq_len = 32
data_type = "pretraining"
cold_start_warmup_steps = 1

[model.checkpoint]
kind = "hub"
repo = "org/model"

[model.data]
kind = "http"
location = "http://127.0.0.1:1/data"

[model.lr]
schedule = "constant"
learning_rate = 0.001
final_learning_rate = 0.001

[model.optimizer]
kind = "distro"
compression_decay = 0.999
compression_topk = 8
compression_chunk = 64
`

const t0 = 1_700_000_000

func params(t *testing.T) coordinator.UpdateParams {
	t.Helper()
	rc, err := coordinator.ParseRunConfig("coordsim.toml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rc.Params()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startSim(t *testing.T, seed uint64) *Sim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Start(ctx, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func created(t *testing.T, seed uint64) *Sim {
	t.Helper()
	s := startSim(t, seed)
	if err := s.Create("run", "v1", params(t), t0); err != nil {
		t.Fatal(err)
	}
	return s
}

type member struct {
	key solana.PublicKey
	p2p [32]byte
}

func members(n int) []member {
	out := make([]member, n)
	for i := range out {
		k := sha256.Sum256(fmt.Appendf(nil, "signer %d", i))
		out[i] = member{key: solana.PublicKeyFromBytes(k[:]), p2p: sha256.Sum256(fmt.Appendf(nil, "p2p %d", i))}
	}
	return out
}

func phase(s *Sim) coordinator.RunState { return coordinator.Phase(s.State()) }

func wantPhase(t *testing.T, s *Sim, want coordinator.RunState) {
	t.Helper()
	if got := phase(s); got != want {
		t.Fatalf("phase %s, want %s (step %d)", got, want, s.State().Progress.Step)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr checks that err is the program error name, with the code the IDL gives it.
func wantErr(t *testing.T, err error, name string) {
	t.Helper()
	var te *chain.TxError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want program error %s", err, name)
	}
	d, lerr := idl.Load("psyche_coordinator")
	if lerr != nil {
		t.Fatal(lerr)
	}
	code := uint32(0)
	for _, e := range d.Errors {
		if e.Name == name {
			code = e.Code
		}
	}
	if te.Name != name || te.Code == nil || (code != 0 && *te.Code != code) || !te.Program.Equals(coordinator.Default().ID) {
		t.Fatalf("got %v (code %v), want %s (%d)", te, te.Code, name, code)
	}
}

// report is a full witness report for the current round by the member at
// index: every member of the round but skip in its participant filter.
func report(t *testing.T, s *coordinator.State, index uint16, skip ...solana.PublicKey) coordinator.WitnessReport {
	t.Helper()
	r := coordinator.CurrentRound(s)
	bits, hashes := schedule.BloomParams(int(r.ClientsLen))
	part, err := schedule.NewBloom(bits, hashes, [8]byte{byte(index), 1})
	must(t, err)
	bcast, err := schedule.NewBloom(bits, hashes, [8]byte{byte(index), 2})
	must(t, err)
	for _, m := range coordinator.Members(s)[:r.ClientsLen] {
		skipped := false
		for _, k := range skip {
			skipped = skipped || k.Equals(m.Signer)
		}
		if !skipped {
			part.Add(m.Signer)
			bcast.Add(m.Signer)
		}
	}
	return coordinator.WitnessReport{Step: r.Step, Index: index, Participants: part, Broadcasts: bcast, BroadcastMerkle: [32]byte{1}}
}

// witnesses lists the current round's elected witnesses by member index.
func witnesses(s *coordinator.State) []uint16 {
	r := coordinator.CurrentRound(s)
	return schedule.Witnesses(r.ClientsLen, s.Config.WitnessNodes, schedule.Seed(r.Seed))
}

// TestRunThroughEpochs walks one epoch phase by phase, then drives the run
// to Finished as clients would, checking each round and epoch.
func TestRunThroughEpochs(t *testing.T) {
	begin := time.Now()
	s := created(t, 1)
	ms := members(3)
	now := int64(t0)
	earning := uint64(1000)
	must(t, s.SetFutureEpochRates(&earning, nil, now))
	wantPhase(t, s, coordinator.WaitingForMembers)
	st := s.State()
	if st.Progress.Step != 1 || coordinator.FixedString(st.RunId[:]) != "run" || coordinator.FixedString(st.Metadata.Name[:]) != "coordsim" ||
		st.Config.TotalSteps != 16 || st.Model.CheckpointKind != coordinator.CheckpointHub {
		t.Fatalf("created state: step %d, run %q, name %q, %+v", st.Progress.Step, st.RunId, st.Metadata.Name, st.Config)
	}

	// Joins; the phase began this second, so nothing can advance yet.
	for _, m := range ms {
		must(t, s.Join(m.key, m.p2p, now))
	}
	wantErr(t, s.Join(ms[0].key, ms[0].p2p, now), "AlreadyJoined")
	wantErr(t, s.Tick(ms[0].key, now), "TickTooEarly")
	wantPhase(t, s, coordinator.WaitingForMembers)

	now++
	must(t, s.Tick(ms[0].key, now))
	wantPhase(t, s, coordinator.Warmup)
	if got := len(coordinator.Members(s.State())); got != 3 {
		t.Fatalf("%d members, want 3", got)
	}
	wantErr(t, s.Tick(ms[0].key, now), "TickTooEarly")
	wantErr(t, s.Witness(ms[0].key, report(t, s.State(), 0), now), "WrongPhase")

	// Two warmup witnesses (as many as witnesses will be elected) start training.
	must(t, s.WarmupWitness(ms[0].key, now))
	wantErr(t, s.WarmupWitness(ms[0].key, now), "AlreadyWitnessed")
	wantPhase(t, s, coordinator.Warmup)
	must(t, s.WarmupWitness(ms[1].key, now))
	wantPhase(t, s, coordinator.RoundTrain)

	// The round's seed is the one clients compute from the SlotHashes entry of
	// the call that started it: call number s.calls, hash slotHash(seed, calls).
	st = s.State()
	r := coordinator.CurrentRound(st)
	if want := schedule.RoundSeed(schedule.GenesisSeed([]byte("run")), s.calls, slotHash(1, s.calls), 1); r.Seed != want || r.Step != 1 || r.Height != 0 {
		t.Fatalf("round step %d height %d seed %x, want step 1 height 0 seed %x", r.Step, r.Height, r.Seed, want)
	}

	// Only elected witnesses report; the last report ends training.
	elected := witnesses(st)
	if len(elected) != 2 {
		t.Fatalf("elected %v, want 2 witnesses", elected)
	}
	for i := range uint16(3) {
		if contains(elected, i) {
			continue
		}
		wantErr(t, s.Witness(ms[i].key, report(t, st, i), now), "NotAWitness")
	}
	wantErr(t, s.Witness(ms[elected[0]].key, report(t, st, elected[1]), now), "ClientIndexMismatch")
	must(t, s.Witness(ms[elected[0]].key, report(t, st, elected[0]), now))
	wantPhase(t, s, coordinator.RoundTrain)
	must(t, s.Witness(ms[elected[1]].key, report(t, st, elected[1]), now))
	wantPhase(t, s, coordinator.RoundWitness)
	wantErr(t, s.Tick(ms[2].key, now), "TickTooEarly")
	must(t, s.Checkpoint(ms[2].key, "org/model", "rev1", now))
	if got := coordinator.FixedString(s.State().Model.CheckpointRevision[:]); got != "rev1" {
		t.Fatalf("checkpoint revision %q", got)
	}
	now++
	must(t, s.Tick(ms[2].key, now))
	wantPhase(t, s, coordinator.RoundTrain)
	if st := s.State(); st.Progress.Step != 2 || coordinator.CurrentRound(st).Height != 1 {
		t.Fatalf("second round: step %d height %d", st.Progress.Step, coordinator.CurrentRound(st).Height)
	}
	wantErr(t, s.HealthCheck(ms[0].key, 2, 1, ms[1].key, now), "HealthCheckTooEarly")

	// From here on, clients act as they would each second until the run ends.
	type epochEnd struct{ epoch, step uint32 }
	var ends []epochEnd
	healthChecked := false
	lastStep := s.State().Progress.Step
	for range 200 {
		st := s.State()
		switch phase(s) {
		case coordinator.WaitingForMembers:
			for _, m := range ms {
				if c, ok := coordinator.Slot(st, m.key); !ok || c.Pending == 0 {
					must(t, s.Join(m.key, m.p2p, now))
				}
			}
		case coordinator.Warmup:
			for _, m := range ms {
				if phase(s) == coordinator.Warmup {
					must(t, s.WarmupWitness(m.key, now))
				}
			}
		case coordinator.RoundTrain:
			r := coordinator.CurrentRound(st)
			if r.Step != st.Progress.Step || r.Step < lastStep || r.Step > lastStep+1 {
				t.Fatalf("round step %d, progress step %d, last %d", r.Step, st.Progress.Step, lastStep)
			}
			lastStep = r.Step
			if r.Height >= 2 && !healthChecked {
				// Everyone was seen by every witness: the accusation fails.
				wantErr(t, s.HealthCheck(ms[0].key, r.Step, 1, coordinator.Members(st)[1].Signer, now), "ClientHealthy")
				healthChecked = true
			}
			for _, w := range witnesses(st) {
				must(t, s.Witness(coordinator.Members(st)[w].Signer, report(t, st, w), now))
			}
			wantPhase(t, s, coordinator.RoundWitness)
		case coordinator.Cooldown:
			ends = append(ends, epochEnd{st.Progress.Epoch, st.Progress.Step})
		case coordinator.Finished:
		default:
		}
		if phase(s) == coordinator.Finished {
			break
		}
		now++
		err := s.Tick(ms[0].key, now)
		var te *chain.TxError
		if err != nil && !(errors.As(err, &te) && te.Name == "TickTooEarly") {
			t.Fatal(err)
		}
	}
	wantPhase(t, s, coordinator.Finished)
	st = s.State()
	if st.Progress.Step != st.Config.TotalSteps+1 || st.Progress.Epoch < 2 || len(ends) < 2 || !healthChecked {
		t.Fatalf("finished at step %d epoch %d; epochs ended %v; health checked %v", st.Progress.Step, st.Progress.Epoch, ends, healthChecked)
	}
	// Every epoch shared the rate among its members, exactly.
	total := uint64(0)
	for _, m := range ms {
		c, _ := coordinator.Slot(st, m.key)
		if c.Earned < uint64(len(ends))*(earning/3) {
			t.Fatalf("%s earned %d in %d epochs", m.key, c.Earned, len(ends))
		}
		total += c.Earned
	}
	if total != uint64(len(ends))*earning {
		t.Fatalf("%d points earned in %d epochs of %d", total, len(ends), earning)
	}
	// After the first epoch the Hub checkpoint moved to peers.
	if st.Model.CheckpointKind != coordinator.CheckpointP2P {
		t.Fatalf("checkpoint kind %d after the first epoch", st.Model.CheckpointKind)
	}
	t.Logf("%d calls, epochs ended at %v, %v (including the build check)", s.calls, ends, time.Since(begin))
}

func contains(xs []uint16, x uint16) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestErrors covers errors the glue and the logic return before a run exists
// and around it, and that each decodes as a failed transaction's would.
func TestErrors(t *testing.T) {
	s := startSim(t, 2)
	ms := members(2)
	if s.State() != nil || s.Account() != nil {
		t.Fatal("state before the first call")
	}
	wantErr(t, s.Tick(ms[0].key, t0), "AccountNotInitialized")
	p := params(t)
	bad := *p.Config
	bad.MinClients = 0
	p.Config = &bad
	wantErr(t, s.Create("run", "v1", p, t0), "ConfigMinClients")
	// The init went through: the run exists, unconfigured.
	wantPhase(t, s, coordinator.Uninitialized)
	wantErr(t, s.Create("run", "v1", params(t), t0), "AlreadyInitialized")
	wantErr(t, s.Join(ms[0].key, ms[0].p2p, t0), "RunUninitialized")
	wantErr(t, s.Tick(ms[0].key, t0), "RunHalted")
	must(t, s.Update(params(t), t0))
	must(t, s.SetPaused(false, t0))
	wantPhase(t, s, coordinator.WaitingForMembers)
	wantErr(t, s.SetPaused(false, t0), "NotPaused")
	must(t, s.Join(ms[0].key, ms[0].p2p, t0))
	wantErr(t, s.Join(ms[1].key, ms[0].p2p, t0), "P2pIdentityTaken")
	wantErr(t, s.Leave(ms[1].key, t0), "NotAClient")
	must(t, s.Leave(ms[0].key, t0))
	wantErr(t, s.Checkpoint(ms[0].key, string(make([]byte, 200)), "", t0), "InvalidCheckpoint")
	wantErr(t, s.WarmupWitness(ms[0].key, t0), "WrongPhase")
	earning := uint64(90)
	must(t, s.SetFutureEpochRates(&earning, nil, t0))
	if got := s.State().FutureRates.EarningRateTotalShared; got != 90 {
		t.Fatalf("future earning rate %d", got)
	}
	must(t, s.SetPaused(true, t0))
	wantPhase(t, s, coordinator.Paused)
	wantErr(t, s.Tick(ms[0].key, t0+100), "RunHalted")

	// A builder's own refusal is returned as is.
	if err := s.Witness(ms[0].key, coordinator.WitnessReport{}, t0); err == nil || errors.As(err, new(*chain.TxError)) {
		t.Fatalf("witness without filters: %v", err)
	}
	// A failed call leaves the state of the last successful one.
	before := s.Account()
	wantErr(t, s.SetPaused(true, t0), "AlreadyPaused")
	if !bytes.Equal(before, s.Account()) {
		t.Fatal("a failed call changed the account")
	}
}

// TestAccountDecodes: the sim's bytes are a CoordinatorAccount as a validator
// would return it, and State is a private copy.
func TestAccountDecodes(t *testing.T) {
	s := created(t, 3)
	data := s.Account()
	if len(data) != coordinator.AccountSize {
		t.Fatalf("%d bytes", len(data))
	}
	st, err := coordinator.DecodeState(data)
	if err != nil {
		t.Fatal(err)
	}
	if *st != *s.State() || st.Version != coordinator.StateVersion || st.Nonce != 3 {
		t.Fatalf("decoded version %d nonce %d", st.Version, st.Nonce)
	}
	a := s.State()
	a.Progress.Step = 99
	if s.State().Progress.Step != 1 {
		t.Fatal("State shares memory")
	}
}

// TestDeterministic: the same calls with the same seed give the same account;
// another seed gives other round seeds.
func TestDeterministic(t *testing.T) {
	run := func(seed uint64) []byte {
		s := created(t, seed)
		ms := members(3)
		for _, m := range ms {
			must(t, s.Join(m.key, m.p2p, t0))
		}
		must(t, s.Tick(ms[0].key, t0+1))
		must(t, s.WarmupWitness(ms[0].key, t0+1))
		must(t, s.WarmupWitness(ms[1].key, t0+1))
		wantPhase(t, s, coordinator.RoundTrain)
		return s.Account()
	}
	a, b, c := run(7), run(7), run(8)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different accounts")
	}
	sa, _ := coordinator.DecodeState(a)
	sc, _ := coordinator.DecodeState(c)
	if coordinator.CurrentRound(sa).Seed == coordinator.CurrentRound(sc).Seed {
		t.Fatal("different seeds, same round seed")
	}
}

func TestMissingCargo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := findCargo(); err == nil || !strings.Contains(err.Error(), "cargo is needed") {
		t.Fatalf("without cargo: %v", err)
	}
}

// TestPrebuiltBinary: $PSYCHE_COORDSIM_BIN names the simulator to run, and
// one that does not exist is an error that names the variable.
func TestPrebuiltBinary(t *testing.T) {
	built.Lock()
	saved := built.path
	built.path = ""
	built.Unlock()
	t.Cleanup(func() {
		built.Lock()
		built.path = saved
		built.Unlock()
	})
	bin, err := Binary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()) // no cargo: the prebuilt binary alone
	for _, c := range []struct {
		env string
		ok  bool
	}{{bin, true}, {bin + ".missing", false}} {
		built.Lock()
		built.path = ""
		built.Unlock()
		t.Setenv(BinaryEnv, c.env)
		got, err := Binary(context.Background())
		switch {
		case c.ok && (err != nil || got != c.env):
			t.Errorf("$%s=%s: %q, %v", BinaryEnv, c.env, got, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), BinaryEnv)):
			t.Errorf("$%s=%s (missing): %q, %v", BinaryEnv, c.env, got, err)
		}
	}
	built.Lock()
	built.path = ""
	built.Unlock()
	t.Setenv(BinaryEnv, bin)
	s, err := Start(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Create("run", "v1", coordinator.UpdateParams{}, t0); err == nil {
		t.Fatal("the prebuilt simulator resumed a run without config")
	}
}

// BenchmarkCall measures one successful call (the account sent back), alone
// and followed by State (which decodes it).
func BenchmarkCall(b *testing.B) {
	for _, state := range []bool{false, true} {
		b.Run(fmt.Sprintf("state=%v", state), func(b *testing.B) {
			s, err := Start(context.Background(), 1)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Create("run", "v1", coordinator.UpdateParams{}, t0); err == nil {
				b.Fatal("a run without config resumed")
			}
			b.ResetTimer()
			for i := range b.N {
				rate := uint64(i)
				if err := s.SetFutureEpochRates(&rate, nil, t0); err != nil {
					b.Fatal(err)
				}
				if state {
					_ = s.State()
				}
			}
		})
	}
}

// TestVerification: members commit while training, the drawn verifiers post
// verdicts in RoundWitness, and the program's refusals come back by name.
func TestVerification(t *testing.T) {
	s := startSim(t, 4)
	p := params(t)
	cfg := *p.Config
	cfg.VerificationPercent = 100
	p.Config = &cfg
	must(t, s.Create("run", "v1", p, t0))
	ms := members(3)
	now := int64(t0)
	for _, m := range ms {
		must(t, s.Join(m.key, m.p2p, now))
	}
	now++
	must(t, s.Tick(ms[0].key, now))
	for _, m := range ms[:2] {
		must(t, s.WarmupWitness(m.key, now))
	}
	wantPhase(t, s, coordinator.RoundTrain)
	st := s.State()
	members := coordinator.Members(st)
	step := st.Progress.Step
	commit := func(i uint16) coordinator.CommitArgs {
		return coordinator.CommitArgs{Step: step, Index: i, Payload: sha256.Sum256([]byte{byte(i), 1}),
			StateBefore: sha256.Sum256([]byte{byte(i), 2}), StateAfter: sha256.Sum256([]byte{byte(i), 3}), Fresh: true}
	}
	for i := range uint16(3) {
		must(t, s.Commit(members[i].Signer, commit(i), now))
	}
	wantErr(t, s.Commit(members[0].Signer, commit(0), now), "AlreadyCommitted")
	wantErr(t, s.Commit(members[0].Signer, commit(1), now), "ClientIndexMismatch")
	r := coordinator.CurrentRound(s.State())
	if c := r.Commits[1]; c.Payload != commit(1).Payload || c.Flags != coordinator.CommitCommitted|coordinator.CommitFresh|coordinator.CommitProbation {
		t.Fatalf("stored commitment %+v", c)
	}
	if slot, _ := coordinator.Slot(s.State(), members[1].Signer); slot.StateAfter != commit(1).StateAfter {
		t.Fatal("the slot does not hold the latest state")
	}
	// Verdicts wait for RoundWitness.
	wantErr(t, s.Verify(members[1].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: 1, Index: 0, Verdict: coordinator.VerdictMatch}, now), "WrongRound")
	st = s.State()
	for _, w := range witnesses(st) {
		must(t, s.Witness(members[w].Signer, report(t, st, w), now))
	}
	wantPhase(t, s, coordinator.RoundWitness)
	// The seed comes from the slot after the one RoundTrain ended in: the
	// next call (a new slot in the sim) draws it.
	if r = coordinator.CurrentRound(s.State()); r.VerifySeed != ([32]byte{}) || r.VerifySlot == 0 {
		t.Fatalf("verify seed drawn in the slot RoundTrain ended in (slot %d)", r.VerifySlot)
	}
	must(t, s.Tick(ms[0].key, now))
	st = s.State()
	r = coordinator.CurrentRound(st)
	if r.VerifySeed == ([32]byte{}) || r.Unjudged != 3 {
		t.Fatalf("after the tick: seed %x, %d unjudged", r.VerifySeed, r.Unjudged)
	}
	wantErr(t, s.Commit(members[0].Signer, commit(0), now), "WrongRound")
	for i := range uint16(3) {
		if !coordinator.MustVerify(st, r, i) {
			t.Fatalf("member %d in its first epoch must be verified", i)
		}
		v, ok := schedule.Verifier(schedule.Seed(r.VerifySeed), i, r.ClientsLen)
		if !ok || v == i {
			t.Fatalf("verifier of %d: %d %v", i, v, ok)
		}
		args := coordinator.VerifyArgs{Step: step, VerifierIndex: v, Index: i, Verdict: coordinator.VerdictMatch}
		other := (v + 1) % 3
		if other == i {
			other = (other + 1) % 3
		}
		wantErr(t, s.Verify(members[other].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: other, Index: i, Verdict: 1}, now), "NotTheVerifier")
		wantErr(t, s.Verify(members[v].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: v, Index: i, Verdict: 9}, now), "InvalidVerdict")
		must(t, s.Verify(members[v].Signer, args, now))
		if i == 2 {
			// Every sampled contribution is judged: the round ends at once.
			break
		}
		wantErr(t, s.Verify(members[v].Signer, args, now), "AlreadyJudged")
		if c := coordinator.CurrentRound(s.State()).Commits[i]; c.Verdict != coordinator.VerdictMatch || c.Verifier != v {
			t.Fatalf("commitment %d after the verdict: %+v", i, c)
		}
	}
	// The next round: a linked commitment continues from the last state.
	wantPhase(t, s, coordinator.RoundTrain)
	step = s.State().Progress.Step
	linked := commit(0)
	linked.Step, linked.Fresh = step, false
	wantErr(t, s.Commit(members[0].Signer, linked, now), "StateNotLinked")
	linked.StateBefore = sha256.Sum256([]byte{0, 3})
	must(t, s.Commit(members[0].Signer, linked, now))
}

// TestDisputes: a MISMATCH verdict opens a dispute whose committee (as
// clients/schedule computes it) settles it; the trainer's rerun answers one.
func TestDisputes(t *testing.T) {
	s := startSim(t, 5)
	p := params(t)
	cfg := *p.Config
	cfg.VerificationPercent, cfg.InitMinClients, cfg.ForgivePerEpoch = 100, 5, 0
	p.Config = &cfg
	must(t, s.Create("run", "v1", p, t0))
	ms := members(5)
	now := int64(t0)
	for _, m := range ms {
		must(t, s.Join(m.key, m.p2p, now))
	}
	now++
	must(t, s.Tick(ms[0].key, now))
	for _, m := range ms[:2] {
		must(t, s.WarmupWitness(m.key, now))
	}
	st := s.State()
	mem := coordinator.Members(st)
	step := st.Progress.Step
	for i := range uint16(5) {
		must(t, s.Commit(mem[i].Signer, coordinator.CommitArgs{Step: step, Index: i, Payload: [32]byte{byte(i)}, StateAfter: [32]byte{byte(i), 1}, Fresh: true}, now))
	}
	for _, w := range witnesses(st) {
		must(t, s.Witness(mem[w].Signer, report(t, st, w), now))
	}
	wantPhase(t, s, coordinator.RoundWitness)
	wantErr(t, s.Verify(mem[1].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: 1, Index: 0, Verdict: coordinator.VerdictMatch}, now), "VerifySeedPending")
	must(t, s.Tick(ms[0].key, now))
	st = s.State()
	r := coordinator.CurrentRound(st)
	seed := schedule.Seed(r.VerifySeed)
	verdict := func(trainer uint16, v uint8) uint16 {
		verifier, _ := schedule.Verifier(seed, trainer, r.ClientsLen)
		must(t, s.Verify(mem[verifier].Signer, coordinator.VerifyArgs{Step: step, VerifierIndex: verifier, Index: trainer, Verdict: v,
			ClaimedPayload: [32]byte{0xaa}, ClaimedAfter: [32]byte{0xbb}}, now))
		return verifier
	}
	accuser := verdict(0, coordinator.VerdictMismatch)
	verdict(1, coordinator.VerdictNoData)
	st = s.State()
	if st.DisputesOpened != 2 {
		t.Fatalf("%d disputes opened", st.DisputesOpened)
	}
	d, ok := coordinator.FindDispute(st, 1)
	if !ok || d.State != coordinator.DisputeOpen || d.Kind != coordinator.VerdictMismatch || d.TrainerIndex != 0 || d.Step != step || d.DeadlineStep != step+2 {
		t.Fatalf("dispute 1: %+v", d)
	}
	// The committee is the schedule's, by slot.
	committee := schedule.Committee(seed, 0, accuser, r.ClientsLen)
	if int(d.CommitteeLen) != len(committee) || len(committee) != 3 {
		t.Fatalf("committee %v, stored %d", committee, d.CommitteeLen)
	}
	for k, i := range committee {
		if d.Committee[k] != st.Epoch.Clients[i].Slot {
			t.Fatalf("committee member %d: slot %d, want %d", k, d.Committee[k], st.Epoch.Clients[i].Slot)
		}
	}
	wantErr(t, s.AnswerDispute(mem[0].Signer, 1, [32]byte{0xaa}, [32]byte{0xcc}, now), "RerunDiffers")
	wantErr(t, s.AnswerDispute(mem[1].Signer, 2, [32]byte{0xaa}, [32]byte{0xbb}, now), "NotAnswerable")
	wantErr(t, s.JudgeDispute(mem[0].Signer, 1, coordinator.VerdictMatch, now), "NotOnCommittee")
	must(t, s.JudgeDispute(mem[committee[0]].Signer, 1, coordinator.VerdictMismatch, now))
	wantErr(t, s.JudgeDispute(mem[committee[0]].Signer, 1, coordinator.VerdictMismatch, now), "AlreadyVoted")
	must(t, s.JudgeDispute(mem[committee[1]].Signer, 1, coordinator.VerdictNoData, now))
	st = s.State()
	if d, _ := coordinator.FindDispute(st, 1); d.State != coordinator.DisputeTrainerFault {
		t.Fatalf("dispute 1 settled %d", d.State)
	}
	if st.Epoch.Clients[0].State != coordinator.MemberFaulted {
		t.Fatalf("trainer's state %d", st.Epoch.Clients[0].State)
	}
	// Its slot stays named by dispute 2 if it is that one's accuser or on its committee.
	d2, _ := coordinator.FindDispute(st, 2)
	named := uint8(0)
	for _, sl := range append([]uint16{d2.TrainerSlot, d2.AccuserSlot}, d2.Committee[:d2.CommitteeLen]...) {
		if sl == st.Epoch.Clients[0].Slot {
			named++
		}
	}
	if slot, _ := coordinator.Slot(st, mem[0].Signer); slot.HasFault != 1 || slot.OpenDisputes != named {
		t.Fatalf("trainer's slot %+v, named by dispute 2 %d times", slot, named)
	}
	wantErr(t, s.JudgeDispute(mem[committee[2]].Signer, 1, coordinator.VerdictMatch, now), "DisputeNotOpen")
	// The NO_DATA dispute: the trainer cannot answer it; nobody votes, and two
	// rounds later it is unresolved.
	for k := 0; s.State().Progress.Step <= step+2; k++ {
		if k == 50 {
			t.Fatalf("the run is stuck at step %d in %s", s.State().Progress.Step, phase(s))
		}
		if st := s.State(); phase(s) == coordinator.RoundTrain && coordinator.CurrentRound(st).WitnessesLen == 0 {
			for _, w := range witnesses(st) {
				if st.Epoch.Clients[w].State == coordinator.MemberHealthy {
					must(t, s.Witness(coordinator.Members(st)[w].Signer, report(t, st, w), now))
				}
			}
		}
		now += 4
		err := s.Tick(ms[4].key, now)
		var te *chain.TxError
		if err != nil && !(errors.As(err, &te) && te.Name == "TickTooEarly") {
			t.Fatal(err)
		}
	}
	if d, _ := coordinator.FindDispute(s.State(), 2); d.State != coordinator.DisputeUnresolved {
		t.Fatalf("dispute 2 after its deadline: %d (step %d)", d.State, s.State().Progress.Step)
	}
}

// TestReportEval: a registered client's report of a trained step succeeds
// and leaves the account as it was; the rest is refused as the program does.
func TestReportEval(t *testing.T) {
	s := startSim(t, 7)
	p := params(t)
	p.Progress = &coordinator.Progress{Step: 3} // steps 1 and 2 trained
	must(t, s.Create("run", "v1", p, t0))
	ms := members(2)
	must(t, s.Join(ms[0].key, ms[0].p2p, t0))
	report := coordinator.EvalReport{Step: 2, Task: "arc_easy", Acc: 0.5, AccNorm: 1, Count: 10}
	before := s.Account()
	must(t, s.ReportEval(ms[0].key, report, t0))
	if !bytes.Equal(before, s.Account()) {
		t.Fatal("report_eval changed the account")
	}
	wantErr(t, s.ReportEval(ms[1].key, report, t0), "NotAClient")
	for _, edit := range []func(*coordinator.EvalReport){
		func(r *coordinator.EvalReport) { r.Step = 3 },
		func(r *coordinator.EvalReport) { r.Task = strings.Repeat("x", coordinator.MaxEvalTaskLen+1) },
		func(r *coordinator.EvalReport) { r.Acc = 1.5 },
		func(r *coordinator.EvalReport) { r.Count = 0 },
	} {
		bad := report
		edit(&bad)
		wantErr(t, s.ReportEval(ms[0].key, bad, t0), "EvalReport")
	}
}

// TestReportPrompt: report_prompt in the simulator, as TestReportEval.
func TestReportPrompt(t *testing.T) {
	s := startSim(t, 7)
	p := params(t)
	p.Progress = &coordinator.Progress{Step: 3} // steps 1 and 2 trained
	must(t, s.Create("run", "v1", p, t0))
	ms := members(2)
	must(t, s.Join(ms[0].key, ms[0].p2p, t0))
	report := coordinator.PromptReport{Step: 2, Prompt: 1, Tokens: []uint32{3, 1, 4}}
	before := s.Account()
	must(t, s.ReportPrompt(ms[0].key, report, t0))
	if !bytes.Equal(before, s.Account()) {
		t.Fatal("report_prompt changed the account")
	}
	wantErr(t, s.ReportPrompt(ms[1].key, report, t0), "NotAClient")
	for _, edit := range []func(*coordinator.PromptReport){
		func(r *coordinator.PromptReport) { r.Step = 3 },
		func(r *coordinator.PromptReport) { r.Tokens = nil },
		func(r *coordinator.PromptReport) { r.Tokens = make([]uint32, coordinator.MaxPromptTokens+1) },
		func(r *coordinator.PromptReport) { r.Tokens = []uint32{p.Model.VocabSize} },
	} {
		bad := report
		edit(&bad)
		wantErr(t, s.ReportPrompt(ms[0].key, bad, t0), "PromptReport")
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
)

// tinyTrainerConfig and tinyDeMo keep the in-process replays fast.
var (
	tinyTrainerConfig = trainer.Config{Name: "tiny", Vocab: 32, PaddedVocab: 32, Layers: 1, Channels: 16, Heads: 2, SeqLen: 8, MicroBatch: 2}
	tinyDeMo          = trainer.DeMo{LR: 1e-3, Decay: 0.999, WeightDecay: 0.1, ClipNorm: 1, Chunk: 64, TopK: 8, OneBit: true}
)

// demoUpdate is the update of a run whose model holds DeMo hyperparameters
// hp at a constant learning rate.
func demoUpdate(hp trainer.DeMo) client.Update {
	one := uint8(0)
	if hp.OneBit {
		one = 1
	}
	m := coordinator.Model{Optimizer: 1, LrSchedule: 1, LearningRate: hp.LR, FinalLearningRate: hp.LR,
		CompressionDecay: hp.Decay, WeightDecay: hp.WeightDecay, ClipGradNorm: hp.ClipNorm,
		CompressionChunk: uint32(hp.Chunk), CompressionTopk: uint32(hp.TopK), Quantize1bit: one, InnerSteps: 1}
	return client.NewUpdate(&m, 100, 2, 1, 0, 1, false, false)
}

// fixedBatch serves in and tg whatever range is asked for.
func fixedBatch(in, tg []int32, seqLen int) client.FetchFunc {
	return func(context.Context, uint64, uint64) ([]int32, []int32, int, error) { return in, tg, seqLen, nil }
}

func newTestTrainer(t *testing.T, cfg trainer.Config, seed uint64) *trainer.Trainer {
	t.Helper()
	tr, err := trainer.New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if err := tr.SetThreads(1); err != nil {
		t.Fatal(err)
	}
	return tr
}

// tokens is a deterministic batch of n sequences for cfg.
func tokens(cfg trainer.Config, seed uint64, n int) (in, tg []int32) {
	text := trainer.MarkovText(seed, (n+1)*(cfg.SeqLen+1))
	for i := range text {
		text[i] = byte(int(text[i]) % cfg.Vocab)
	}
	return trainer.Window(text, 0, n, cfg.SeqLen)
}

// trainedStep is one honest contribution: the parameters and replay state
// a trainer started from, its payload and its replay state after.
type trainedStep struct {
	params               []float32
	before, payload, aft []byte
	in, tg               []int32
}

func (s trainedStep) commitment() commitment {
	return commitment{payload: sha256.Sum256(s.payload), before: sha256.Sum256(s.before), after: sha256.Sum256(s.aft)}
}

// trainStep runs history steps (each applied, as a replica does), then the
// step to verify.
func trainStep(t *testing.T, tr *trainer.Trainer, hp trainer.DeMo, history int, in, tg []int32) trainedStep {
	t.Helper()
	ctx := context.Background()
	cfg := tr.Config()
	for i := range history {
		hin, htg := tokens(cfg, uint64(100+i), 4)
		if _, err := tr.Step(ctx, hin, htg, cfg.SeqLen); err != nil {
			t.Fatal(err)
		}
		p, err := tr.DeMoGenerate(hp)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.DeMoApply(hp, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
	}
	var s trainedStep
	var err error
	if s.params, err = tr.Params(); err != nil {
		t.Fatal(err)
	}
	if s.before, err = tr.ReplayState(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Step(ctx, in, tg, cfg.SeqLen); err != nil {
		t.Fatal(err)
	}
	if s.payload, err = tr.DeMoGenerate(hp); err != nil {
		t.Fatal(err)
	}
	rs, err := tr.ReplayState()
	if err != nil {
		t.Fatal(err)
	}
	if s.aft, err = trainer.AfterApply(rs, hp); err != nil {
		t.Fatal(err)
	}
	s.in, s.tg = in, tg
	return s
}

// tamper flips the sign of entry j of tensor i of a one-bit payload.
func tamper(t *testing.T, cfg trainer.Config, hp trainer.DeMo, payload []byte, i, j int) []byte {
	t.Helper()
	p, err := trainer.DecodePayload(cfg, hp, payload)
	if err != nil {
		t.Fatal(err)
	}
	p.Tensors[i].Signs[j] = !p.Tensors[i].Signs[j]
	return p.Encode()
}

// The replay itself, on a real tiny trainer: an honest contribution
// replays to its commitment; a payload the trainer did not compute is a
// MISMATCH naming the first tensor that differs; a state file that is not
// the committed one is refused as bad input.
func TestVerifyReplayContribution(t *testing.T) {
	cfg, hp := tinyTrainerConfig, tinyDeMo
	in, tg := tokens(cfg, 7, 4)
	a := newTestTrainer(t, cfg, 1)
	honest := trainStep(t, a, hp, 2, in, tg)
	if trainer.FreshReplayState(honest.before) {
		t.Fatal("the history left no momentum")
	}
	// The state after committed is the one the next step starts from.
	if err := a.DeMoApply(hp, [][]byte{honest.payload}); err != nil {
		t.Fatal(err)
	}
	if next, err := a.ReplayState(); err != nil || !bytes.Equal(next, honest.aft) {
		t.Fatalf("the state after is not the next step's state before (%v)", err)
	}
	// The verifier's trainer starts elsewhere (another seed): the replay
	// replaces its whole state.
	v := newTestTrainer(t, cfg, 2)
	replay := func(s trainedStep, c commitment, published []byte) replayReport {
		t.Helper()
		rep, err := replayContribution(context.Background(), replayInput{tr: v, params: s.params, state: s.before,
			published: published, u: demoUpdate(hp), fetch: fixedBatch(s.in, s.tg, cfg.SeqLen), batch: schedule.Assignment{Len: 4}, commit: c})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	c := honest.commitment()
	for _, published := range [][]byte{nil, honest.payload} {
		rep := replay(honest, c, published)
		if !rep.match || !rep.replayed || rep.payload != c.payload || rep.after != c.after || rep.diff != "" || rep.reason != "" || rep.note != "" {
			t.Fatalf("honest replay (payload file %v): %+v", published != nil, rep)
		}
	}

	// The trainer published and committed a payload it did not compute.
	tensors, err := v.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	bad := tamper(t, cfg, hp, honest.payload, 3, 5)
	cb := c
	cb.payload = sha256.Sum256(bad)
	rep := replay(honest, cb, bad)
	want := fmt.Sprintf("3 (%s), entry 5 (chunk 0, entry 5 of", tensors[3].Name)
	if rep.match || rep.payload != c.payload || !strings.HasPrefix(rep.diff, want) || rep.note != "" {
		t.Fatalf("tampered payload: %+v; want a MISMATCH whose diff starts %q", rep, want)
	}
	if rep := replay(honest, cb, nil); rep.match || !strings.Contains(rep.note, "--payload") {
		t.Fatalf("tampered payload without the file: %+v", rep)
	}
	// A --payload file that is not the committed payload is said so.
	if rep := replay(honest, c, bad); !rep.match || !strings.Contains(rep.note, "not the payload the trainer committed") || !strings.HasPrefix(rep.diff, want) {
		t.Fatalf("a published file other than the committed payload: %+v", rep)
	}
	// Only the state after differs (a momentum it did not compute).
	ca := c
	ca.after = sha256.Sum256([]byte("another state"))
	if rep := replay(honest, ca, honest.payload); rep.match || rep.payload != c.payload || rep.diff != "" {
		t.Fatalf("another state after: %+v", rep)
	}
	// Trained on other sequences.
	oin, otg := tokens(cfg, 8, 4)
	other := trainStep(t, newTestTrainer(t, cfg, 1), hp, 2, oin, otg)
	other.in, other.tg = in, tg // the verifier replays the assigned batch
	if rep := replay(other, other.commitment(), other.payload); rep.match || rep.diff == "" {
		t.Fatalf("a step on other sequences: %+v", rep)
	}
	// Committed as fresh, but it has momentum.
	cf := c
	cf.fresh = true
	if rep := replay(honest, cf, nil); rep.match || rep.replayed || !strings.Contains(rep.reason, "fresh") {
		t.Fatalf("committed as fresh: %+v", rep)
	}
	// The wrong state file: bad input, nothing replayed.
	wrong := honest
	wrong.before = trainer.FreshCopy(honest.before)
	_, err = replayContribution(context.Background(), replayInput{tr: v, params: wrong.params, state: wrong.before,
		u: demoUpdate(hp), fetch: fixedBatch(in, tg, cfg.SeqLen), batch: schedule.Assignment{Len: 4}, commit: c})
	var bi *badInputError
	if !errors.As(err, &bi) || !strings.Contains(err.Error(), "not the replay state") {
		t.Fatalf("wrong state file: %v", err)
	}
}

// verifyFixture is a run on a fake RPC endpoint: its Coordinator account
// (which a test edits), its data, and one member's honest contribution.
type verifyFixture struct {
	t                 *testing.T
	rpc               *fakeRPC
	run               coordinator.Run
	inst              bindings.CoordinatorInstance
	s                 *coordinator.State
	trainer, other    solana.PublicKey
	dir, data         string
	model, state, pay string // files
	step              trainedStep
	cfg               trainer.Config
	hp                trainer.DeMo
	assigned          schedule.Assignment
	modelParams       []float32
	payloadH, beforeH [32]byte
	afterH            [32]byte
}

const verifyTestRun = "verify-cli"

func newVerifyFixture(t *testing.T) *verifyFixture {
	t.Helper()
	f := &verifyFixture{t: t, dir: t.TempDir(), trainer: solana.NewWallet().PublicKey(), other: solana.NewWallet().PublicKey()}
	// Data: byte-level sequences of 16 tokens.
	f.data = filepath.Join(f.dir, "data")
	w, err := shard.NewWriter(f.data, shard.Params{Tokenizer: "byte", VocabSize: 256, EOT: 0, SeqLen: 16, SeqsPerChunk: 4, SeqsPerShard: 16})
	if err != nil {
		t.Fatal(err)
	}
	text := trainer.MarkovText(3, 40*17)
	doc := make([]uint32, len(text))
	for i, b := range text {
		doc[i] = uint32(b)
	}
	if err := w.AddDocument(doc); err != nil {
		t.Fatal(err)
	}
	m, _, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	root, err := hex.DecodeString(m.Root)
	if err != nil {
		t.Fatal(err)
	}

	// The run: two members, the round of step 3 current (RoundWitness).
	s := new(coordinator.State)
	s.Version = coordinator.StateVersion
	copy(s.RunId[:], verifyTestRun)
	s.RunState = uint8(coordinator.RoundWitness)
	s.Config = coordinator.Config{VerificationPercent: 100, ForgivePerEpoch: 1, VestingEpochs: 2, WitnessNodes: 0, TotalSteps: 10}
	s.Model = coordinator.Model{Architecture: 1, Tokenizer: 1, DataType: 1, Optimizer: 1, Quantize1bit: 1, MaxSeqLen: 16, NLayer: 1, NHead: 2, NEmbd: 16,
		VocabSize: 256, LrSchedule: 1, LearningRate: 0.003, FinalLearningRate: 0.003,
		ClipGradNorm: 1, CompressionDecay: 0.999, CompressionTopk: 8, CompressionChunk: 64}
	copy(s.Model.DataLocation[:], f.data)
	copy(s.Model.DataRoot[:], root)
	s.Progress = coordinator.Progress{Epoch: 0, Step: 3, DataIndex: 12}
	s.Epoch.StartStep, s.Epoch.ClientsLen = 1, 2
	for i, k := range []solana.PublicKey{f.other, f.trainer} {
		s.Clients[i] = coordinator.ClientSlot{Signer: k, Occupied: 1, InEpoch: 1}
		s.Epoch.Clients[i] = bindings.EpochClient{Slot: uint16(i), State: coordinator.MemberHealthy, WarmupWitnessed: 1}
	}
	r := &s.Epoch.Rounds[0]
	*r = coordinator.Round{Seed: sha256.Sum256([]byte("seed")), DataIndex: 8, Step: 3, Height: 2, BatchSize: 4, ClientsLen: 2,
		VerifySeed: sha256.Sum256([]byte("verify"))}
	role, err := coordinator.ScheduleRound(s, r).Role(1)
	if err != nil {
		t.Fatal(err)
	}
	f.assigned = role.Batch

	// The trainer's contribution (member 1) from the model of step 2.
	p, err := provider.Open(context.Background(), []provider.Source{{Location: f.data}}, provider.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in, tg, _, err := client.BatchSequences(context.Background(), p, f.assigned.Start, f.assigned.Len)
	if err != nil {
		t.Fatal(err)
	}
	f.cfg, err = client.TrainerConfig(&s.Model, 4)
	if err != nil {
		t.Fatal(err)
	}
	f.hp = client.DeMo(&s.Model, client.LearningRate(&s.Model, s.Config.TotalSteps, 3, 1, false))
	tr := newTestTrainer(t, f.cfg, client.InitSeed(verifyTestRun))
	f.step = trainStep(t, tr, f.hp, 2, in, tg)
	f.payloadH, f.beforeH, f.afterH = sha256.Sum256(f.step.payload), sha256.Sum256(f.step.before), sha256.Sum256(f.step.aft)
	r.Commits[1] = coordinator.Commitment{Payload: f.payloadH, StateBefore: f.beforeH, StateAfter: f.afterH, Flags: coordinator.CommitCommitted}
	r.Commits[0] = coordinator.Commitment{Payload: sha256.Sum256([]byte("x")), Flags: coordinator.CommitCommitted | coordinator.CommitFresh, Verdict: coordinator.VerdictMatch}
	// The model file of step 2: the parameters before the step.
	m2 := newTestTrainer(t, f.cfg, 9)
	if err := m2.SetParams(f.step.params); err != nil {
		t.Fatal(err)
	}
	f.model = f.file("model-step2.safetensors", nil)
	if err := m2.SaveModel(f.model, map[string]string{"run_id": verifyTestRun, "step": "2"}); err != nil {
		t.Fatal(err)
	}
	f.modelParams = f.step.params
	f.state = f.file("state", f.step.before)
	f.pay = f.file("payload", f.step.payload)
	f.s = s

	f.run.Program = coordinator.Default()
	f.run.Instance, err = f.run.Program.InstanceAddress(verifyTestRun)
	if err != nil {
		t.Fatal(err)
	}
	f.run.Account = solana.NewWallet().PublicKey()
	f.inst = bindings.CoordinatorInstance{MainAuthority: f.other, JoinAuthority: f.other, CoordinatorAccount: f.run.Account, RunId: verifyTestRun}
	f.rpc = newFakeRPC(t, f.run.Program.ID)
	f.rpc.set(f.run.Instance, bindings.Account_CoordinatorInstance, f.inst)
	f.publish()
	return f
}

// file writes data (if not nil) to a file of the fixture's directory.
func (f *verifyFixture) file(name string, data []byte) string {
	path := filepath.Join(f.dir, name)
	if data != nil {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	return path
}

// publish puts the fixture's state on the fake chain.
func (f *verifyFixture) publish() {
	f.rpc.set(f.run.Account, bindings.Account_CoordinatorAccount, *f.s)
}

// verify runs psyche-client verify of the trainer's step 3 with extra flags.
func (f *verifyFixture) verify(extra ...string) (string, string, int) {
	f.t.Helper()
	args := []string{"verify", "--rpc", f.rpc.url, "--run-id", verifyTestRun, "--step", "3", "--client", f.trainer.String(),
		"--model", f.model, "--state", f.state, "--threads", "1", "--device", "cpu"}
	return runCLI(f.t, nil, append(args, extra...)...)
}

// fakeRPC answers getVersion and getAccountInfo from a map of accounts, all
// owned by one program.
type fakeRPC struct {
	url   string
	owner solana.PublicKey
	mu    sync.Mutex
	data  map[solana.PublicKey][]byte
}

func newFakeRPC(t *testing.T, owner solana.PublicKey) *fakeRPC {
	f := &fakeRPC{owner: owner, data: map[solana.PublicKey][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// set stores an account: its discriminator, then the Borsh encoding of v,
// zero-padded to the Coordinator account's size for that account.
func (f *fakeRPC) set(key solana.PublicKey, disc [8]byte, v interface{ Marshal() ([]byte, error) }) {
	body, err := v.Marshal()
	if err != nil {
		panic(err)
	}
	data := append(disc[:], body...)
	if disc == bindings.Account_CoordinatorAccount {
		data = append(data, make([]byte, coordinator.AccountSize-len(data))...)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[key] = data
}

func (f *fakeRPC) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var result any
	switch req.Method {
	case "getVersion":
		result = map[string]any{"solana-core": "2.2.0", "feature-set": 0}
	case "getAccountInfo":
		var key string
		if len(req.Params) > 0 {
			_ = json.Unmarshal(req.Params[0], &key)
		}
		pk, _ := solana.PublicKeyFromBase58(key)
		f.mu.Lock()
		data, ok := f.data[pk]
		f.mu.Unlock()
		value := any(nil)
		if ok {
			value = map[string]any{"data": []string{base64.StdEncoding.EncodeToString(data), "base64"}, "executable": false,
				"lamports": 1_000_000, "owner": f.owner.String(), "rentEpoch": 0, "space": len(data)}
		}
		result = map[string]any{"context": map[string]any{"slot": 1}, "value": value}
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

// psyche-client verify end to end against a fake RPC endpoint: the
// commitment from the stored round or from a dispute, the batch from the
// schedule, the data from the run's location, the model from a model file
// or a shared model file; MATCH exits 0, MISMATCH 1 naming the tensor, bad
// input 2.
func TestVerifyCommand(t *testing.T) {
	f := newVerifyFixture(t)
	ok := func(wantOut []string, extra ...string) string {
		t.Helper()
		out, errOut, code := f.verify(extra...)
		if code != 0 {
			t.Fatalf("verify %v: exit %d\n%s%s", extra, code, out, errOut)
		}
		if testing.Verbose() {
			t.Logf("verify %v:\n%s", extra, out)
		}
		for _, w := range append(wantOut, "MATCH\n") {
			if !strings.Contains(out, w) {
				t.Fatalf("verify %v printed no %q:\n%s", extra, w, out)
			}
		}
		return out
	}
	fails := func(code int, wantOut, wantErr string, extra ...string) {
		t.Helper()
		out, errOut, got := f.verify(extra...)
		if testing.Verbose() {
			t.Logf("verify %v: exit %d\n%s%s", extra, got, out, errOut)
		}
		if got != code || !strings.Contains(out, wantOut) || !strings.Contains(errOut, wantErr) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Fatalf("verify %v: exit %d\nstdout %s\nstderr %q\nwant exit %d, stdout with %q, one line on stderr with %q", extra, got, out, errOut, code, wantOut, wantErr)
		}
	}
	batch := fmt.Sprintf("sequences %d..%d", f.assigned.Start, f.assigned.Start+f.assigned.Len-1)
	ok([]string{"member 1 (" + f.trainer.String() + ")", "round of step 3 (height 2, verdict none)", batch,
		fmt.Sprintf("payload      committed %x, replayed %x (equal)", f.payloadH, f.payloadH)})
	ok(nil, "--payload", f.pay, "--data-dir", f.data)

	// A shared model file (PSYMODL1) holds the same weights.
	shared := binary.LittleEndian.AppendUint32([]byte(sharedModelMagic), 2)
	shared = binary.LittleEndian.AppendUint32(shared, uint32(len(f.modelParams)))
	for _, p := range f.modelParams {
		shared = binary.LittleEndian.AppendUint32(shared, math.Float32bits(p))
	}
	ok(nil, "--model", f.file("model-step2.bin", shared))

	// The trainer published and committed a payload it did not compute.
	tensors := func() []trainer.Tensor {
		tr := newTestTrainer(t, f.cfg, 1)
		ts, err := tr.Tensors()
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}()
	bad := tamper(t, f.cfg, f.hp, f.step.payload, 4, 2)
	f.s.Epoch.Rounds[0].Commits[1].Payload = sha256.Sum256(bad)
	f.publish()
	fails(exitFailure, fmt.Sprintf("MISMATCH\nfirst differing tensor: 4 (%s), entry 2", tensors[4].Name), "verify: MISMATCH at step 3, member 1",
		"--payload", f.file("bad.demo", bad))
	fails(exitFailure, "give --payload FILE", "MISMATCH")
	f.s.Epoch.Rounds[0].Commits[1].Payload = f.payloadH

	// A dispute naming the contribution holds the commitment (and the batch):
	// the round's commitment no longer matters.
	f.s.Epoch.Rounds[0].Commits[1].StateAfter = [32]byte{1}
	f.s.DisputesOpened = 7
	f.s.Disputes[3] = coordinator.Dispute{State: coordinator.DisputeOpen, Kind: coordinator.VerdictMismatch, Id: 7, Step: 3, DeadlineStep: 5,
		TrainerSlot: 1, AccuserSlot: 0, TrainerIndex: 1, EpochStartStep: 1, BatchStart: f.assigned.Start, BatchLen: uint32(f.assigned.Len),
		Payload: f.payloadH, StateBefore: f.beforeH, StateAfter: f.afterH}
	f.publish()
	ok([]string{"dispute 7 (open, MISMATCH, opened by " + f.other.String() + ")"})
	fails(exitBadInput, "", "dispute 7 names member 1", "--index", "0")
	f.s.Disputes[3] = coordinator.Dispute{}
	f.publish()
	fails(exitFailure, "state_after  committed 0100", "MISMATCH")
	f.s.Epoch.Rounds[0].Commits[1].StateAfter = f.afterH

	// Members left since: the chain no longer tells the round's indices.
	f.s.Epoch.RoundsHead = 1
	f.s.Epoch.Rounds[1] = coordinator.Round{Step: 4, Height: 3, ClientsLen: 1, BatchSize: 4, DataIndex: 12}
	f.s.Progress.Step = 4
	f.publish()
	fails(exitBadInput, "", "give --index")
	ok([]string{"index from --index"}, "--index", "1")
	f.s.Clients[1].StateAfter = f.afterH // its newest commitment
	f.publish()
	ok([]string{"index from its slot's state_after"})

	// Bad input once the chain is read.
	fails(exitBadInput, "", "no round or dispute of step 9", "--step", "9", "--model", f.file("m8.bin", append([]byte(sharedModelMagic), 8, 0, 0, 0, 0, 0, 0, 0)))
	fails(exitBadInput, "", "the round of step 3 has 2 members", "--index", "2")
	fails(exitBadInput, "", "not the replay state", "--index", "1", "--state", f.file("fresh.state", trainer.FreshCopy(f.step.before)))
	fails(exitBadInput, "", "--data-dir", "--index", "1", "--data-dir", filepath.Join(f.dir, "nothing"))
	f.s.Epoch.Rounds[0].Commits[1].Flags = 0
	f.publish()
	fails(exitBadInput, "", "member 1 made no commitment at step 3", "--index", "1")
}

// Bad input that needs no cluster: missing flags, malformed values,
// unreadable files, a model file of another step or run.
func TestVerifyBadInput(t *testing.T) {
	t.Setenv("RUN_ID", "")
	os.Unsetenv("RUN_ID")
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	state := write("state", []byte("state"))
	shared := write("shared.bin", append([]byte(sharedModelMagic), 4, 0, 0, 0, 0, 0, 0, 0))
	tr := newTestTrainer(t, tinyTrainerConfig, 1)
	otherRun := filepath.Join(dir, "other-run.safetensors")
	if err := tr.SaveModel(otherRun, map[string]string{"run_id": "other", "step": "4"}); err != nil {
		t.Fatal(err)
	}
	otherStep := filepath.Join(dir, "other-step.safetensors")
	if err := tr.SaveModel(otherStep, map[string]string{"run_id": "r", "step": "3"}); err != nil {
		t.Fatal(err)
	}
	key := solana.NewWallet().PublicKey().String()
	base := []string{"verify", "--run-id", "r", "--client", key, "--state", state, "--rpc", "http://127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no flags", []string{"verify"}, "verify: --run-id, --step, --client, --model, --state are required"},
		{"no model", append(base, "--step", "5"), "verify: --model is required"},
		{"step 0", append(base, "--step", "0", "--model", shared), "--step must be between 1"},
		{"step not a number", append(base, "--step", "x", "--model", shared), "invalid value \"x\" for flag --step"},
		{"bad client", []string{"verify", "--run-id", "r", "--step", "5", "--client", "nope", "--state", state, "--model", shared}, "--client"},
		{"index too large", append(base, "--step", "5", "--model", shared, "--index", "256"), "--index must be below 256"},
		{"bad device", append(base, "--step", "5", "--model", shared, "--device", "tpu"), "--device"},
		{"two devices", append(base, "--step", "5", "--model", shared, "--device", "cuda:0,1"), "verify replays on one device"},
		{"two data sources", append(base, "--step", "5", "--model", shared, "--data-url", "http://127.0.0.1:1/", "--data-dir", dir), "not both"},
		{"unreadable state", []string{"verify", "--run-id", "r", "--step", "5", "--client", key, "--state", filepath.Join(dir, "none"), "--model", shared}, "--state: open"},
		{"unreadable payload", append(base, "--step", "5", "--model", shared, "--payload", filepath.Join(dir, "none")), "--payload: open"},
		{"unreadable model", append(base, "--step", "5", "--model", filepath.Join(dir, "none")), "--model: open"},
		{"not a model", append(base, "--step", "5", "--model", state), "--model: "},
		{"shared model of another step", append(base, "--step", "6", "--model", shared), "holds the model of step 4; step 6 replays from the model of step 5"},
		{"model of another run", append(base, "--step", "5", "--model", otherRun), `is a model of run "other", not "r"`},
		{"model of another step", append(base, "--step", "5", "--model", otherStep), "holds the model of step 3; step 5 replays"},
		{"unreachable rpc", append(base, "--step", "5", "--model", shared), "cannot reach the RPC endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			if code != exitBadInput || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, errOut, exitBadInput, tc.want)
			}
		})
	}
}

// json-dump-run shows the verification: settings, every stored round's
// commitments (current first; signers while the chain tells them), every
// dispute, and each member's slot.
func TestRunJSONVerification(t *testing.T) {
	f := newVerifyFixture(t)
	s := f.s
	s.Clients[1].HasFault, s.Clients[1].LastFaultEpoch, s.Clients[1].Burned = 1, 3, 40
	s.Clients[1].Unvested = [4]uint64{1, 2, 3, 4}
	s.Clients[1].StateAfter = f.afterH
	s.Epoch.Clients[1].State = coordinator.MemberFaulted
	s.DisputesOpened = 2
	s.Disputes[5] = coordinator.Dispute{State: coordinator.DisputeTrainerFault, Kind: coordinator.VerdictNoData, Id: 2, Step: 3, DeadlineStep: 5,
		TrainerSlot: 1, AccuserSlot: 0, CommitteeLen: 1, Committee: [3]uint16{0}, Votes: [3]uint8{coordinator.VerdictMismatch},
		BatchStart: 8, BatchLen: 2, Payload: f.payloadH}
	// An older round (step 2) and the current one (step 3, head 1).
	s.Epoch.Rounds[1] = s.Epoch.Rounds[0]
	s.Epoch.Rounds[0] = coordinator.Round{Step: 2, Height: 1, ClientsLen: 2, BatchSize: 4}
	s.Epoch.RoundsHead = 1
	out, err := json.Marshal(runJSON(f.run, &f.inst, s))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Epoch struct {
			Members []map[string]any `json:"members"`
		} `json:"epoch"`
		Verification struct {
			Percent         int              `json:"percent"`
			ForgivePerEpoch int              `json:"forgive_per_epoch"`
			VestingEpochs   int              `json:"vesting_epochs"`
			DisputesOpened  int              `json:"disputes_opened"`
			Rounds          []map[string]any `json:"rounds"`
			Disputes        []map[string]any `json:"disputes"`
		} `json:"verification"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	v := m.Verification
	if v.Percent != 100 || v.ForgivePerEpoch != 1 || v.VestingEpochs != 2 || v.DisputesOpened != 2 || len(v.Rounds) != 2 || len(v.Disputes) != 1 {
		t.Fatalf("verification: %s", out)
	}
	cur, old := v.Rounds[0], v.Rounds[1]
	if cur["step"] != 3.0 || cur["current"] != true || cur["verify_seed"] != hex.EncodeToString(s.Epoch.Rounds[1].VerifySeed[:]) ||
		old["step"] != 2.0 || old["current"] != false || old["verify_seed"] != nil {
		t.Fatalf("rounds: %v", v.Rounds)
	}
	members := cur["members"].([]any)
	m0, m1 := members[0].(map[string]any), members[1].(map[string]any)
	ver1, _ := schedule.Verifier(schedule.Seed(s.Epoch.Rounds[1].VerifySeed), 1, 2)
	if m1["index"] != 1.0 || m1["signer"] != f.trainer.String() || m1["committed"] != true || m1["fresh"] != false || m1["probation"] != false ||
		m1["must_verify"] != true || m1["verifier"] != float64(ver1) || m1["verdict"] != "none" || m1["payload"] != hex.EncodeToString(f.payloadH[:]) ||
		m1["state_before"] != hex.EncodeToString(f.beforeH[:]) {
		t.Fatalf("member 1: %v", m1)
	}
	if m0["signer"] != f.other.String() || m0["fresh"] != true || m0["verdict"] != "MATCH" {
		t.Fatalf("member 0: %v", m0)
	}
	// Same member count as the current round: the signers are still known.
	if om := old["members"].([]any)[1].(map[string]any); om["signer"] != f.trainer.String() || om["committed"] != false || om["must_verify"] != false || om["verifier"] != nil {
		t.Fatalf("old round's member 1: %v", om)
	}
	d := v.Disputes[0]
	if d["id"] != 2.0 || d["state"] != "trainer_fault" || d["kind"] != "NO_DATA" || d["step"] != 3.0 || d["deadline_step"] != 5.0 ||
		d["trainer"] != f.trainer.String() || d["accuser"] != f.other.String() || d["batch_start"] != 8.0 || d["batch_len"] != 2.0 ||
		d["payload"] != hex.EncodeToString(f.payloadH[:]) {
		t.Fatalf("dispute: %v", d)
	}
	if c := d["committee"].([]any); len(c) != 1 || c[0].(map[string]any)["signer"] != f.other.String() || c[0].(map[string]any)["vote"] != "MISMATCH" {
		t.Fatalf("committee: %v", d["committee"])
	}
	mem := m.Epoch.Members[1]
	if mem["state"] != "faulted" || mem["has_fault"] != true || mem["last_fault_epoch"] != 3.0 || mem["burned"] != 40.0 ||
		fmt.Sprint(mem["unvested"]) != "[1 2 3 4]" || mem["forgiven"] != 0.0 || mem["state_after"] != hex.EncodeToString(f.afterH[:]) {
		t.Fatalf("member: %v", mem)
	}
	if !bytes.Contains(out, []byte(`"open_disputes":0`)) {
		t.Fatalf("no open_disputes: %s", out)
	}

	// A member left since the older round: its signers are no longer told.
	s.Epoch.Rounds[1].ClientsLen = 1
	out, _ = json.Marshal(runJSON(f.run, &f.inst, s))
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if om := m.Verification.Rounds[1]["members"].([]any)[0].(map[string]any); om["signer"] != nil {
		t.Fatalf("a signer given for a renumbered round: %v", om)
	}
}

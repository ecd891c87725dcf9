package competition_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/comptest"
	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/competition/miner"
	"github.com/psyche-go/psyche/clients/competition/rules"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

const (
	seqLen         = 32
	spp            = 4 // sequences a page
	pagesPerRound  = 6
	epsilonPPM     = 10_000 // 1%, SN9's first constant
	temperaturePPM = 500_000
	rewardPerRound = 1_000_000
	stake          = 5_000
)

var tiny = trainer.Config{Name: "tiny", Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2, SeqLen: seqLen, MicroBatch: 4}

type compEnv struct {
	t         *testing.T
	ctx       context.Context
	c         *chain.Client
	v         *localnet.Validator
	k         competition.Competition
	authority solana.PrivateKey
	mint      solana.PublicKey
	data      provider.Provider
	hub       *comptest.Hub
}

func (e *compEnv) send(payer solana.PrivateKey, ixs []solana.Instruction, signers ...solana.PrivateKey) {
	e.t.Helper()
	if _, err := e.c.Send(e.ctx, payer, ixs, signers...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *compEnv) funded() solana.PrivateKey {
	return localnettest.NewFundedKeypair(e.t, e.v, 2*solana.LAMPORTS_PER_SOL)
}

// tokens gives owner an associated token account holding amount.
func (e *compEnv) tokens(owner solana.PublicKey, amount uint64) solana.PublicKey {
	e.t.Helper()
	ix, ata, err := treasurer.CreateTokenAccount(e.authority.PublicKey(), owner, e.mint, treasurer.TokenProgramID)
	if err != nil {
		e.t.Fatal(err)
	}
	e.send(e.authority, []solana.Instruction{ix, treasurer.MintTo(treasurer.TokenProgramID, e.mint, ata, e.authority.PublicKey(), amount)})
	return ata
}

func (e *compEnv) balance(ata solana.PublicKey) uint64 {
	e.t.Helper()
	acc, err := treasurer.FetchTokenAccount(e.ctx, e.c, ata)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc.Amount
}

func (e *compEnv) board() *competition.Board {
	e.t.Helper()
	b, err := e.k.ReadBoard(e.ctx, e.c)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *compEnv) account() *competition.Account {
	e.t.Helper()
	acc, err := e.k.Account(e.ctx, e.c)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc
}

// submit uploads the model file at path to the hub and commits it for miner.
func (e *compEnv) submit(miner solana.PrivateKey, path string, params uint64) {
	e.t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	rev := e.hub.Upload(e.t, path)
	var revision [32]byte
	hex.Decode(revision[:], []byte(rev))
	if revision != sha256.Sum256(raw) {
		e.t.Fatalf("the hub named the file %s", rev)
	}
	ix, err := e.k.Commit(miner.PublicKey(), competition.CommitParams{
		Commitment: evaluate.Commitment(raw, miner.PublicKey()), Revision: revision, Params: params, Repo: e.hub.Repo,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.send(miner, []solana.Instruction{ix})
	if err := e.c.WaitNextSlot(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// waitBoard polls the board until ok holds.
func (e *compEnv) waitBoard(what string, timeout time.Duration, ok func(*competition.Board) bool) *competition.Board {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b := e.board()
		if ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not after %v (round %d, %v)", what, timeout, b.Round.Number, competition.Phase(b.Round.State))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roundLog collects the honest validators' evaluations by round.
type roundLog struct {
	mu  sync.Mutex
	byV map[int]map[uint64]*competition.Evaluation
}

func (l *roundLog) record(v int) func(*competition.Evaluation) {
	return func(ev *competition.Evaluation) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.byV[v][ev.Round] = ev
	}
}

func (l *roundLog) both(round uint64) (a, b *competition.Evaluation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byV[0][round], l.byV[1][round]
}

// Three miners and two validators (quorum 2) on localnet, and a third
// validator that lies. A trains a model and submits it; B copies A's file
// and submits it under its own key a slot later; C starts from A's model,
// trains until its own held-out loss beats A's by more than epsilon, and
// submits. The honest validators agree on every round bit for bit, the
// liar is faulted and its stake burned, A wins every page against its copy,
// C beats A, and every round pays exactly by the weights of its wins.
func TestCompetitionMinersCopiersAndALyingValidator(t *testing.T) {
	n := programtest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond}, deploy.Authorizer, deploy.Competition)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data, _ := comptest.Dataset(t, 12, seqLen)
	e := &compEnv{t: t, ctx: ctx, c: n.Chain, v: n.Validator, data: data, hub: comptest.StartHub(t),
		authority: localnettest.NewFundedKeypair(t, n.Validator, 10*solana.LAMPORTS_PER_SOL)}
	p := competition.Program{ID: n.IDs[deploy.Competition]}
	a := e.authority.PublicKey()

	mint := solana.NewWallet().PrivateKey
	ixs, err := treasurer.CreateMint(ctx, e.c, a, mint.PublicKey(), a, 0, treasurer.TokenProgramID)
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.authority, ixs, mint)
	e.mint = mint.PublicKey()

	info := data.Info()
	var root [32]byte
	if _, err := hex.Decode(root[:], []byte(info.Root)); err != nil {
		t.Fatal(err)
	}
	board := solana.NewWallet().PrivateKey
	ixs, k, err := p.Create(ctx, e.c, a, a, board.PublicKey(), e.mint, treasurer.TokenProgramID, competition.CreateParams{
		Id: "e2e", Architecture: 0, MaxParams: 1 << 20, TokenizerHash: competition.TokenizerHash(info.Tokenizer), SeqLen: seqLen, Precision: 0,
		DataRoot: root, DataLocation: "file:///e2e-data", SequencesPerPage: spp,
		EpsilonStartPpm: epsilonPPM, EpsilonEndPpm: epsilonPPM, PagesPerRound: pagesPerRound, TemperaturePpm: temperaturePPM,
		RoundSlots: 30, RewardPerRound: rewardPerRound, ValidatorStake: stake, Quorum: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.authority, ixs, board)
	e.k = k
	pool := e.balance(k.Pool)
	e.send(e.authority, []solana.Instruction{treasurer.MintTo(treasurer.TokenProgramID, e.mint, k.Pool, a, 1_000_000_000)})
	if got := e.balance(k.Pool); got != pool+1_000_000_000 {
		t.Fatalf("pool %d after funding", got)
	}

	// Validators join, staking.
	keys := []solana.PrivateKey{e.funded(), e.funded(), e.funded()} // the third lies
	for _, v := range keys {
		e.tokens(v.PublicKey(), stake)
		ix, err := k.JoinValidator(v.PublicKey(), a, e.account())
		if err != nil {
			t.Fatal(err)
		}
		e.send(v, []solana.Instruction{ix})
	}

	// A trains; B copies A's file.
	minerA, minerB, minerC := e.funded(), e.funded(), e.funded()
	dir := t.TempDir()
	trA, err := trainer.New(tiny, 11)
	if err != nil {
		t.Fatal(err)
	}
	defer trA.Close()
	if err := miner.Train(ctx, trA, data, miner.Options{Batch: 8, LR: 3e-3, Warmup: 5}, 0, 40, nil); err != nil {
		t.Fatal(err)
	}
	pathA := filepath.Join(dir, "a.safetensors")
	if err := trA.SaveModel(pathA, nil); err != nil {
		t.Fatal(err)
	}
	params := uint64(trA.NumParams())
	e.submit(minerA, pathA, params)
	e.submit(minerB, pathA, params) // the same bytes, a later slot, another key

	// The validators run; the liar votes a made-up table in the first round.
	log := &roundLog{byV: map[int]map[uint64]*competition.Evaluation{0: {}, 1: {}}}
	cons, err := competition.Constraints(e.account(), info.VocabSize, info.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	vctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		val := &competition.Validator{Chain: e.c, Competition: k, Key: keys[i], Data: data, Dir: filepath.Join(dir, "models", string(rune('0'+i))),
			Constraints: cons, Options: evaluate.Options{Table: evaluate.TableOptions{Threads: 1}}, Poll: 100 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(os.Stderr, nil)).With("validator", i), OnVote: log.record(i)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := val.Run(vctx); !errors.Is(err, context.Canceled) {
				t.Errorf("validator %d: %v", i, err)
			}
		}()
	}
	first := e.waitBoard("round 1 evaluating", time.Minute, func(b *competition.Board) bool {
		return b.Round.Number >= 1 && competition.Phase(b.Round.State) >= competition.PhaseEvaluating
	})
	// The liar votes on whatever round is being evaluated or just final
	// (a race with the honest validators and the next tick it may lose).
	for try := 0; ; try++ {
		b := e.board()
		if ph := competition.Phase(b.Round.State); ph == competition.PhaseEvaluating || ph == competition.PhaseFinal {
			ixs, err := k.Vote(keys[2].PublicKey(), b.Round.Number, [32]byte{0xba, 0xd}, make([]uint16, b.Round.Entries), [32]byte{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.c.Send(ctx, keys[2], ixs); err == nil {
				break
			} else if try > 20 {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitBoard("round 1 final", time.Minute, func(b *competition.Board) bool {
		return b.Round.Number > first.Round.Number || competition.Phase(b.Round.State) == competition.PhaseFinal
	})

	// C starts from A's model and trains until it beats A by more than
	// epsilon on its own pages.
	trC, err := trainer.LoadCheckpoint(pathA)
	if err != nil {
		t.Fatal(err)
	}
	defer trC.Close()
	own, err := evaluate.Pages(sha256.Sum256([]byte("miner C")), info.NumSequences, spp, 8)
	if err != nil {
		t.Fatal(err)
	}
	pathC := filepath.Join(dir, "c.safetensors")
	score := func(path string) float32 {
		losses, _, err := evaluate.LossTable(ctx, []evaluate.Model{{Path: path, Submission: evaluate.Submission{Params: params}}}, data, own, spp, cons, evaluate.TableOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		return miner.MeanLoss(losses)
	}
	lossA := score(pathA)
	for s := 0; ; s += 20 {
		if err := miner.Train(ctx, trC, data, miner.Options{Batch: 8, LR: 3e-3, Offset: 777}, s, 20, nil); err != nil {
			t.Fatal(err)
		}
		if err := trC.SaveModel(pathC, nil); err != nil {
			t.Fatal(err)
		}
		// Past the miner's rule (more than epsilon) by a margin that makes C's
		// win on the validators' pages certain, not likely.
		if lossC := score(pathC); miner.Improved(lossC, lossA, epsilonPPM) && miner.Improved(lossC, lossA, 8*epsilonPPM) {
			t.Logf("C: %.4f against A's %.4f after %d steps", lossC, lossA, s+20)
			break
		}
		if s > 200 {
			t.Fatal("C never beat A by epsilon")
		}
	}
	e.submit(minerC, pathC, params)
	withC := e.waitBoard("a final round with C", 2*time.Minute, func(b *competition.Board) bool {
		return competition.Phase(b.Round.State) == competition.PhaseFinal && rules.Bit(b.Round.Eligible, 2)
	})

	// Stop opening rounds, let any round being evaluated finish, stop.
	paused := true
	ix, err := k.Update(a, competition.UpdateParams{Paused: &paused})
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.authority, []solana.Instruction{ix})
	last := e.waitBoard("the last round settled", time.Minute, func(b *competition.Board) bool {
		ph := competition.Phase(b.Round.State)
		if ph == competition.PhaseEvaluating {
			return false
		}
		final := b.Round.Number
		if ph != competition.PhaseFinal {
			final--
		}
		x, y := log.both(final)
		return x != nil && y != nil
	})
	stop()
	wg.Wait()
	lastFinal := last.Round.Number
	if competition.Phase(last.Round.State) != competition.PhaseFinal {
		lastFinal--
	}

	// Bit for bit: both honest validators voted the same bytes in every
	// round, and the board's final digest is theirs.
	acc := e.account()
	earned := make([]uint64, 3)
	var sawCopy, sawC bool
	for r := uint64(1); r <= lastFinal; r++ {
		x, y := log.both(r)
		if x == nil || y == nil {
			t.Fatalf("round %d is final but the honest validators' votes are %v, %v", r, x != nil, y != nil)
		}
		if x.Digest() != y.Digest() || x.TableHash != y.TableHash {
			t.Fatalf("round %d: the honest validators disagree: %x / %x", r, x.Digest(), y.Digest())
		}
		if r == withC.Round.Number && withC.Round.FinalDigest != x.Digest() {
			t.Fatalf("round %d: the board's final digest %x is not the validators' %x", r, withC.Round.FinalDigest, x.Digest())
		}
		ev := x.Eval
		pages := len(ev.Pages)
		row := func(entry uint16) []float32 {
			for j, idx := range x.Entries {
				if idx == entry {
					return ev.Losses[j*pages : (j+1)*pages]
				}
			}
			t.Fatalf("round %d: entry %d not eligible", r, entry)
			return nil
		}
		// A and its copy: the same losses, and A, older, wins every page.
		la, lb := row(0), row(1)
		for i := range la {
			if math.Float32bits(la[i]) != math.Float32bits(lb[i]) {
				t.Fatalf("round %d page %d: the copy's loss %v differs from the original's %v", r, i, lb[i], la[i])
			}
		}
		if len(x.Entries) == 2 {
			sawCopy = true
			if x.Wins[0] != uint16(pages) || x.Wins[1] != 0 {
				t.Fatalf("round %d: wins A %d, copy %d; want %d and 0", r, x.Wins[0], x.Wins[1], pages)
			}
		} else {
			sawC = true
			lc := row(2)
			var cBeatsA int
			for i := range lc {
				if rules.IsWin(lc[i], la[i], 2, 1, 3, rules.Epsilon{StartPPM: epsilonPPM, EndPPM: epsilonPPM}) {
					cBeatsA++
				}
			}
			if cBeatsA == 0 || x.Wins[2] <= x.Wins[0] || x.Wins[0] <= x.Wins[1] {
				t.Fatalf("round %d: C beats A on %d pages; wins A %d, copy %d, C %d", r, cBeatsA, x.Wins[0], x.Wins[1], x.Wins[2])
			}
		}
		// Paid exactly by the weights of the wins.
		var valid [32]byte
		for _, idx := range x.Entries {
			if !rules.Bit(x.Invalid, int(idx)) {
				rules.SetBit(&valid, int(idx))
			}
		}
		w, err := rules.Weights(x.Wins, valid, temperaturePPM)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range rules.Payouts(rewardPerRound, w) {
			earned[i] += p
		}
	}
	if !sawCopy || !sawC {
		t.Fatalf("rounds seen: with the copy only %v, with C %v", sawCopy, sawC)
	}
	for i := range 3 {
		if got := last.Submissions[i].Earned; got != earned[i] {
			t.Fatalf("entry %d earned %d on chain, %d by the rule", i, got, earned[i])
		}
	}
	if !(earned[2] > earned[1] && earned[0] > earned[1]) {
		t.Fatalf("earned: A %d, copy %d, C %d", earned[0], earned[1], earned[2])
	}

	// The liar was faulted; its stake is burned.
	if s := last.Validators[2].Status; s != competition.ValidatorFaulted {
		t.Fatalf("the lying validator's status is %d", s)
	}
	if acc.Forfeited != stake {
		t.Fatalf("forfeited %d, want the stake %d", acc.Forfeited, stake)
	}
	before, err := treasurer.FetchMint(ctx, e.c, e.mint)
	if err != nil {
		t.Fatal(err)
	}
	ix, err = k.BurnStakes()
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.authority, []solana.Instruction{ix})
	after, err := treasurer.FetchMint(ctx, e.c, e.mint)
	if err != nil {
		t.Fatal(err)
	}
	if before.Supply-after.Supply != stake {
		t.Fatalf("supply %d -> %d: burned %d, want %d", before.Supply, after.Supply, before.Supply-after.Supply, stake)
	}

	// Each miner claims exactly what it earned.
	for i, m := range []solana.PrivateKey{minerA, minerB, minerC} {
		ixs, err := k.Claim(m.PublicKey(), m.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		e.send(m, ixs)
		ata, _ := treasurer.AssociatedTokenAddress(m.PublicKey(), e.mint, treasurer.TokenProgramID)
		if got := e.balance(ata); got != earned[i] {
			t.Fatalf("miner %d received %d, earned %d", i, got, earned[i])
		}
	}
	t.Logf("%d final rounds; earned A %d, copy %d, C %d", lastFinal, earned[0], earned[1], earned[2])
}

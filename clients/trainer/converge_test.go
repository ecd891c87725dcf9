package trainer

import (
	"bytes"
	"context"
	"math"
	"sync"
	"testing"

	"github.com/psyche-go/psyche/clients/data/corpus"
)

// sotuText returns the default corpus's training split (addresses up to
// 2000) and held-out split (later addresses), documents separated by a blank
// line. It skips the test when the corpus is not installed.
func sotuText(t *testing.T) (train, held []byte) {
	t.Helper()
	dir, err := corpus.SOTUDir()
	if err != nil {
		t.Skipf("corpus missing (run scripts/setup.sh): %v", err)
	}
	read := func(name string) []byte {
		split, err := corpus.NewSplit(name, corpus.DefaultLastTrainYear)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := corpus.Walk(context.Background(), dir, split, func(d corpus.Document) error {
			buf.WriteString(d.Text)
			buf.WriteString("\n\n")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	return read("train"), read("validation")
}

// sotuBatch returns sequences first..first+n-1 of step s (perStep sequences
// per step), each at an offset spread over the whole text by a fixed
// multiplicative hash, so both optimizers see the same tokens in the same
// steps (as cmd/trainer-converge does).
func sotuBatch(text []byte, s, first, n, perStep, seqLen int) (tok, tgt []int32) {
	for i := first; i < first+n; i++ {
		h := (uint64(s*perStep+i) + 1) * 0x9e3779b97f4a7c15
		h ^= h >> 31
		a, b := Window(text, int(h%uint64(len(text)-seqLen-1)), 1, seqLen)
		tok, tgt = append(tok, a...), append(tgt, b...)
	}
	return tok, tgt
}

// Four DeMo clients, each training its own quarter of the global batch and
// all applying all four payloads in client order, against single-node AdamW
// on the same tokens of real text: the light and llama-light configs (the
// same hyperparameters for both), 200 steps of 4 x 64 tokens
// drawn from the State of the Union addresses up to 2000, held-out loss on 32
// windows of the addresses after 2000 (not trained on). Both use
// config/tiny.toml's schedule (lr warmup over 10 steps, cosine decay to 10%
// at the last step) and gradient clipping at 1; DeMo uses its optimizer
// settings (chunk 64, top-32, one-bit values, decay 0.999, no weight decay,
// no lookahead, as the client runs it). DeMo must end within 5% of AdamW's
// held-out loss, and the four replicas must stay bit-identical.
//
// Peak learning rates tried (cmd/trainer-converge; results are bit-exact, so
// every run gives these values), held-out loss after 200 steps:
//
//	AdamW (betas 0.9/0.95): 5e-4 2.712, 1e-3 2.671 (used), 1.5e-3 2.674,
//	  2e-3 2.708; constant lr, no clipping: 3e-4 2.727, 1e-3 3.171 (stuck on
//	  the unigram plateau), 1e-2 3.013.
//	DeMo: 1e-3 2.772, 1.5e-3 2.745 (used, +2.7%); with the lookahead on:
//	  5e-4 3.04 and 2e-3 2.89 at step 100 (1e-3: 2.83; stopped there),
//	  1e-3 2.769, and with decay 0.99 2.750; at 1.5e-3, decay 0.99 2.740.
//	  At 1.5e-3: weight decay 0.1 2.755 (AdamW with 0.1: 2.671); top-8
//	  (3,742-byte payloads, 900x smaller than fp32 gradients) 2.819 (+5.5%).
//	  100 steps of 8 x 64 tokens instead: AdamW 2.744, DeMo (1e-3) 2.945
//	  (+7.3%): DeMo needs the steps.
//	llama-light (contract v2): AdamW 1e-3 2.5147; DeMo 1.5e-3 2.6375 (used,
//	  +4.9%), 1e-3 2.6826 (+6.7%), 2.5e-3 2.6583 (+5.7%); decay 0.99 at
//	  1.5e-3 2.6380. Llama's AdamW gains more over GPT-2's (2.51 against
//	  2.67) than its DeMo does (2.64 against 2.74).
func TestDeMoReachesAdamWLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("convergence runs (about 30 s)")
	}
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		t.Run(cfg.Name, func(t *testing.T) { checkDeMoReachesAdamW(t, cfg) })
	}
}

func checkDeMoReachesAdamW(t *testing.T, cfg Config) {
	train, held := sotuText(t)
	const (
		clients   = 4
		perClient = 1 // sequences per client per step
		seqLen    = 64
		steps     = 200
		warmup    = 10
		evalSeqs  = 32
		adamPeak  = 1e-3 // peak learning rates, see above
		demoPeak  = 1.5e-3
	)
	perStep := clients * perClient
	lr := func(peak float32, s int) float32 { // s from 0
		f := 1.0
		if s < warmup {
			f = float64(s+1) / warmup
		}
		return peak * float32(f*(0.1+0.9*0.5*(1+math.Cos(math.Pi*float64(s)/(steps-1)))))
	}
	var evalTok, evalTgt []int32
	stride := (len(held) - seqLen - 1) / evalSeqs
	for i := range evalSeqs {
		a, b := Window(held, i*stride, 1, seqLen)
		evalTok, evalTgt = append(evalTok, a...), append(evalTgt, b...)
	}
	ctx := context.Background()
	evalLoss := func(tr *Trainer) float32 {
		l, err := tr.Eval(ctx, evalTok, evalTgt, seqLen)
		if err != nil {
			t.Error(err)
		}
		return l
	}

	// AdamW runs alongside the DeMo clients; every trainer is single-threaded
	// so the runs share the cores (results do not depend on threads).
	var adamLoss float32
	var wg sync.WaitGroup
	defer wg.Wait() // a failing DeMo run must not end the test under AdamW's feet
	wg.Add(1)
	go func() {
		defer wg.Done()
		adam, err := New(cfg, 31)
		if err != nil {
			t.Error(err)
			return
		}
		defer adam.Close()
		adam.SetThreads(1)
		hp := AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, ClipNorm: 1}
		for s := range steps {
			tok, tgt := sotuBatch(train, s, 0, perStep, perStep, seqLen)
			if _, err := adam.Step(ctx, tok, tgt, seqLen); err != nil {
				t.Error(err)
				return
			}
			hp.LR = lr(adamPeak, s)
			if err := adam.AdamWStep(hp); err != nil {
				t.Error(err)
				return
			}
		}
		adamLoss = evalLoss(adam)
	}()

	replicas := make([]*Trainer, clients)
	for c := range replicas {
		replicas[c] = newTrainer(t, cfg, 31)
		if err := replicas[c].SetThreads(1); err != nil {
			t.Fatal(err)
		}
	}
	// parallel runs f for every client at once and reports the first error.
	parallel := func(f func(c int, tr *Trainer) error) error {
		errs := make([]error, clients)
		var cw sync.WaitGroup
		for c, tr := range replicas {
			cw.Add(1)
			go func() {
				defer cw.Done()
				errs[c] = f(c, tr)
			}()
		}
		cw.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	hpD := DeMo{Decay: 0.999, ClipNorm: 1, Chunk: 64, TopK: 32, OneBit: true}
	payloads := make([][]byte, clients)
	var bytesSent int
	for s := range steps {
		hpD.LR = lr(demoPeak, s)
		err := parallel(func(c int, tr *Trainer) error {
			tok, tgt := sotuBatch(train, s, c*perClient, perClient, perStep, seqLen)
			if _, err := tr.Step(ctx, tok, tgt, seqLen); err != nil {
				return err
			}
			p, err := tr.DeMoGenerate(hpD)
			payloads[c] = p
			return err
		})
		if err == nil {
			err = parallel(func(_ int, tr *Trainer) error { return tr.DeMoApply(hpD, payloads) })
		}
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		for _, p := range payloads {
			bytesSent += len(p)
		}
		if s%50 == 49 || s == steps-1 {
			want, _ := replicas[0].Params()
			for c, tr := range replicas[1:] {
				got, _ := tr.Params()
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("step %d: replica %d differs from replica 0 at parameter %d", s, c+1, i)
					}
				}
			}
		}
	}
	demoLoss := evalLoss(replicas[0])
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("held-out loss after %d steps of %d tokens: AdamW %.4f, DeMo (%d clients, %d payload bytes per client-step) %.4f (%+.1f%%)",
		steps, perStep*seqLen, adamLoss, clients, bytesSent/(steps*clients), demoLoss, 100*(demoLoss/adamLoss-1))
	if demoLoss > adamLoss*1.05 {
		t.Errorf("DeMo loss %.4f is more than 5%% above AdamW's %.4f", demoLoss, adamLoss)
	}
}

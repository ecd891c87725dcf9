// Command trainer-converge compares DeMo (several simulated clients, each
// training its own share of the global batch, all applying all payloads)
// with single-node AdamW on the same tokens of real text (the State of the
// Union corpus: addresses up to 2000 for training, later ones held out) and
// prints the held-out loss along the way. It is how the settings of the
// trainer's convergence test were chosen.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/trainer"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "trainer-converge: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	steps, clients, perClient, seqLen, every, evalSeqs, warmup, threads int
	cosine, trace                                                       bool
	minFrac                                                             float64
	demo                                                                trainer.DeMo
	adam                                                                trainer.AdamW
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("trainer-converge", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.steps, "steps", 200, "optimizer steps")
	fs.IntVar(&o.clients, "clients", 4, "simulated DeMo clients")
	fs.IntVar(&o.perClient, "per-client", 1, "sequences per client per step (AdamW gets clients times as many)")
	fs.IntVar(&o.seqLen, "seq", 64, "tokens per sequence")
	fs.IntVar(&o.every, "every", 50, "evaluate every this many steps")
	fs.IntVar(&o.evalSeqs, "eval-seqs", 32, "held-out sequences per evaluation")
	fs.IntVar(&o.warmup, "warmup", 10, "linear learning-rate warmup steps")
	fs.BoolVar(&o.cosine, "cosine", true, "cosine learning-rate decay to -min-frac of the peak at the last step")
	fs.Float64Var(&o.minFrac, "min-frac", 0.1, "final learning rate as a fraction of the peak with -cosine")
	fs.IntVar(&o.threads, "threads", 0, "threads per trainer (0: all processors)")
	fs.BoolVar(&o.trace, "trace", false, "print every step's training loss (mean over clients)")
	adamLRs := fs.String("adam-lr", "1e-3", "comma-separated AdamW learning rates (empty: skip AdamW)")
	demoLRs := fs.String("demo-lr", "1e-3", "comma-separated DeMo learning rates (empty: skip DeMo)")
	adamWD := fs.Float64("adam-wd", 0, "AdamW weight decay")
	fs.IntVar(&o.demo.Chunk, "chunk", 64, "DeMo DCT chunk")
	fs.IntVar(&o.demo.TopK, "topk", 32, "DeMo top-k per chunk")
	decay := fs.Float64("decay", 0.999, "DeMo momentum (compression) decay")
	demoWD := fs.Float64("demo-wd", 0, "DeMo weight decay")
	clip := fs.Float64("clip", 1, "gradient clipping norm for both (0: none)")
	fs.BoolVar(&o.demo.OneBit, "one-bit", true, "DeMo one-bit values")
	fs.BoolVar(&o.demo.Lookahead, "lookahead", false, "DeMo lookahead (the client does not use it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.steps < 1 || o.clients < 1 || o.perClient < 1 || o.seqLen < 2 || o.every < 1 || o.evalSeqs < 1 || o.warmup < 0 {
		return fmt.Errorf("-steps, -clients, -per-client, -every and -eval-seqs must be positive, -seq at least 2")
	}
	o.demo.Decay, o.demo.WeightDecay, o.demo.ClipNorm = float32(*decay), float32(*demoWD), float32(*clip)
	o.adam = trainer.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: float32(*adamWD), ClipNorm: float32(*clip)}
	adamList, err := splitFloats("adam-lr", *adamLRs)
	if err != nil {
		return err
	}
	demoList, err := splitFloats("demo-lr", *demoLRs)
	if err != nil {
		return err
	}
	train, held, err := sotuText(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "text: %d training bytes (addresses up to %d), %d held-out bytes (later); %d steps of %d tokens\n",
		len(train), corpus.DefaultLastTrainYear, len(held), o.steps, o.clients*o.perClient*o.seqLen)
	for _, lr := range adamList {
		if err := converge(ctx, w, o, train, held, "adamw", lr); err != nil {
			return err
		}
	}
	for _, lr := range demoList {
		if err := converge(ctx, w, o, train, held, "demo", lr); err != nil {
			return err
		}
	}
	return nil
}

// splitFloats parses a comma-separated list of learning rates ("" is none).
func splitFloats(flag, s string) ([]float32, error) {
	var out []float32
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil || !(v > 0 && v < 1) {
			return nil, fmt.Errorf("-%s: %q is not a learning rate in (0, 1)", flag, f)
		}
		out = append(out, float32(v))
	}
	return out, nil
}

// sotuText returns the training split (addresses up to 2000) and the
// held-out split (later addresses) of the default corpus as bytes,
// documents separated by a blank line.
func sotuText(ctx context.Context) (train, held []byte, err error) {
	dir, err := corpus.SOTUDir()
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{"train", "validation"} {
		split, err := corpus.NewSplit(name, corpus.DefaultLastTrainYear)
		if err != nil {
			return nil, nil, err
		}
		var buf bytes.Buffer
		if err := corpus.Walk(ctx, dir, split, func(d corpus.Document) error {
			buf.WriteString(d.Text)
			buf.WriteString("\n\n")
			return nil
		}); err != nil {
			return nil, nil, err
		}
		if name == "train" {
			train = buf.Bytes()
		} else {
			held = buf.Bytes()
		}
	}
	return train, held, nil
}

// offset returns the start of sequence i of step s: spread over the whole
// training text by a fixed multiplicative hash, the same for both optimizers.
func offset(s, i, perStep, seqLen, textLen int) int {
	n := uint64(s*perStep + i)
	h := (n + 1) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	return int(h % uint64(textLen-seqLen-1))
}

func batch(text []byte, s, first, n, perStep, seqLen int) (tok, tgt []int32) {
	tok = make([]int32, 0, n*seqLen)
	tgt = make([]int32, 0, n*seqLen)
	for i := first; i < first+n; i++ {
		a, b := trainer.Window(text, offset(s, i, perStep, seqLen, len(text)), 1, seqLen)
		tok, tgt = append(tok, a...), append(tgt, b...)
	}
	return tok, tgt
}

func (o options) lr(base float32, s int) float32 {
	f := 1.0
	if o.warmup > 0 && s < o.warmup {
		f = float64(s+1) / float64(o.warmup)
	}
	if o.cosine && o.steps > 1 {
		f *= o.minFrac + (1-o.minFrac)*0.5*(1+math.Cos(math.Pi*float64(s)/float64(o.steps-1)))
	}
	return base * float32(f)
}

func converge(ctx context.Context, w io.Writer, o options, train, held []byte, opt string, base float32) error {
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		return err
	}
	n := 1
	if opt == "demo" {
		n = o.clients
	}
	reps := make([]*trainer.Trainer, n)
	for i := range reps {
		if reps[i], err = trainer.New(cfg, 31); err != nil {
			return err
		}
		defer reps[i].Close()
		if o.threads > 0 {
			if err := reps[i].SetThreads(o.threads); err != nil {
				return err
			}
		}
	}
	perStep := o.clients * o.perClient
	stride := (len(held) - o.seqLen - 1) / o.evalSeqs
	evalTok, evalTgt := []int32{}, []int32{}
	for i := range o.evalSeqs {
		a, b := trainer.Window(held, i*stride, 1, o.seqLen)
		evalTok, evalTgt = append(evalTok, a...), append(evalTgt, b...)
	}
	fmt.Fprintf(w, "%-5s lr %-8g", opt, base)
	start := time.Now()
	var fwdbwd, gen, apply time.Duration
	var trainLoss float32
	for s := range o.steps {
		lr := o.lr(base, s)
		if opt == "adamw" {
			tok, tgt := batch(train, s, 0, perStep, perStep, o.seqLen)
			if trainLoss, err = reps[0].Step(ctx, tok, tgt, o.seqLen); err != nil {
				return err
			}
			hp := o.adam
			hp.LR = lr
			if err := reps[0].AdamWStep(hp); err != nil {
				return err
			}
		} else {
			hp := o.demo
			hp.LR = lr
			payloads := make([][]byte, n)
			trainLoss = 0
			for c, tr := range reps {
				tok, tgt := batch(train, s, c*o.perClient, o.perClient, perStep, o.seqLen)
				t0 := time.Now()
				l, err := tr.Step(ctx, tok, tgt, o.seqLen)
				if err != nil {
					return err
				}
				t1 := time.Now()
				trainLoss += l / float32(n)
				if payloads[c], err = tr.DeMoGenerate(hp); err != nil {
					return err
				}
				fwdbwd, gen = fwdbwd+t1.Sub(t0), gen+time.Since(t1)
			}
			t2 := time.Now()
			for _, tr := range reps {
				if err := tr.DeMoApply(hp, payloads); err != nil {
					return err
				}
			}
			apply += time.Since(t2)
		}
		if o.trace {
			fmt.Fprintf(w, " [%d lr %.2g train %.3f]", s+1, lr, trainLoss)
		}
		if (s+1)%o.every == 0 || s+1 == o.steps {
			l, err := reps[0].Eval(ctx, evalTok, evalTgt, o.seqLen)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, " %d:%.3f", s+1, l)
		}
	}
	fmt.Fprintf(w, " (last train loss %.3f, %.0f s", trainLoss, time.Since(start).Seconds())
	if opt == "demo" {
		fmt.Fprintf(w, ": forward+backward %.0f s, generate %.0f s, apply %.0f s", fwdbwd.Seconds(), gen.Seconds(), apply.Seconds())
	}
	fmt.Fprintln(w, ")")
	return nil
}

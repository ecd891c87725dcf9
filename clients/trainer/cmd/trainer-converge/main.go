// Command trainer-converge compares the trainer's ways of training one model
// on several clients, on the same tokens of real text (the State of the Union
// corpus: addresses up to 2000 for training, later ones held out):
//
//   - ddp: AdamW with the gradients averaged every step, which is one AdamW
//     trainer on the global batch (clients x per-client sequences a step);
//   - demo: DeMo, each client training its own share of every global batch,
//     all applying all payloads every step;
//   - locoH: SparseLoCo, each client running H inner AdamW steps on its share
//     of global steps r*H .. r*H+H-1, then all applying all payloads;
//   - demo+delay, locoH+delay: the same with the overlap the client runs:
//     round r's payload is computed from weights that do not yet hold round
//     r-1's aggregate, which is applied right after round r's generate (and
//     the last pending round at the end).
//
// For every model config (-configs), client count, method and numeric
// contract (-arith: fp32, the trainer's contract v2, and mx8, contract v3
// with block-scaled int8 matrix products) it prints the held-out loss, the
// bytes a client sends per token it trains, how many times fewer that is than
// fp32 DDP (4 bytes per parameter per client per step) and the wall time, as
// one table; with both contracts, the mx8 loss of every run against the same
// run in fp32. With -plot it draws held-out loss against bytes per token, and
// with -plot-steps held-out loss (and the mx8 gap) against training steps.
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
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "trainer-converge: %v\n", err)
		os.Exit(1)
	}
}

// Method kinds.
const (
	kindDDP = iota
	kindDeMo
	kindLoCo
)

// method is one way of training: ddp, demo or locoH, with or without delay.
type method struct {
	kind  int
	h     int // SparseLoCo inner steps per round
	delay bool
}

func (m method) String() string {
	s := "ddp"
	switch m.kind {
	case kindDeMo:
		s = "demo"
	case kindLoCo:
		s = "loco" + strconv.Itoa(m.h)
	}
	if m.delay {
		s += "+delay"
	}
	return s
}

func parseMethods(s string) ([]method, error) {
	var out []method
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var m method
		name, delayed := strings.CutSuffix(f, "+delay")
		m.delay = delayed
		switch {
		case name == "ddp" || name == "adamw":
			if delayed {
				return nil, fmt.Errorf("-methods: %q: ddp has no delayed variant", f)
			}
		case name == "demo":
			m.kind = kindDeMo
		case strings.HasPrefix(name, "loco"):
			h, err := strconv.Atoi(name[4:])
			if err != nil || h < 1 {
				return nil, fmt.Errorf("-methods: %q: want locoH with H inner steps, H >= 1", f)
			}
			m.kind, m.h = kindLoCo, h
		default:
			return nil, fmt.Errorf("-methods: unknown method %q (ddp, demo, locoH, each but ddp with an optional +delay)", f)
		}
		out = append(out, m)
	}
	return out, nil
}

type options struct {
	steps, perClient, seqLen, every, evalSeqs, warmup, threads int
	seed                                                       uint64
	models, ariths                                             []string
	clients                                                    []int
	methods                                                    []method
	cosine, trace                                              bool
	compensate                                                 bool // +delay: start each step from the own pending update
	minFrac                                                    float64
	demo                                                       trainer.DeMo
	loco                                                       trainer.SparseLoCo
	adam                                                       trainer.AdamW
	ddpLRs, demoLRs, locoLRs, outerLRs                         []float32
	demoTopKs                                                  []int
}

func run(ctx context.Context, args []string, w, progress io.Writer) error {
	_, err := measure(ctx, args, w, progress)
	return err
}

// measure parses args, trains every run, prints the table (and plots) to w
// and returns the rows.
func measure(ctx context.Context, args []string, w, progress io.Writer) ([]result, error) {
	fs := flag.NewFlagSet("trainer-converge", flag.ContinueOnError)
	fs.SetOutput(progress)
	var o options
	fs.IntVar(&o.steps, "steps", 900, "global steps (each: clients x per-client sequences); a multiple of every locoH's H")
	models := fs.String("configs", "light", "comma-separated model configs (light, llama-light, small, ...)")
	ariths := fs.String("arith", trainer.ArithFP32, "comma-separated numeric contracts: fp32 (v2), mx8 (v3, block-scaled int8 matrix products); each run once per contract")
	clients := fs.String("clients", "4,8", "comma-separated client counts")
	methods := fs.String("methods", "ddp,demo,demo+delay,loco10,loco10+delay,loco30,loco30+delay,loco100,loco100+delay",
		"comma-separated methods: ddp (alias adamw), demo, locoH (H inner steps a round), demo+delay, locoH+delay (one round stale)")
	fs.IntVar(&o.perClient, "per-client", 1, "sequences per client per step (ddp trains clients times as many on one node)")
	fs.IntVar(&o.seqLen, "seq", 64, "tokens per sequence")
	fs.IntVar(&o.every, "every", 100, "report the held-out loss every this many steps (at the first sync at or after)")
	fs.IntVar(&o.evalSeqs, "eval-seqs", 32, "held-out sequences per evaluation")
	fs.IntVar(&o.warmup, "warmup", 10, "linear learning-rate warmup steps")
	fs.BoolVar(&o.cosine, "cosine", true, "cosine learning-rate decay to -min-frac of the peak at the last step")
	fs.Float64Var(&o.minFrac, "min-frac", 0.1, "final learning rate as a fraction of the peak with -cosine")
	fs.Uint64Var(&o.seed, "seed", 31, "initialization seed of every run (the batches do not depend on it)")
	fs.IntVar(&o.threads, "threads", 0, "threads in all (0: all processors); clients run concurrently on them, one trainer a thread")
	fs.BoolVar(&o.trace, "trace", false, "print every step's training loss (mean over clients) to the progress output")
	data := fs.String("data", "sotu", "training text: sotu (the State of the Union corpus) or markov (synthetic, for tests)")
	plotPath := fs.String("plot", "", "write a PNG plot of held-out loss against bytes per client per token to this file")
	stepsPlot := fs.String("plot-steps", "", "write a PNG plot of held-out loss against global steps (every -every steps), "+
		"with the mx8 runs' gap to fp32 when both contracts run, to this file")
	adamLRs := fs.String("adam-lr", "1e-3,2e-3", "comma-separated ddp (AdamW) peak learning rates (empty: skip ddp); the best is the baseline")
	adamWD := fs.Float64("adam-wd", 0, "AdamW weight decay (ddp and SparseLoCo's inner steps)")
	clip := fs.Float64("clip", 1, "gradient clipping norm for every optimizer (0: none)")
	demoLRs := fs.String("demo-lr", "1e-3", "comma-separated DeMo peak learning rates (empty: skip DeMo); "+
		"the default is config/tiny.toml's; overlapped steps cost less there than at 1.5e-3, which trains better without overlap")
	fs.IntVar(&o.demo.Chunk, "chunk", 64, "DeMo DCT chunk")
	demoTopKs := fs.String("topk", "32,7", "comma-separated DeMo top-k per chunk")
	decay := fs.Float64("decay", 0.999, "DeMo momentum (compression) decay")
	demoWD := fs.Float64("demo-wd", 0, "DeMo weight decay")
	fs.BoolVar(&o.demo.OneBit, "one-bit", true, "DeMo one-bit values")
	fs.BoolVar(&o.demo.Lookahead, "lookahead", false, "DeMo lookahead (the client does not use it)")
	fs.BoolVar(&o.compensate, "compensate", true, "the +delay rows compensate staleness as an overlapping client does: "+
		"demo+delay steps at x - lr*sign(U), U the update its own pending payload asks for, locoH+delay trains from x less "+
		"its own share of the pending outer step (false: from the stale weights)")
	locoLRs := fs.String("loco-lr", "3e-3", "comma-separated SparseLoCo inner AdamW peak learning rates (empty: skip SparseLoCo)")
	outerLRs := fs.String("loco-outer-lr", "8", "comma-separated SparseLoCo outer rates summed over members: "+
		"a round of n payloads steps min(1, this/n) times their scatter-mean (each entry over the payloads that hold it)")
	locoDecay := fs.Float64("loco-decay", 0.9, "SparseLoCo error feedback decay")
	fs.IntVar(&o.loco.Chunk, "loco-chunk", 64, "SparseLoCo chunk edge")
	fs.IntVar(&o.loco.TopK, "loco-topk", 6, "SparseLoCo top-k per chunk")
	fs.IntVar(&o.loco.ValueBits, "loco-bits", 2, "SparseLoCo value bits (1, 2, 4, 8 or 32)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.models, err = parseModels(*models); err != nil {
		return nil, err
	}
	if o.ariths, err = parseAriths(*ariths); err != nil {
		return nil, err
	}
	if o.steps < 1 || o.perClient < 1 || o.seqLen < 2 || o.every < 1 || o.evalSeqs < 1 || o.warmup < 0 || o.threads < 0 {
		return nil, fmt.Errorf("-steps, -per-client, -every and -eval-seqs must be positive, -seq at least 2, -warmup and -threads not negative")
	}
	if o.clients, err = splitInts("clients", *clients); err != nil {
		return nil, err
	}
	if o.methods, err = parseMethods(*methods); err != nil {
		return nil, err
	}
	if o.demoTopKs, err = splitInts("topk", *demoTopKs); err != nil {
		return nil, err
	}
	for _, m := range o.methods {
		if m.kind == kindLoCo && o.steps%m.h != 0 {
			return nil, fmt.Errorf("-steps %d is not a multiple of %s's %d inner steps", o.steps, m, m.h)
		}
		if m.kind == kindDeMo && m.delay && o.demo.Lookahead && o.compensate {
			return nil, fmt.Errorf("-lookahead and demo+delay's pending-update lookahead exclude each other (add -compensate=false)")
		}
	}
	o.demo.Decay, o.demo.WeightDecay, o.demo.ClipNorm = float32(*decay), float32(*demoWD), float32(*clip)
	o.adam = trainer.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: float32(*adamWD), ClipNorm: float32(*clip)}
	o.loco.Decay = float32(*locoDecay)
	if o.ddpLRs, err = splitFloats("adam-lr", *adamLRs, 1); err != nil {
		return nil, err
	}
	if o.demoLRs, err = splitFloats("demo-lr", *demoLRs, 1); err != nil {
		return nil, err
	}
	if o.locoLRs, err = splitFloats("loco-lr", *locoLRs, 1); err != nil {
		return nil, err
	}
	if o.outerLRs, err = splitFloats("loco-outer-lr", *outerLRs, 1e6); err != nil {
		return nil, err
	}
	if len(o.outerLRs) == 0 {
		return nil, fmt.Errorf("-loco-outer-lr: no learning rate")
	}
	train, held, err := loadText(ctx, *data)
	if err != nil {
		return nil, err
	}
	// Settings are checked (and payload sizes taken) before any training.
	sz := map[string]sizes{}
	var described []string
	for _, model := range o.models {
		if sz[model], err = o.sizes(model); err != nil {
			return nil, err
		}
		described = append(described, fmt.Sprintf("%s model (%d parameters)", model, sz[model].params))
	}

	fmt.Fprintf(w, "text: %s, %d training bytes, %d held-out bytes; %s; %d global steps of clients x %d x %d tokens\n",
		*data, len(train), len(held), strings.Join(described, ", "), o.steps, o.perClient, o.seqLen)
	fmt.Fprintf(w, "ddp: AdamW (betas 0.9/0.95, wd %g, clip %g); demo: chunk %d, one-bit %v, decay %g; "+
		"loco: chunk %d, top-%d, %d-bit values, EF decay %g, outer step on the scatter-mean, inner steps AdamW as ddp; "+
		"+delay compensated %v; lr warmup %d steps, cosine %v to %g\n",
		*adamWD, *clip, o.demo.Chunk, o.demo.OneBit, o.demo.Decay,
		o.loco.Chunk, o.loco.TopK, o.loco.ValueBits, o.loco.Decay, o.compensate, o.warmup, o.cosine, o.minFrac)
	ev := evalSet(held, o.evalSeqs, o.seqLen)
	var results []result
	for _, model := range o.models {
		for _, n := range o.clients {
			for _, m := range o.methods {
				for _, c := range o.configs(model, m, n) {
					r, err := o.train(ctx, progress, train, ev, c)
					if err != nil {
						return nil, fmt.Errorf("%s %s, %s, %d clients: %w", model, m, c.arith, n, err)
					}
					r.bytesPerToken = sz[model].perToken(o, c)
					r.ratio = sz[model].perToken(o, config{}) / r.bytesPerToken
					results = append(results, r)
				}
			}
		}
	}
	writeTable(w, results)
	if *plotPath != "" {
		// fp32 ddp's bytes per token marks the ratio lines: with several
		// models, the first model's.
		if err := writePlot(*plotPath, results, sz[o.models[0]].perToken(o, config{})); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "plot: %s\n", *plotPath)
	}
	if *stepsPlot != "" {
		if err := writeStepsPlot(*stepsPlot, results); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "plot: %s\n", *stepsPlot)
	}
	return results, nil
}

// sizes checks the DeMo and SparseLoCo settings against model and returns
// its parameter count and payload sizes.
func (o options) sizes(model string) (sizes, error) {
	cfg, err := trainer.ConfigByName(model)
	if err != nil {
		return sizes{}, err
	}
	probe, err := trainer.New(cfg, 31)
	if err != nil {
		return sizes{}, err
	}
	defer probe.Close()
	sz := sizes{params: probe.NumParams(), demo: map[int]int{}}
	for _, k := range o.demoTopKs {
		hp := o.demo
		hp.TopK = k
		if sz.demo[k], err = probe.PayloadSize(hp); err != nil {
			return sizes{}, fmt.Errorf("DeMo settings (%s): %w", model, err)
		}
	}
	hp := o.loco
	hp.OuterLR = o.outerLRs[0]
	if sz.loco, err = probe.LoCoPayloadSize(hp); err != nil {
		return sizes{}, fmt.Errorf("SparseLoCo settings (%s): %w", model, err)
	}
	return sz, nil
}

// parseModels parses -configs: named model configs, each at most once.
func parseModels(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, err := trainer.ConfigByName(f); err != nil {
			return nil, fmt.Errorf("-configs: %w", err)
		}
		if seen[f] {
			return nil, fmt.Errorf("-configs: %q given twice", f)
		}
		seen[f] = true
		out = append(out, f)
	}
	return out, nil
}

// parseAriths parses -arith: numeric contracts, each at most once.
func parseAriths(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f != trainer.ArithFP32 && f != trainer.ArithMX8 {
			return nil, fmt.Errorf("-arith: unknown numeric contract %q (want fp32, mx8 or both, separated by commas)", f)
		}
		if seen[f] {
			return nil, fmt.Errorf("-arith: %q given twice", f)
		}
		seen[f] = true
		out = append(out, f)
	}
	return out, nil
}

// sizes holds what the byte columns derive from.
type sizes struct {
	params, loco int
	demo         map[int]int // payload bytes by top-k
}

// perToken returns the bytes a client sends per token it trains with c.
func (s sizes) perToken(o options, c config) float64 {
	tokens := float64(o.perClient * o.seqLen) // per client per step
	switch c.m.kind {
	case kindDeMo:
		return float64(s.demo[c.topk]) / tokens
	case kindLoCo:
		return float64(s.loco) / (float64(c.m.h) * tokens)
	}
	return 4 * float64(s.params) / tokens
}

// config is one training run.
type config struct {
	model     string // model config name
	arith     string // numeric contract: fp32 or mx8
	m         method
	clients   int
	topk      int     // top-k per chunk (DeMo, SparseLoCo)
	lr, outer float32 // peak (inner) learning rate; SparseLoCo's outer lr
}

// configs returns m's runs of model with n clients, each once per numeric
// contract (adjacent, so a run's contracts finish together).
func (o options) configs(model string, m method, n int) []config {
	var base []config
	switch m.kind {
	case kindDDP:
		for _, lr := range o.ddpLRs {
			base = append(base, config{m: m, clients: n, lr: lr})
		}
	case kindDeMo:
		for _, k := range o.demoTopKs {
			for _, lr := range o.demoLRs {
				base = append(base, config{m: m, clients: n, topk: k, lr: lr})
			}
		}
	case kindLoCo:
		for _, lr := range o.locoLRs {
			for _, outer := range o.outerLRs {
				base = append(base, config{m: m, clients: n, topk: o.loco.TopK, lr: lr, outer: outer})
			}
		}
	}
	var out []config
	for _, c := range base {
		for _, a := range o.ariths {
			c.model, c.arith = model, a
			out = append(out, c)
		}
	}
	return out
}

// result is one row of the table.
type result struct {
	config
	loss, trainLoss float64
	untrained       float64 // held-out loss of the model before training
	bytesPerToken   float64
	ratio           float64 // fp32 DDP bytes over these
	wall            time.Duration
	curve           []point // held-out loss every -every steps, and at the end
}

// point is a held-out loss after a number of global steps.
type point struct {
	step int
	loss float64
}

func splitInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// splitFloats parses a comma-separated list of learning rates in (0, max)
// ("" is none).
func splitFloats(flag, s string, max float64) ([]float32, error) {
	var out []float32
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil || !(v > 0 && v < max) {
			return nil, fmt.Errorf("-%s: %q is not a learning rate in (0, %g)", flag, f, max)
		}
		out = append(out, float32(v))
	}
	return out, nil
}

// loadText returns the training and held-out text.
func loadText(ctx context.Context, data string) (train, held []byte, err error) {
	switch data {
	case "sotu":
		return sotuText(ctx)
	case "markov":
		return trainer.MarkovText(1, 1<<20), trainer.MarkovText(2, 1<<16), nil
	}
	return nil, nil, fmt.Errorf("-data %q: want sotu or markov", data)
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
// training text by a fixed multiplicative hash, the same for every method.
func offset(s, i, perStep, seqLen, textLen int) int {
	n := uint64(s*perStep + i)
	h := (n + 1) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	return int(h % uint64(textLen-seqLen-1))
}

// batch returns sequences first..first+n-1 of global step s.
func batch(text []byte, s, first, n, perStep, seqLen int) (tok, tgt []int32) {
	tok = make([]int32, 0, n*seqLen)
	tgt = make([]int32, 0, n*seqLen)
	for i := first; i < first+n; i++ {
		a, b := trainer.Window(text, offset(s, i, perStep, seqLen, len(text)), 1, seqLen)
		tok, tgt = append(tok, a...), append(tgt, b...)
	}
	return tok, tgt
}

// lr is the learning rate of global step s: linear warmup, then cosine.
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

type evalData struct {
	tok, tgt []int32
	seqLen   int
}

// evalSet returns n windows spread evenly over the held-out text.
func evalSet(held []byte, n, seqLen int) evalData {
	stride := (len(held) - seqLen - 1) / n
	var e evalData
	e.seqLen = seqLen
	for i := range n {
		a, b := trainer.Window(held, i*stride, 1, seqLen)
		e.tok, e.tgt = append(e.tok, a...), append(e.tgt, b...)
	}
	return e
}

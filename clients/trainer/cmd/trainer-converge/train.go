package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/psyche-go/psyche/clients/trainer"
)

// runner holds one training run: its replicas (one per client, or the one
// ddp trainer) and where it reports progress.
type runner struct {
	o        options
	ctx      context.Context
	c        config
	reps     []*trainer.Trainer
	workers  int // clients trained at once
	text     []byte
	ev       evalData
	w        io.Writer
	lastSync int     // global steps the replicas had synced at the last report
	curve    []point // the held-out losses reported
}

// train runs c and returns its row without the byte columns.
func (o options) train(ctx context.Context, progress io.Writer, text []byte, ev evalData, c config) (result, error) {
	cfg, err := trainer.ConfigByName(c.model)
	if err != nil {
		return result{}, err
	}
	cfg.Arith = c.arith
	total := o.threads
	if total == 0 {
		total = runtime.NumCPU()
	}
	n := c.clients
	if c.m.kind == kindDDP {
		n = 1
	}
	r := &runner{o: o, ctx: ctx, c: c, reps: make([]*trainer.Trainer, n), workers: min(total, n), text: text, ev: ev, w: progress}
	// Results do not depend on the thread count, so clients trained side by
	// side on one thread each give the same numbers as one after the other.
	threads := max(1, total/r.workers)
	for i := range r.reps {
		if r.reps[i], err = trainer.New(cfg, o.seed); err != nil {
			return result{}, err
		}
		defer r.reps[i].Close()
		if err := r.reps[i].SetThreads(threads); err != nil {
			return result{}, err
		}
	}
	fmt.Fprintf(progress, "%-13s %s %s, %d clients, lr %g", c.m, c.model, c.arith, c.clients, c.lr)
	if c.m.kind == kindDeMo {
		fmt.Fprintf(progress, ", top-%d", c.topk)
	}
	if c.m.kind == kindLoCo {
		fmt.Fprintf(progress, ", outer lr %g", c.outer)
	}
	fmt.Fprint(progress, ":")
	untrained, err := r.eval()
	if err != nil {
		fmt.Fprintln(progress)
		return result{}, err
	}
	start := time.Now()
	var train float64
	switch c.m.kind {
	case kindDDP:
		train, err = r.ddp()
	case kindDeMo:
		train, err = r.demo()
	default:
		train, err = r.loco()
	}
	if err != nil {
		fmt.Fprintln(progress)
		return result{}, err
	}
	wall := time.Since(start)
	loss, err := r.eval()
	if err != nil {
		return result{}, err
	}
	if err := r.sameReplicas(); err != nil {
		return result{}, err
	}
	fmt.Fprintf(progress, " final %.4f (last train loss %.3f, %.0f s)\n", loss, train, wall.Seconds())
	curve := append(r.curve, point{o.steps, loss})
	return result{config: c, loss: loss, untrained: untrained, trainLoss: train, wall: wall, curve: curve}, nil
}

func (r *runner) eval() (float64, error) {
	l, err := r.reps[0].Eval(r.ctx, r.ev.tok, r.ev.tgt, r.ev.seqLen)
	return float64(l), err
}

// synced reports the held-out loss when the replicas, now through global
// step done, passed a multiple of -every since the last report (the final
// loss is reported separately).
func (r *runner) synced(done int) error {
	defer func() { r.lastSync = done }()
	if done >= r.o.steps || done/r.o.every == r.lastSync/r.o.every {
		return nil
	}
	l, err := r.eval()
	if err != nil {
		return err
	}
	fmt.Fprintf(r.w, " %d:%.3f", done, l)
	r.curve = append(r.curve, point{done, l})
	return nil
}

func (r *runner) trace(s int, lr float32, losses []float32) {
	if !r.o.trace {
		return
	}
	var sum float64
	for _, l := range losses {
		sum += float64(l)
	}
	fmt.Fprintf(r.w, " [%d lr %.2g train %.3f]", s+1, lr, sum/float64(len(losses)))
}

// each runs f for every client, at most r.workers at once.
func (r *runner) each(f func(c int, tr *trainer.Trainer) error) error {
	errs := make([]error, len(r.reps))
	if r.workers <= 1 {
		for c, tr := range r.reps {
			errs[c] = f(c, tr)
		}
		return errors.Join(errs...)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				errs[c] = f(c, r.reps[c])
			}
		}()
	}
	for c := range r.reps {
		next <- c
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// clientBatch returns client c's share of global step s.
func (r *runner) clientBatch(s, c int) (tok, tgt []int32) {
	perStep := r.c.clients * r.o.perClient
	return batch(r.text, s, c*r.o.perClient, r.o.perClient, perStep, r.o.seqLen)
}

// ddp trains one AdamW trainer on the global batch of every step, which is
// what averaging the clients' gradients every step computes.
func (r *runner) ddp() (float64, error) {
	o, tr := r.o, r.reps[0]
	var last float32
	for s := range o.steps {
		perStep := r.c.clients * o.perClient
		tok, tgt := batch(r.text, s, 0, perStep, perStep, o.seqLen)
		l, err := tr.Step(r.ctx, tok, tgt, o.seqLen)
		if err != nil {
			return 0, err
		}
		hp := o.adam
		hp.LR = o.lr(r.c.lr, s)
		if err := tr.AdamWStep(hp); err != nil {
			return 0, err
		}
		last = l
		r.trace(s, hp.LR, []float32{l})
		if err := r.synced(s + 1); err != nil {
			return 0, err
		}
	}
	return float64(last), nil
}

// demo runs DeMo: every client trains its share of the step and generates a
// payload; every client applies all payloads, in client order, in the same
// step or (delay) right after generating the next step's payload, and then
// (-compensate) takes the next step at its own pending update's
// lookahead.
func (r *runner) demo() (float64, error) {
	o := r.o
	losses := make([]float32, len(r.reps))
	var pending [][]byte
	var pendingHP trainer.DeMo
	for s := range o.steps {
		hp := o.demo
		hp.TopK, hp.LR = r.c.topk, o.lr(r.c.lr, s)
		hp.Overlap = r.c.m.delay && o.compensate
		payloads := make([][]byte, len(r.reps))
		prev, prevHP := pending, pendingHP
		if err := r.each(func(c int, tr *trainer.Trainer) error {
			tok, tgt := r.clientBatch(s, c)
			var err error
			if losses[c], err = tr.Step(r.ctx, tok, tgt, o.seqLen); err != nil {
				return err
			}
			if payloads[c], err = tr.DeMoGenerate(hp); err != nil {
				return err
			}
			if prev != nil {
				return tr.DeMoApply(prevHP, prev)
			}
			return nil
		}); err != nil {
			return 0, err
		}
		if r.c.m.delay {
			pending, pendingHP = payloads, hp
		} else if err := r.each(func(_ int, tr *trainer.Trainer) error { return tr.DeMoApply(hp, payloads) }); err != nil {
			return 0, err
		}
		r.trace(s, hp.LR, losses)
		if err := r.synced(s + 1); err != nil {
			return 0, err
		}
	}
	if pending != nil {
		if err := r.each(func(_ int, tr *trainer.Trainer) error { return tr.DeMoApply(pendingHP, pending) }); err != nil {
			return 0, err
		}
	}
	return mean(losses), nil
}

// loco runs SparseLoCo: in round k every client runs H inner AdamW steps on
// its shares of global steps k*H .. k*H+H-1 (the ddp schedule's learning
// rates), then generates its payload; every client applies all payloads, in
// client order, at the end of the round or (delay) right after generating
// the next round's payload, and then (-compensate) trains the next round
// from its weights less its own share of the pending step.
func (r *runner) loco() (float64, error) {
	o, H := r.o, r.c.m.h
	hp := o.loco
	hp.OuterLR = r.c.outer
	hp.Overlap, hp.Members = r.c.m.delay && o.compensate, len(r.reps)
	losses := make([][]float32, len(r.reps))
	for c := range losses {
		losses[c] = make([]float32, H)
	}
	var pending [][]byte
	for k := range o.steps / H {
		payloads := make([][]byte, len(r.reps))
		prev := pending
		if err := r.each(func(c int, tr *trainer.Trainer) error {
			if err := tr.LoCoBegin(); err != nil {
				return err
			}
			for h := range H {
				s := k*H + h
				tok, tgt := r.clientBatch(s, c)
				var err error
				if losses[c][h], err = tr.Step(r.ctx, tok, tgt, o.seqLen); err != nil {
					return err
				}
				inner := o.adam
				inner.LR = o.lr(r.c.lr, s)
				if err := tr.AdamWStep(inner); err != nil {
					return err
				}
			}
			var err error
			if payloads[c], err = tr.LoCoGenerate(hp); err != nil {
				return err
			}
			if prev != nil {
				return tr.LoCoApply(hp, prev)
			}
			return nil
		}); err != nil {
			return 0, err
		}
		if r.c.m.delay {
			pending = payloads
		} else if err := r.each(func(_ int, tr *trainer.Trainer) error { return tr.LoCoApply(hp, payloads) }); err != nil {
			return 0, err
		}
		if o.trace {
			step := make([]float32, len(r.reps))
			for h := range H {
				for c := range step {
					step[c] = losses[c][h]
				}
				r.trace(k*H+h, o.lr(r.c.lr, k*H+h), step)
			}
		}
		if err := r.synced((k + 1) * H); err != nil {
			return 0, err
		}
	}
	if pending != nil {
		if err := r.each(func(_ int, tr *trainer.Trainer) error { return tr.LoCoApply(hp, pending) }); err != nil {
			return 0, err
		}
	}
	last := make([]float32, len(r.reps))
	for c := range last {
		last[c] = losses[c][H-1]
	}
	return mean(last), nil
}

func mean(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s / float64(len(x))
}

// sameReplicas checks that every client ended with the same weights, bit
// for bit, as applying the same payloads in the same order must give.
func (r *runner) sameReplicas() error {
	p0, err := r.reps[0].Params()
	if err != nil {
		return err
	}
	for c, tr := range r.reps[1:] {
		p, err := tr.Params()
		if err != nil {
			return err
		}
		for i := range p {
			if math.Float32bits(p[i]) != math.Float32bits(p0[i]) {
				return fmt.Errorf("client %d's weights differ from client 0's at parameter %d", c+1, i)
			}
		}
	}
	return nil
}

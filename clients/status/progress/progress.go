// Package progress formats training progress as plain text: one line per
// step for --logs console and scripts/demo.sh, and a closing summary.
package progress

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/psyche-go/psyche/clients/status"
)

// Line formats one step, e.g.
//
//	step 42  loss 3.2140  held-out 3.3010@40  tok/s 1234.5  sent 12.3 KiB/step  dense fp32 1.2 MiB  ratio 98.1x
//
// heldOut may be nil; a zero denseBytes or BytesOut leaves the ratio out.
func Line(st status.StepStat, heldOut *status.LossPoint, denseBytes uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d  loss %s", st.Step, Loss(st.Loss))
	if heldOut != nil {
		fmt.Fprintf(&b, "  held-out %s@%d", Loss(heldOut.Loss), heldOut.Step)
	}
	if tps := st.TokensPerSecond(); tps > 0 {
		fmt.Fprintf(&b, "  tok/s %.1f", tps)
	}
	fmt.Fprintf(&b, "  sent %s/step", Bytes(st.BytesOut))
	if denseBytes > 0 {
		fmt.Fprintf(&b, "  dense fp32 %s", Bytes(denseBytes))
		if r := status.CompressionRatio(denseBytes, st.BytesOut); r > 0 {
			fmt.Fprintf(&b, "  ratio %.1fx", r)
		}
	}
	return b.String()
}

// Loss formats a loss with 4 decimals (NaN and Inf as such).
func Loss(l status.Float) string { return strconv.FormatFloat(float64(l), 'f', 4, 64) }

// Bytes formats a byte count with binary units.
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}

// Printer writes a Line for each step of successive snapshots that it has
// not written yet; a client in console mode feeds it from a Recorder
// subscription. Steps that fell out of the snapshot's ring between two
// calls are skipped.
type Printer struct {
	w       io.Writer
	prefix  string
	note    func(step uint64) string
	last    uint64
	printed bool
}

// NewPrinter writes to w, starting each line with prefix (e.g. a client name).
func NewPrinter(w io.Writer, prefix string) *Printer {
	return &Printer{w: w, prefix: prefix}
}

// WithNote appends note(step) to each line (status-watch: the verdict the
// chain holds on the client's contribution to the step).
func (p *Printer) WithNote(note func(step uint64) string) *Printer {
	p.note = note
	return p
}

// Print writes the steps of s newer than the last one printed.
func (p *Printer) Print(s status.Snapshot) error {
	for _, st := range s.Steps {
		if p.printed && st.Step <= p.last {
			continue
		}
		var held *status.LossPoint
		for i := len(s.HeldOut) - 1; i >= 0; i-- {
			if s.HeldOut[i].Step <= st.Step {
				held = &s.HeldOut[i]
				break
			}
		}
		line := Line(st, held, s.DenseBytes)
		if p.note != nil {
			line += p.note(st.Step)
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, line); err != nil {
			return fmt.Errorf("writing progress: %w", err)
		}
		p.last, p.printed = st.Step, true
	}
	return nil
}

// Summary describes a whole run from a final snapshot: steps, the first and
// last train and held-out losses, mean throughput and bytes per step.
func Summary(s status.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s after %d steps (epoch %d)\n", s.RunID, orUnknown(s.RunState), s.StepsTotal, s.Epoch)
	if n := len(s.Train); n > 0 {
		fmt.Fprintf(&b, "train loss     %s (step %d) -> %s (step %d)\n", Loss(s.Train[0].Loss), s.Train[0].Step, Loss(s.Train[n-1].Loss), s.Train[n-1].Step)
	}
	if n := len(s.HeldOut); n > 0 {
		fmt.Fprintf(&b, "held-out loss  %s (step %d) -> %s (step %d)\n", Loss(s.HeldOut[0].Loss), s.HeldOut[0].Step, Loss(s.HeldOut[n-1].Loss), s.HeldOut[n-1].Step)
	}
	for _, last := range s.LatestBenchmarks() {
		first := last
		for _, x := range s.Benchmarks {
			if x.Task == last.Task {
				first = x
				break
			}
		}
		fmt.Fprintf(&b, "benchmark      %s acc %.3f (step %d) -> %.3f (step %d), acc_norm %.3f, %d items\n",
			last.Task, first.Acc, first.Step, last.Acc, last.Step, last.AccNorm, last.Items)
	}
	if n := len(s.Prompts); n > 0 {
		first, last := s.Prompts[0], s.Prompts[n-1]
		fmt.Fprintf(&b, "prompt         (step %d) %q\n", first.Step, first.Prompt+first.Text)
		if n > 1 {
			fmt.Fprintf(&b, "prompt         (step %d) %q\n", last.Step, last.Prompt+last.Text)
		}
	}
	var secs float64
	for _, st := range s.Steps {
		secs += st.Duration.Seconds()
	}
	if secs > 0 {
		var tokens uint64
		for _, st := range s.Steps {
			tokens += st.Tokens
		}
		fmt.Fprintf(&b, "throughput     %.1f tok/s over the last %d steps\n", float64(tokens)/secs, len(s.Steps))
	}
	if s.StepsTotal > 0 {
		sent := s.BytesOutTotal / s.StepsTotal
		fmt.Fprintf(&b, "sent per step  %s (received %s)", Bytes(sent), Bytes(s.BytesInTotal/s.StepsTotal))
		if r := status.CompressionRatio(s.DenseBytes, sent); r > 0 {
			fmt.Fprintf(&b, ", dense fp32 %s, ratio %.1fx", Bytes(s.DenseBytes), r)
		}
		b.WriteByte('\n')
	}
	if s.TokensTotal > 0 {
		fmt.Fprintf(&b, "sent per token %.4g B\n", float64(s.BytesOutTotal)/float64(s.TokensTotal))
	}
	if v := s.Verification; v != nil {
		b.WriteString(VerificationSummary(*v))
	}
	var rounds []time.Duration
	for _, st := range s.Steps {
		if st.RoundTime > 0 {
			rounds = append(rounds, st.RoundTime)
		}
	}
	if n := len(rounds); n > 0 {
		slices.Sort(rounds)
		fmt.Fprintf(&b, "round time     median %.2f s (min %.2f, max %.2f) over %d rounds\n",
			rounds[n/2].Seconds(), rounds[0].Seconds(), rounds[n-1].Seconds(), n)
	}
	return b.String()
}

// VerificationSummary describes a client's part in the run's verification:
// its commitments by the verdict on them (unjudged: to be verified, and no
// verdict came), the replays it ran as a verifier, the disputes involving
// it by outcome, and its slot's fault and burned points.
func VerificationSummary(v status.Verification) string {
	c, r, d := v.Commitments, v.Replays, v.Disputes
	fault := "no fault"
	if v.HasFault {
		fault = "FAULTED"
	}
	var unvested uint64
	for _, u := range v.Unvested {
		unvested += u
	}
	return fmt.Sprintf("commitments    %d made; of those to verify: %d MATCH, %d MISMATCH, %d NO_DATA, %d unjudged\n", c.Committed, c.Match, c.Mismatch, c.NoData, c.Unjudged) +
		fmt.Sprintf("replayed       %d as verifier: %d MATCH, %d MISMATCH, %d NO_DATA; %d verdicts posted\n", r.Run, r.Match, r.Mismatch, r.NoData, r.Posted) +
		fmt.Sprintf("disputes       %d open, %d TRAINER_FAULT, %d ACCUSER_FAULT, %d TRANSIENT, %d UNRESOLVED (as trainer, accuser or committee)\n",
			d.Open, d.TrainerFault, d.AccuserFault, d.Transient, d.Unresolved) +
		fmt.Sprintf("standing       %s, %d points burned, %d unvested\n", fault, v.Burned, unvested)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown state"
	}
	return s
}

// Follow prints a line for each step rec records, as it is recorded, until
// ctx ends; steps recorded before the call are printed first.
func Follow(ctx context.Context, rec *status.Recorder, w io.Writer, prefix string) error {
	updates, cancel := rec.Subscribe()
	defer cancel()
	p := NewPrinter(w, prefix)
	for {
		if err := p.Print(rec.Snapshot()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return p.Print(rec.Snapshot())
		case <-updates:
		}
	}
}

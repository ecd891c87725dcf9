package client

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"
)

// Simulated runs of the multi-step mode (SparseLoCo) and of overlapped
// rounds, on the harness of sim_test.go.

// withOverlap is a run config with overlapped rounds.
func withOverlap(config string) string {
	return strings.Replace(config, "[config]\n", "[config]\noverlap = true\n", 1)
}

// withSparseLoCo is a run config in the multi-step mode: 3 inner steps per
// round (each member's 4/n sequences a step), 2-bit values.
func withSparseLoCo(config string) string {
	i := strings.Index(config, "[model.lr]")
	if i < 0 {
		panic("no [model.lr] in the config")
	}
	return config[:i] + `[model.lr]
schedule = "cosine"
learning_rate = 0.003
final_learning_rate = 0.0003
warmup_steps = 6
decay_steps = 54

[model.optimizer]
kind = "sparseloco"
inner_steps = 3
outer_learning_rate = 8.0
weight_decay = 0.0
clip_grad_norm = 1.0
compression_decay = 0.95
compression_topk = 8
compression_chunk = 32
value_bits = 2
`
}

// emptyApply is the applied-payloads part of a simRun record of a round
// that applied nothing.
var emptyApply = func() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }()

// updatesApplied is the number of steps whose round applied payloads, as
// sc recorded them.
func (r *simRun) updatesApplied(sc *simClient) int {
	n := 0
	for _, by := range r.applied {
		if got, ok := by[sc.name]; ok && !strings.HasPrefix(got, emptyApply) {
			n++
		}
	}
	return n
}

// Three clients train to Finished in the multi-step mode and with
// overlapped rounds (DeMo and SparseLoCo): every replica identical at every
// step, every step applied by everyone, nobody accused, nothing refused.
// With overlap, each round is applied one round late and a round that ends
// its epoch carries no update; every other round applies payloads.
func TestSimMultiStepAndOverlap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		overlap bool
	}{
		{"sparseloco", withSparseLoCo(simConfig), false},
		{"demo+overlap", withOverlap(simConfig), true},
		{"sparseloco+overlap", withOverlap(withSparseLoCo(simConfig)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSimRunWith(t, 21, tc.config)
			scs := []*simClient{r.add("a", true), r.add("b", true), r.add("c", true)}
			r.finish()
			s := r.sim.State()
			for _, sc := range scs {
				r.allApplied(sc, 1)
			}
			if r.refused[opTick] > 0 || r.refused[opWitness] > 0 || r.refused[opWarmup] > 0 {
				t.Errorf("refused instructions: %v", r.refused)
			}
			// Epochs: each (but a last one cut short by total_steps) ends
			// with a round nobody attests when rounds overlap.
			epochs := int(s.Progress.Epoch)
			want := int(s.Config.TotalSteps)
			if tc.overlap {
				want -= epochs
			}
			got := r.updatesApplied(scs[0])
			t.Logf("%d of %d steps applied updates over %d epochs", got, s.Config.TotalSteps, epochs)
			if got < want {
				t.Errorf("%d steps applied updates, want at least %d", got, want)
			}
		})
	}
}

// With overlapped rounds, a member whose payloads reach nobody is left out
// and dropped by health check (a round later than without overlap); a
// client that starts midway loads the model, joins, and agrees.
func TestSimOverlapMissingAndLate(t *testing.T) {
	r := newSimRunWith(t, 22, withOverlap(withSparseLoCo(simConfig)))
	// Four clients: an epoch takes at most as many as a step's batch has
	// sequences (4).
	r.add("a", true)
	r.add("b", true)
	mute := r.add("mute", false)
	mute.silent = true
	if !r.runUntil(simLimit, func() bool { return r.sim.State().Progress.Step >= 6 }) {
		r.stuck("the run did not reach step 6")
	}
	late := r.add("late", true)
	r.finish()
	if r.accused[mute.wallet.PublicKey()] == 0 {
		t.Error("the member whose payloads never arrived was never health-checked")
	}
	if n := r.appliedBy(late); n < 4 {
		t.Errorf("the late client applied %d steps, want the last epoch's at least", n)
	}
	if late.c.e.warmedEpoch <= 0 {
		t.Error("the late client never became a member that trains")
	}
}

// Overlapped rounds hide the exchange behind the next round's training.
// Each payload is announced 2 s of chain time after its round starts (its
// training) and takes 2 s more to download (its exchange). Without overlap
// a round lasts at least both; with overlap, about the longer of the two,
// as round r trains while round r-1's payloads download. Round times are
// the members' own (StepStat.RoundTime), in simulated chain time.
func TestSimOverlapRoundTime(t *testing.T) {
	const compute, exchange = 2 * time.Second, 2 * time.Second
	slow := strings.Replace(simConfig, "max_round_train_time = 5", "max_round_train_time = 10", 1)
	slow = strings.Replace(slow, "epoch_time = 6", "epoch_time = 30", 1)
	median := map[bool]time.Duration{}
	for _, overlap := range []bool{false, true} {
		config := slow
		if overlap {
			config = withOverlap(config)
		}
		r := newSimRunWith(t, 23, config)
		r.net.compute, r.exchange = compute, exchange
		scs := []*simClient{r.add("a", true), r.add("b", true), r.add("c", true)}
		r.finish()
		var times []time.Duration
		for _, st := range scs[0].c.cfg.Recorder.Snapshot().Steps {
			if st.RoundTime > 0 {
				times = append(times, st.RoundTime)
			}
		}
		if len(times) < 10 {
			t.Fatalf("overlap %v: %d round times recorded, want 10 or more", overlap, len(times))
		}
		slices.Sort(times)
		median[overlap] = times[len(times)/2]
		t.Logf("overlap %v: round time median %v (min %v, max %v) over %d rounds", overlap, median[overlap], times[0], times[len(times)-1], len(times))
	}
	if median[false] < compute+exchange {
		t.Errorf("without overlap the median round took %v, less than training plus exchange (%v)", median[false], compute+exchange)
	}
	// Both pay the same fixed overhead (the witness window, ticks); overlap
	// saves the shorter of training and exchange, to within a tick.
	if saved := median[false] - median[true]; saved < min(compute, exchange)-simTick {
		t.Errorf("overlap saved %v of the median round, want about the shorter of training and exchange (%v)", saved, min(compute, exchange))
	}
}

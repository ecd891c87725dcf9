package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// trainingResult is what one training run measured.
type trainingResult struct {
	Label           string
	Config          string
	Net             string
	Shape           Shape
	Clients         int
	Steps           int     // steps trained (by any client)
	RoundMedian     float64 // seconds, median over steps of the median over clients
	RoundMean       float64
	RoundP95        float64
	TrainMean       float64 // seconds of compute per step (mean over clients and steps)
	PayloadOut      float64 // update bytes sent per client per step (the client's own count)
	PayloadIn       float64
	DenseBytes      uint64
	WireUp          float64 // IP bytes per client per step to peers, through its link
	WireDn          float64
	ChainUp         float64 // IP bytes per client per step to the validator and data server
	Wall            float64 // seconds from the first model ready to the last Finished
	Compared        int     // steps whose digests were compared across >= 2 clients
	Mismatched      int
	Finished        int // clients that logged Finished
	Drops           int // members dropped by health checks
	Incomplete      int // (client, step) pairs that applied fewer payloads than members
	IncompleteSteps map[uint64]bool
	Warnings        int
	Lost            uint64 // packets dropped by the loss model on all links
	Err             error
}

// waitFinished waits until every client in cls logged Finished, one exits,
// or the timeout; it prints progress every 15 s.
func waitFinished(ctx context.Context, c *Cluster, cls []*Client, timeout time.Duration, w io.Writer) error {
	deadline := time.Now().Add(timeout)
	lastPrint := time.Now()
	for {
		done := 0
		for _, cl := range cls {
			if cl.Events.Finished() {
				done++
				continue
			}
			if ok, err := cl.P.Exited(); ok {
				return fmt.Errorf("client %s exited before the run finished (%v); see %s", cl.Name, err, cl.P.Log)
			}
		}
		if done == len(cls) {
			return nil
		}
		if time.Since(lastPrint) > 15*time.Second {
			var steps []string
			for _, cl := range cls {
				steps = append(steps, strconv.FormatUint(cl.Events.LastStep(), 10))
			}
			fmt.Fprintf(w, "wan-harness: [%s] steps per client: %s\n", c.RunID, strings.Join(steps, " "))
			lastPrint = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the run did not finish within %v (logs: %s)", timeout, c.Opt.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// collect computes a trainingResult from the clients' logs, their /status
// and the links' counters.
func collect(ctx context.Context, c *Cluster, cls []*Client, r *trainingResult) {
	r.Clients = len(cls)
	digests := map[uint64]map[string]bool{}
	perStep := map[uint64][]float64{}
	var trains []float64
	var first, last time.Time
	stepsTrained := map[uint64]bool{}
	for _, cl := range cls {
		lg := cl.Events.snapshot()
		r.Warnings += lg.warnings
		r.Drops += len(lg.drops)
		if !lg.finished.IsZero() {
			r.Finished++
			if lg.finished.After(last) {
				last = lg.finished
			}
		}
		if !lg.modelReady.IsZero() && (first.IsZero() || lg.modelReady.Before(first)) {
			first = lg.modelReady
		}
		for s, e := range lg.steps {
			if digests[s] == nil {
				digests[s] = map[string]bool{}
			}
			if e.Digest != "" {
				digests[s][e.Digest] = true
			}
			if e.Applied < e.Of {
				r.Incomplete++
				if r.IncompleteSteps == nil {
					r.IncompleteSteps = map[uint64]bool{}
				}
				r.IncompleteSteps[s] = true
			}
			if !e.Trained {
				continue
			}
			stepsTrained[s] = true
			trains = append(trains, e.Train)
			if e.Round > 0 {
				perStep[s] = append(perStep[s], e.Round)
			}
		}
	}
	for s, set := range digests {
		n := 0
		for _, cl := range cls {
			if _, ok := cl.Events.snapshot().steps[s]; ok {
				n++
			}
		}
		if n >= 2 {
			r.Compared++
			if len(set) > 1 {
				r.Mismatched++
			}
		}
	}
	r.Steps = len(stepsTrained)
	var rounds []float64
	for _, v := range perStep {
		rounds = append(rounds, median(v))
	}
	r.RoundMedian, r.RoundMean, r.RoundP95 = median(rounds), mean(rounds), pct(rounds, 95)
	r.TrainMean = mean(trains)
	if !first.IsZero() && !last.IsZero() {
		r.Wall = last.Sub(first).Seconds()
	}
	// Bytes: the clients' own counts of update bytes, and the links'.
	var out, in float64
	var n int
	for _, cl := range cls {
		snap, err := c.Status(ctx, cl)
		if err != nil || snap.StepsTotal == 0 {
			continue
		}
		if r.DenseBytes == 0 {
			r.DenseBytes = snap.DenseBytes
		}
		var so, si float64
		for _, st := range snap.Steps {
			so += float64(st.BytesOut)
			si += float64(st.BytesIn)
		}
		if len(snap.Steps) > 0 {
			out += so / float64(len(snap.Steps))
			in += si / float64(len(snap.Steps))
			n++
		}
	}
	if n > 0 {
		r.PayloadOut, r.PayloadIn = out/float64(n), in/float64(n)
	}
	if r.Steps > 0 {
		var up, dn, chain float64
		links := 0
		for _, cl := range cls {
			if cl.Link == nil {
				continue
			}
			links++
			up += float64(cl.Link.Up.Bytes.Load() - cl.Link.Up.InfraBytes.Load())
			dn += float64(cl.Link.Dn.Bytes.Load() - cl.Link.Dn.InfraBytes.Load())
			chain += float64(cl.Link.Up.InfraBytes.Load() + cl.Link.Dn.InfraBytes.Load())
			r.Lost += cl.Link.Up.Lost.Load() + cl.Link.Dn.Lost.Load()
		}
		if links > 0 {
			d := float64(links) * float64(r.Steps)
			r.WireUp, r.WireDn, r.ChainUp = up/d, dn/d, chain/d
		}
	}
}

func median(v []float64) float64 { return pct(v, 50) }

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var t float64
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

// runTraining runs one cluster: n clients with shape s until Finished.
func runTraining(ctx context.Context, opt clusterOptions, n int, s Shape, timeout time.Duration, w io.Writer) trainingResult {
	return runTrainingWith(ctx, opt, n, s, timeout, w, nil)
}

// runTrainingWith is runTraining with a hook called once the clients are
// started; the function it returns is called when the run is over.
func runTrainingWith(ctx context.Context, opt clusterOptions, n int, s Shape, timeout time.Duration, w io.Writer,
	started func(*Cluster, []*Client) func()) (res trainingResult) {
	res = trainingResult{Label: opt.Name, Config: opt.Config, Net: opt.Net, Shape: s}
	start := time.Now()
	c, err := newCluster(ctx, opt, w)
	if err != nil {
		res.Err = err
		return res
	}
	defer func() {
		c.say("stopping (%.0f s)", time.Since(start).Seconds())
		c.Close()
	}()
	cls, err := c.AddClients(ctx, n, s)
	if err != nil {
		res.Err = err
		return res
	}
	if err := c.Resume(ctx); err != nil {
		res.Err = err
		return res
	}
	for _, cl := range cls {
		if err := c.StartClient(cl); err != nil {
			res.Err = err
			return res
		}
	}
	c.say("%d clients (%s, %s) started", n, opt.Net, s)
	if started != nil {
		done := started(c, cls)
		defer done()
	}
	res.Err = waitFinished(ctx, c, cls, timeout, w)
	collect(context.WithoutCancel(ctx), c, cls, &res)
	return res
}

// workDir is where a scenario keeps its runs' files.
func workDir(scenario string) string {
	base := os.Getenv("WAN_DIR")
	if base == "" {
		base = filepath.Join(os.TempDir(), "wan-harness-runs")
	}
	d := filepath.Join(base, time.Now().Format("20060102-150405")+"-"+scenario)
	os.MkdirAll(d, 0o755)
	return d
}

func fmtBytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "-"
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func fmtSec(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.2f s", s)
}

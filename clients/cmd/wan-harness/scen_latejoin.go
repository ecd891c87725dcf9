package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/psyche-go/psyche/clients/p2p"
)

func init() {
	register("latejoin", "scenario 2: a joiner downloads a gpt2-124m-sized model from 4 peers; link cut and process restart", cmdLatejoin)
}

// gpt2Bytes is GPT-2 124M's parameters in fp32: 124,439,808 x 4 bytes.
const gpt2Bytes = 124_439_808 * 4

func cmdLatejoin(ctx context.Context, args []string) error {
	fs := newFlags("latejoin", "[-peers 4] [-peer-shape 100/50ms/0] [-joiner-shape 1000/50ms/0] [-variants plain,cut,restart]")
	peers := fs.Int("peers", 4, "peers that share the model")
	peerShape := fs.String("peer-shape", "100/50ms/0", "each sharing peer's link")
	joinerShape := fs.String("joiner-shape", "1000/50ms/0", "the joiner's link")
	size := fs.Int64("bytes", gpt2Bytes, "model size in bytes (default: gpt2-124m in fp32)")
	cut := fs.Duration("cut", 10*time.Second, "how long the joiner's link is cut (variant cut) or its process is down (variant restart)")
	cutAt := fs.Float64("cut-at", 0.3, "fraction of the chunks after which the cut happens")
	variants := fs.String("variants", "plain,cut,restart", "plain: an uninterrupted download; cut: the joiner's link is cut; restart: the joiner process is killed and restarted")
	transport := fs.String("transport", "both", "libp2p transports: both (as the client), quic or tcp")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a download after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ps, err := parseShape(*peerShape)
	if err != nil {
		return err
	}
	js, err := parseShape(*joinerShape)
	if err != nil {
		return err
	}
	model, manifest, root, err := modelBlob(*size)
	if err != nil {
		return err
	}
	dir := workDir("latejoin")
	var rows []latejoinResult
	for _, v := range strings.Split(*variants, ",") {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r := runLatejoin(ctx, latejoinOptions{Variant: v, Peers: *peers, PeerShape: ps, JoinerShape: js, Model: model,
			Manifest: manifest, Root: root, Size: *size, Cut: *cut, CutAt: *cutAt, Transport: *transport,
			Dir: filepath.Join(dir, v), Timeout: *timeout}, os.Stderr)
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "wan-harness: latejoin %s: %v\n", v, r.Err)
		}
		rows = append(rows, r)
	}
	line := min(float64(*peers)*rateOr(ps), rateOr(js))
	fmt.Printf("\nscenario 2: a joiner (link %s) fetches a %s model from %d peers (links %s) with p2p.Node.FetchModel over %s; line rate %.0f Mbit/s (files: %s)\n",
		js, fmtBytes(float64(*size)), *peers, ps, *transport, line, dir)
	tb := newTable("variant", "download time", "without the interruption", "line-rate time", "achieved", "of line rate", "interruption",
		"stalled after restore", "FetchModel calls", "chunk bytes fetched", "CPU busy", "result")
	for _, r := range rows {
		ideal := float64(*size) * 8 / (line * 1e6)
		res := "ok"
		if r.Err != nil {
			res = "FAILED: " + firstLine(r.Err.Error())
		}
		inter, stall := "-", "-"
		if r.Variant != "plain" {
			inter = fmt.Sprintf("%s at %.0f%% of the chunks", r.Cut, r.CutFrac*100)
			stall = fmtSec(r.Stall)
		}
		net := r.Seconds - r.Cut.Seconds()
		mbit := float64(*size) * 8 / net / 1e6
		tb.Row(r.Variant, fmtSec(r.Seconds), fmtSec(net), fmtSec(ideal), fmt.Sprintf("%.0f Mbit/s", mbit), fmt.Sprintf("%.0f%%", mbit/line*100),
			inter, stall, r.Attempts, fmtBytes(float64(r.Fetched)), fmt.Sprintf("%.0f%%", r.Busy*100), res)
	}
	tb.Print(os.Stdout)
	for _, r := range rows {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func rateOr(s Shape) float64 {
	if s.RateMbit <= 0 {
		return 10000
	}
	return s.RateMbit
}

// modelBlob makes (once, in the cache) a model-sized file of random bytes
// and its manifest in the p2p layer's default 1 MiB chunks.
func modelBlob(size int64) (string, string, string, error) {
	dir := cacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("model-%d.bin", size))
	mpath := path + ".manifest"
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		tmp := path + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			return "", "", "", err
		}
		rng := rand.NewChaCha8([32]byte{'p', 's', 'y', 'c', 'h', 'e'})
		w := bufio.NewWriterSize(f, 4<<20)
		if _, err := io.CopyN(w, rng, size); err != nil {
			f.Close()
			return "", "", "", err
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return "", "", "", err
		}
		f.Close()
		if err := os.Rename(tmp, path); err != nil {
			return "", "", "", err
		}
		os.Remove(mpath)
	}
	if data, err := os.ReadFile(mpath); err == nil {
		if m, err := p2p.UnmarshalManifest(data); err == nil {
			return path, mpath, m.Root().String(), nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", "", "", err
	}
	defer f.Close()
	m, err := p2p.BuildManifest(f, size, p2p.DefaultChunkSize)
	if err != nil {
		return "", "", "", err
	}
	if err := os.WriteFile(mpath, m.Marshal(), 0o644); err != nil {
		return "", "", "", err
	}
	return path, mpath, m.Root().String(), nil
}

type latejoinOptions struct {
	Variant                string
	Peers                  int
	PeerShape, JoinerShape Shape
	Model, Manifest, Root  string
	Size                   int64
	Cut                    time.Duration
	CutAt                  float64
	Transport              string
	Dir                    string
	Timeout                time.Duration
}

type latejoinResult struct {
	Variant  string
	Seconds  float64
	Mbit     float64
	Cut      time.Duration
	CutFrac  float64
	Stall    float64 // seconds from the link's return (or the restart) to the next verified chunk
	Attempts int
	Fetched  uint64 // chunk bytes the joiner's last process fetched
	Busy     float64
	Err      error
}

// followEvents streams the JSON lines of a peer's output file.
func followEvents(path string, done <-chan struct{}) <-chan peerEvent {
	out := make(chan peerEvent, 1<<16)
	go func() {
		defer close(out)
		var f *os.File
		for f == nil {
			var err error
			if f, err = os.Open(path); err != nil {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		defer f.Close()
		r := bufio.NewReader(f)
		var partial []byte
		exited := false
		for {
			line, err := r.ReadBytes('\n')
			partial = append(partial, line...)
			if len(partial) > 0 && (partial[len(partial)-1] == '\n' || (exited && errors.Is(err, io.EOF))) {
				var e peerEvent
				if json.Unmarshal(partial, &e) == nil && e.Event != "" {
					out <- e
				}
				partial = partial[:0]
			}
			if errors.Is(err, io.EOF) {
				if exited {
					return
				}
				select {
				case <-done:
					// Read once more to the end: lines written just before
					// the exit.
					exited = true
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	return out
}

func runLatejoin(ctx context.Context, o latejoinOptions, w io.Writer) (res latejoinResult) {
	res = latejoinResult{Variant: o.Variant}
	self, err := os.Executable()
	if err != nil {
		res.Err = err
		return res
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		res.Err = err
		return res
	}
	t, err := newTopo(false)
	if err != nil {
		res.Err = err
		return res
	}
	defer t.Close()
	seeds := make([]string, o.Peers+1)
	ids := make([]string, o.Peers+1)
	for i := range seeds {
		seeds[i] = newSeed()
		id, err := seedPeerID(seeds[i])
		if err != nil {
			res.Err = err
			return res
		}
		ids[i] = id.String()
	}
	common := []string{"-run", "latejoin", "-rendezvous", filepath.Join(o.Dir, "p2p"), "-participants", strings.Join(ids, ","), "-transport", o.Transport}
	var sharers []<-chan peerEvent
	for i := 1; i <= o.Peers; i++ {
		l, err := t.AddClient(fmt.Sprintf("s%d", i), clientAddr(i), o.PeerShape)
		if err != nil {
			res.Err = err
			return res
		}
		logPath := filepath.Join(o.Dir, fmt.Sprintf("s%d.log", i))
		args := append([]string{self, "peer", "-seed", seeds[i], "-listen", l.Addr, "-share", o.Model, "-manifest", o.Manifest}, common...)
		p, err := t.Start(l.NS, fmt.Sprintf("s%d", i), logPath, false, args...)
		if err != nil {
			res.Err = err
			return res
		}
		sharers = append(sharers, followEvents(logPath, p.Done()))
	}
	for _, ev := range sharers {
		if err := waitEvent(ctx, ev, "sharing", time.Minute); err != nil {
			res.Err = fmt.Errorf("a sharer did not start: %w", err)
			return res
		}
	}
	jl, err := t.AddClient("joiner", clientAddr(100), o.JoinerShape)
	if err != nil {
		res.Err = err
		return res
	}
	dst := filepath.Join(o.Dir, "model.bin")
	startJoiner := func(k int) (*Proc, <-chan peerEvent, error) {
		logPath := filepath.Join(o.Dir, fmt.Sprintf("joiner-%d.log", k))
		args := append([]string{self, "peer", "-seed", seeds[0], "-listen", jl.Addr, "-fetch", o.Root, "-dst", dst}, common...)
		p, err := t.Start(jl.NS, "joiner", logPath, false, args...)
		if err != nil {
			return nil, nil, err
		}
		return p, followEvents(logPath, p.Done()), nil
	}
	p, ev, err := startJoiner(1)
	if err != nil {
		res.Err = err
		return res
	}
	fmt.Fprintf(w, "wan-harness: [latejoin %s] %d sharers ready; the joiner fetches %s\n", o.Variant, o.Peers, fmtBytes(float64(o.Size)))
	u := &machineUsage{}
	stopSampling := make(chan struct{})
	defer close(stopSampling)
	go func() {
		for {
			u.sample(nil)
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	var start, restored time.Time
	interrupted := false
	deadline := time.After(o.Timeout)
	lastPrint := time.Now()
	for {
		var e peerEvent
		var ok bool
		select {
		case <-ctx.Done():
			res.Err = ctx.Err()
			return res
		case <-deadline:
			res.Err = fmt.Errorf("no complete download within %v", o.Timeout)
			return res
		case e, ok = <-ev:
		}
		if !ok {
			res.Err = fmt.Errorf("the joiner exited without the model (see %s)", p.Log)
			return res
		}
		switch e.Event {
		case "connected":
			if start.IsZero() {
				start = e.T
			}
		case "attempt":
			res.Attempts++
		case "fetch-failed":
			fmt.Fprintf(w, "wan-harness: [latejoin %s] FetchModel failed (it is called again): %s\n", o.Variant, e.Err)
		case "progress":
			if !restored.IsZero() && res.Stall == 0 && e.Done > 0 {
				res.Stall = e.T.Sub(restored).Seconds()
			}
			if time.Since(lastPrint) > 5*time.Second {
				fmt.Fprintf(w, "wan-harness: [latejoin %s] %d/%d chunks after %.1f s\n", o.Variant, e.Done, e.Total, e.T.Sub(start).Seconds())
				lastPrint = time.Now()
			}
			if interrupted || o.Variant == "plain" || e.Total == 0 || float64(e.Done)/float64(e.Total) < o.CutAt {
				continue
			}
			interrupted = true
			res.Cut, res.CutFrac = o.Cut, float64(e.Done)/float64(e.Total)
			switch o.Variant {
			case "cut":
				fmt.Fprintf(w, "wan-harness: [latejoin cut] cutting the joiner's link for %v at %d/%d chunks\n", o.Cut, e.Done, e.Total)
				jl.SetCut(true)
				time.Sleep(o.Cut)
				jl.SetCut(false)
				restored = time.Now()
			case "restart":
				fmt.Fprintf(w, "wan-harness: [latejoin restart] killing the joiner at %d/%d chunks; restarting it in %v\n", e.Done, e.Total, o.Cut)
				p.Signal(syscall.SIGKILL)
				p.Wait(10 * time.Second)
				for range ev {
				}
				time.Sleep(o.Cut)
				restored = time.Now()
				if p, ev, err = startJoiner(2); err != nil {
					res.Err = err
					return res
				}
			default:
				res.Err = fmt.Errorf("unknown variant %q (plain, cut, restart)", o.Variant)
				return res
			}
		case "fetched":
			res.Seconds = e.T.Sub(start).Seconds()
			res.Mbit = float64(o.Size) * 8 / res.Seconds / 1e6
			res.Fetched = e.Bytes
			u.mu.Lock()
			res.Busy = u.busy
			u.mu.Unlock()
			fmt.Fprintf(w, "wan-harness: [latejoin %s] fetched in %.1f s\n", o.Variant, res.Seconds)
			if err := sameFile(dst, o.Model); err != nil {
				res.Err = err
			}
			os.Remove(dst) // 475 MiB per run otherwise
			return res
		}
	}
}

// waitEvent waits for an event of a kind.
func waitEvent(ctx context.Context, ev <-chan peerEvent, kind string, d time.Duration) error {
	timer := time.After(d)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer:
			return fmt.Errorf("no %q within %v", kind, d)
		case e, ok := <-ev:
			if !ok {
				return errors.New("the peer exited")
			}
			if e.Event == kind {
				return nil
			}
		}
	}
}

// sameFile checks that the fetched model is the shared one (FetchModel
// verified every chunk; this checks the harness's plumbing too).
func sameFile(a, b string) error {
	sa, err := os.Stat(a)
	if err != nil {
		return err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return err
	}
	if sa.Size() != sb.Size() {
		return fmt.Errorf("fetched %d bytes, the model has %d", sa.Size(), sb.Size())
	}
	return nil
}

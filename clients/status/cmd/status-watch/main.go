// Command status-watch follows training clients through their /status
// endpoints (--metrics-local-port): it prints one progress line per step per
// client, checks that all clients report the same state digest at every
// step, and when every client reaches the wanted run state (default
// Finished) prints a summary per client and optionally writes a loss plot.
// With -rpc and -run-id it also follows the run's verification on chain:
// each step line then says what became of the client's contribution
// (-signer names each client's key), disputes and faults are announced as
// they happen, and the summary counts verdicts, disputes and burned points.
// scripts/demo.sh uses it to show a local run.
//
//	status-watch [-until Finished] [-interval 1s] [-timeout 0] [-plot loss.png]
//	             [-rpc URL -run-id ID [-signer NAME=PUBKEY]...] [NAME=]URL...
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/lossplot"
	"github.com/psyche-go/psyche/clients/status/progress"
)

// maxStatusBytes bounds what one /status response may weigh.
const maxStatusBytes = 32 << 20

// maxDigestSteps bounds the steps whose digests are remembered for the
// cross-client comparison.
const maxDigestSteps = 1 << 16

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "status-watch:", err)
		os.Exit(1)
	}
}

type client struct {
	name, url string
	signer    *solana.PublicKey // -signer
	snap      *status.Snapshot
	printer   *progress.Printer
	down      bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status-watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: status-watch [flags] [NAME=]URL...   (URL: a client's metrics endpoint, e.g. http://127.0.0.1:9101)")
		fs.PrintDefaults()
	}
	until := fs.String("until", "Finished", "stop once every client reports this run state")
	interval := fs.Duration("interval", time.Second, "how often to poll each client")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: never)")
	plotPath := fs.String("plot", "", "write train and held-out loss of every client to this PNG file at the end")
	rpcURL := fs.String("rpc", "", "the cluster's JSON-RPC URL: also follow the run's verification on chain (needs -run-id)")
	runID := fs.String("run-id", "", "the run to follow on chain (with -rpc)")
	signers := map[string]solana.PublicKey{}
	fs.Func("signer", "NAME=PUBKEY: the wallet key of the client named NAME, to find its contributions on chain (repeatable)", func(v string) error {
		name, key, ok := strings.Cut(v, "=")
		pk, err := solana.PublicKeyFromBase58(key)
		if !ok || err != nil {
			return fmt.Errorf("want NAME=PUBKEY, got %q", v)
		}
		signers[name] = pk
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*rpcURL == "") != (*runID == "") {
		return errors.New("-rpc and -run-id go together")
	}
	if len(signers) > 0 && *rpcURL == "" {
		return errors.New("-signer needs -rpc and -run-id")
	}
	if *interval <= 0 {
		return fmt.Errorf("-interval must be positive, got %v", *interval)
	}
	if *timeout < 0 {
		return fmt.Errorf("-timeout must not be negative, got %v", *timeout)
	}
	clients, err := parseClients(fs.Args(), stdout)
	if err != nil {
		return err
	}
	names, err := nameSigners(clients, signers)
	if err != nil {
		return err
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	var watch *chainWatch
	if *rpcURL != "" {
		if watch, err = newChainWatch(ctx, *rpcURL, *runID, names, stdout); err != nil {
			return fmt.Errorf("following run %q on chain: %w", *runID, err)
		}
		for _, c := range clients {
			if c.signer != nil {
				c.printer.WithNote(func(step uint64) string { return watch.note(*c.signer, step) })
			}
		}
	}

	hc := &http.Client{Timeout: 5 * time.Second}
	digests := map[uint64]map[string]string{} // step -> client -> digest
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	chainDown := false
	for {
		fresh := make([]bool, len(clients))
		for i, c := range clients {
			snap, err := fetch(ctx, hc, c.url)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				if !c.down {
					fmt.Fprintf(stderr, "[%s] unreachable: %v\n", c.name, err)
					c.down = true
				}
				continue
			}
			if c.down {
				fmt.Fprintf(stderr, "[%s] reachable again\n", c.name)
				c.down = false
			}
			c.snap, fresh[i] = snap, true
		}
		// The chain is read after the clients: a step a client recorded has
		// ended on chain by then, so its verdicts are final.
		if watch != nil && ctx.Err() == nil {
			if err := watch.poll(ctx); err != nil && ctx.Err() == nil {
				if !chainDown {
					fmt.Fprintf(stderr, "[verify] cannot read the run: %v\n", err)
				}
				chainDown = true
			} else {
				chainDown = false
			}
		}
		for i, c := range clients {
			if !fresh[i] {
				continue
			}
			if err := c.printer.Print(*c.snap); err != nil {
				return err
			}
			for _, m := range compareDigests(digests, c.name, c.snap.Steps) {
				fmt.Fprintln(stdout, "DIGEST MISMATCH", m)
			}
		}
		if allIn(clients, *until) {
			break
		}
		select {
		case <-ctx.Done():
			summarize(stdout, clients, watch)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not every client reached %s within %v", *until, *timeout)
			}
			return fmt.Errorf("interrupted before every client reached %s", *until)
		case <-tick.C:
		}
	}
	summarize(stdout, clients, watch)
	compared, mismatched := 0, 0
	for _, byClient := range digests {
		if len(byClient) >= 2 {
			compared++
			if !agree(byClient) {
				mismatched++
			}
		}
	}
	fmt.Fprintf(stdout, "digests: %d steps compared across clients, %d mismatched\n", compared, mismatched)
	if *plotPath != "" {
		var series []lossplot.Series
		for _, c := range clients {
			series = append(series, lossplot.FromSnapshot(c.name+" ", *c.snap)...)
		}
		if err := lossplot.WritePNG(*plotPath, series, lossplot.Options{Title: "run " + clients[0].snap.RunID}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "loss plot: %s\n", *plotPath)
	}
	if mismatched > 0 {
		return fmt.Errorf("state digests differ between clients at %d steps", mismatched)
	}
	return nil
}

func parseClients(args []string, stdout io.Writer) ([]*client, error) {
	if len(args) == 0 {
		return nil, errors.New("name at least one client URL, e.g. http://127.0.0.1:9101")
	}
	var clients []*client
	seen := map[string]bool{}
	for _, a := range args {
		name, raw, named := strings.Cut(a, "=")
		if !named {
			raw = a
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%q is not an http(s) URL of a client's metrics endpoint", raw)
		}
		if !named {
			name = u.Host
		}
		if name == "" || seen[name] {
			return nil, fmt.Errorf("client name %q is empty or given twice", name)
		}
		seen[name] = true
		u.Path = strings.TrimSuffix(u.Path, "/") + "/status"
		clients = append(clients, &client{name: name, url: u.String(), printer: progress.NewPrinter(stdout, "["+name+"] ")})
	}
	return clients, nil
}

func fetch(ctx context.Context, hc *http.Client, u string) (*status.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var s status.Snapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&s); err != nil {
		return nil, fmt.Errorf("GET %s: not a status snapshot: %w", u, err)
	}
	return &s, nil
}

// compareDigests remembers name's digest per step and describes each step
// where it differs from another client's.
func compareDigests(digests map[uint64]map[string]string, name string, steps []status.StepStat) []string {
	var out []string
	for _, st := range steps {
		byClient := digests[st.Step]
		if byClient == nil {
			if len(digests) >= maxDigestSteps {
				delete(digests, oldest(digests))
			}
			byClient = map[string]string{}
			digests[st.Step] = byClient
		}
		if _, known := byClient[name]; known {
			continue
		}
		for other, d := range byClient {
			if d != st.Digest {
				out = append(out, fmt.Sprintf("at step %d: %s has %s, %s has %s", st.Step, name, st.Digest, other, d))
				break
			}
		}
		byClient[name] = st.Digest
	}
	return out
}

func oldest(digests map[uint64]map[string]string) uint64 {
	keys := make([]uint64, 0, len(digests))
	for k := range digests {
		keys = append(keys, k)
	}
	return slices.Min(keys)
}

func agree(byClient map[string]string) bool {
	first := ""
	for _, d := range byClient {
		if first == "" {
			first = d
		} else if d != first {
			return false
		}
	}
	return true
}

func allIn(clients []*client, state string) bool {
	for _, c := range clients {
		if c.snap == nil || c.snap.RunState != state {
			return false
		}
	}
	return true
}

func summarize(w io.Writer, clients []*client, watch *chainWatch) {
	for _, c := range clients {
		fmt.Fprintf(w, "[%s] ", c.name)
		if c.snap == nil {
			fmt.Fprintln(w, "never reachable")
			continue
		}
		fmt.Fprint(w, strings.ReplaceAll(strings.TrimSuffix(progress.Summary(*c.snap), "\n"), "\n", "\n["+c.name+"] "))
		fmt.Fprintln(w)
	}
	if watch != nil {
		watch.summary(w)
	}
}

// nameSigners attaches each -signer key to its client and maps keys to
// names; a name that is not a client's is an error.
func nameSigners(clients []*client, signers map[string]solana.PublicKey) (map[solana.PublicKey]string, error) {
	names := map[solana.PublicKey]string{}
	for name, key := range signers {
		i := slices.IndexFunc(clients, func(c *client) bool { return c.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-signer %s=...: no client is named %q", name, name)
		}
		clients[i].signer = &key
		names[key] = name
	}
	return names, nil
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/psyche-go/psyche/clients/status"
)

// What scripts/demo.sh does, inside the harness's namespaces: a validator
// and a data server in the infra namespace, the programs deployed, a
// permissionless run created from a config in config/, and training
// clients each in its own namespace behind its access link.

// Network modes of a cluster.
const (
	// netLoopback runs everything in one namespace on 127.0.0.1, as
	// scripts/demo.sh does on the host: the reference for overheads.
	netLoopback = "loopback"
	// netShaped gives each client its own namespace and access link.
	netShaped = "shaped"
)

// clusterOptions configure a cluster.
type clusterOptions struct {
	Net       string // netLoopback or netShaped
	Config    string // config/<name>.toml, or "small" (tiny's timers, the trainer's small model)
	Overrides map[string]string
	Name      string // the run id, also the log directory's name
	Dir       string // where ledgers, wallets, logs go
	Linger    int    // --linger-secs of the clients
	ExtraArgs []string
	// ClientNice runs the clients at this nice level (0: the harness's), so
	// that many clients do not starve the validator and the data server.
	ClientNice int
}

// Cluster is a validator, a data server, a run and its clients.
type Cluster struct {
	T       *Topo
	Opt     clusterOptions
	Root    string // the repository
	PC      string // psyche-client binary
	NS      string // where the validator and the data server run
	RPC, WS string
	DataURL string
	RunID   string
	Config  string // the applied run config
	Auth    string // authority wallet
	Log     io.Writer

	mu      sync.Mutex
	clients []*Client
	nextIdx int
}

// Client is one training client.
type Client struct {
	Name   string
	Index  int // 1-based, in start order
	NS     string
	Addr   string
	Wallet string
	Port   int // metrics port (127.0.0.1 inside NS)
	Link   *Link
	P      *Proc
	Events *clientLog
	Start  time.Time
}

// repoRoot finds the repository: $PSYCHE_ROOT, else the directory above
// the running binary's scripts/ sibling, else the working directory.
func repoRoot() (string, error) {
	for _, c := range []string{os.Getenv("PSYCHE_ROOT"), "."} {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		for d := abs; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "scripts", "localnet.sh")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("run from inside the repository (or set PSYCHE_ROOT)")
}

// psycheClient is the client binary: $PSYCHE_CLIENT, else bin/psyche-client.
func psycheClient(root string) (string, error) {
	p := os.Getenv("PSYCHE_CLIENT")
	if p == "" {
		p = filepath.Join(root, "bin", "psyche-client")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("psyche-client binary %s: %w (go build -o bin/psyche-client ./clients/cmd/psyche-client, or set PSYCHE_CLIENT)", p, err)
	}
	return filepath.Abs(p)
}

// cacheDir holds what runs can share: prepared datasets.
func cacheDir() string {
	if d := os.Getenv("WAN_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "wan-harness-cache")
}

// newCluster builds the topology, starts the validator and the data server,
// deploys the programs and creates the run (paused: Resume starts it).
func newCluster(ctx context.Context, opt clusterOptions, log io.Writer) (*Cluster, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	pc, err := psycheClient(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	t, err := newTopo(true)
	if err != nil {
		return nil, err
	}
	t.Dir = root
	c := &Cluster{T: t, Opt: opt, Root: root, PC: pc, NS: t.Infra, RunID: opt.Name, Log: log}
	if err := c.setup(ctx); err != nil {
		t.Close()
		return nil, err
	}
	return c, nil
}

// Close stops the clients (they leave the run), the servers, and removes the
// namespaces.
func (c *Cluster) Close() { c.T.Close() }

func (c *Cluster) say(format string, args ...any) {
	fmt.Fprintf(c.Log, "wan-harness: [%s] %s\n", c.RunID, fmt.Sprintf(format, args...))
}

func (c *Cluster) host() string {
	if c.Opt.Net == netLoopback {
		return "127.0.0.1"
	}
	return infraAddr
}

// pcRun runs psyche-client in the infra namespace and returns its stdout.
func (c *Cluster) pcRun(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.NS, c.PC}, args...)...)
	cmd.Dir = c.Root
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("psyche-client %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (c *Cluster) net() []string { return []string{"--rpc", c.RPC, "--ws-rpc", c.WS} }

func (c *Cluster) setup(ctx context.Context) error {
	host := c.host()
	c.RPC = "http://" + host + ":8899"
	c.WS = "ws://" + host + ":8900"
	c.say("validator on %s (namespace %s); logs in %s", c.RPC, c.NS, c.Opt.Dir)
	if _, err := c.T.Start(c.NS, "validator", filepath.Join(c.Opt.Dir, "validator.log"), true,
		"bash", filepath.Join(c.Root, "scripts", "localnet.sh"), "--ledger", filepath.Join(c.Opt.Dir, "ledger"), "--reset",
		"--rpc-port", "8899", "--ws-port", "8900", "--bind-address", host); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := c.pcRun(ctx, append([]string{"balance"}, append(c.net(), "11111111111111111111111111111111")...)...); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the validator did not answer within 90 s (see %s)", filepath.Join(c.Opt.Dir, "validator.log"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.Auth = filepath.Join(c.Opt.Dir, "authority.json")
	steps := [][]string{
		{"keygen", "-o", c.Auth},
		append(append([]string{"airdrop"}, c.net()...), "-w", c.Auth, "100"),
		append(append([]string{"program", "deploy"}, c.net()...), "-w", c.Auth, "psyche_coordinator", "psyche_authorizer"),
	}
	for _, s := range steps {
		if _, err := c.pcRun(ctx, s...); err != nil {
			return err
		}
	}
	data, err := c.prepareData(ctx)
	if err != nil {
		return err
	}
	if _, err := c.T.Start(c.NS, "data-server", filepath.Join(c.Opt.Dir, "data-server.log"), true,
		c.PC, "data", "serve", "--dir", data, "--port", "9000", "--host", host); err != nil {
		return err
	}
	c.DataURL = "http://" + host + ":9000/"
	root, err := manifestRoot(data)
	if err != nil {
		return err
	}
	cfg, err := c.runConfig(root)
	if err != nil {
		return err
	}
	c.Config = filepath.Join(c.Opt.Dir, "run.toml")
	if err := os.WriteFile(c.Config, []byte(cfg), 0o644); err != nil {
		return err
	}
	admin := append(c.net(), "-w", c.Auth, "--run-id", c.RunID)
	for _, s := range [][]string{
		append([]string{"create-run", "--permissionless"}, admin...),
		append([]string{"update-config", "--config-path", c.Config}, admin...),
	} {
		if _, err := c.pcRun(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// Resume starts the run (set-paused --resume).
func (c *Cluster) Resume(ctx context.Context) error {
	_, err := c.pcRun(ctx, append([]string{"set-paused", "--resume"}, append(c.net(), "-w", c.Auth, "--run-id", c.RunID)...)...)
	return err
}

// prepareData prepares (once, in the cache) the byte-level train split at
// the config's sequence length.
func (c *Cluster) prepareData(ctx context.Context) (string, error) {
	seqLen := 128
	if c.Opt.Config == "small" {
		seqLen = 256
	}
	if v, ok := c.Opt.Overrides["model.max_seq_len"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Errorf("max_seq_len %q", v)
		}
		seqLen = n
	}
	dir := filepath.Join(cacheDir(), fmt.Sprintf("byte-seq%d", seqLen), "train")
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return dir, nil
	}
	c.say("preparing the byte-level dataset (seq-len %d) into %s", seqLen, dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp := dir + fmt.Sprintf(".tmp%d", os.Getpid())
	os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, c.PC, "data", "prepare", "--tokenizer", "byte", "--seq-len", strconv.Itoa(seqLen), "--split", "train", "--out", tmp)
	cmd.Dir = c.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("data prepare: %v: %s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(filepath.Join(dir, "manifest.json")); serr != nil {
			return "", err
		}
	}
	return dir, nil
}

var rootRe = regexp.MustCompile(`"root":\s*"([0-9a-f]{64})"`)

func manifestRoot(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return "", err
	}
	m := rootRe.FindAllSubmatch(data, -1)
	if len(m) == 0 {
		return "", fmt.Errorf("no root in %s/manifest.json", dir)
	}
	return string(m[len(m)-1][1]), nil
}

// smallOverrides turn tiny.toml into a run of the trainer's `small` model
// (6 layers, 384 wide, 256-token context, 10.8 M parameters).
var smallOverrides = map[string]string{
	"metadata.name":           `"small"`,
	"metadata.description":    `"The trainer's small byte-level GPT-2: 6 layers, 384 wide, 256-token context"`,
	"metadata.num_parameters": "10_800_000",
	"model.n_layer":           "6",
	"model.n_head":            "6",
	"model.n_embd":            "384",
	"model.max_seq_len":       "256",
}

// unverified turns verification off (config/tiny.toml verifies): the
// harness measures the exchange, its figures were taken without
// verification, and -dummy members could not be verified. A scenario's
// overrides may turn it back on.
var unverified = map[string]string{"config.verification_percent": "0", "config.round_witness_time": "1"}

// runConfig is the config file with the data location, the root and the
// overrides applied ("section.key" = TOML value).
func (c *Cluster) runConfig(root string) (string, error) {
	name := c.Opt.Config
	over := maps.Clone(unverified)
	if name == "small" {
		name = "tiny"
		for k, v := range smallOverrides {
			over[k] = v
		}
	}
	for k, v := range c.Opt.Overrides {
		over[k] = v
	}
	over["model.data.location"] = strconv.Quote(c.DataURL)
	over["model.data.root"] = strconv.Quote(root)
	src, err := os.ReadFile(filepath.Join(c.Root, "config", name+".toml"))
	if err != nil {
		return "", fmt.Errorf("run config: %w", err)
	}
	return applyOverrides(string(src), over)
}

// applyOverrides sets keys of a TOML file by section ("config.total_steps"),
// replacing the line of a key that is there and adding the others at the
// end of their section.
func applyOverrides(src string, over map[string]string) (string, error) {
	var out []string
	section := ""
	done := map[string]bool{}
	flush := func() {
		for k, v := range over {
			sec, key := splitKey(k)
			if sec == section && !done[k] {
				out = append(out, key+" = "+v)
				done[k] = true
			}
		}
	}
	keyRe := regexp.MustCompile(`^([A-Za-z0-9_]+)\s*=`)
	headRe := regexp.MustCompile(`^\[([A-Za-z0-9_.]+)\]\s*(#.*)?$`)
	for _, line := range strings.Split(src, "\n") {
		trim := strings.TrimSpace(line)
		if h := headRe.FindStringSubmatch(trim); h != nil {
			// Keep the section's trailing blank/comment lines after the added keys.
			var tail []string
			for len(out) > 0 && (strings.TrimSpace(out[len(out)-1]) == "") {
				tail = append(tail, out[len(out)-1])
				out = out[:len(out)-1]
			}
			flush()
			out = append(out, tail...)
			section = h[1]
			out = append(out, line)
			continue
		}
		if m := keyRe.FindStringSubmatch(trim); m != nil {
			k := m[1]
			if section != "" {
				k = section + "." + m[1]
			}
			if v, ok := over[k]; ok {
				out = append(out, m[1]+" = "+v)
				done[k] = true
				continue
			}
		}
		out = append(out, line)
	}
	flush()
	for k := range over {
		if !done[k] {
			return "", fmt.Errorf("run config: no section for %s", k)
		}
	}
	return strings.Join(out, "\n"), nil
}

func splitKey(k string) (string, string) {
	i := strings.LastIndex(k, ".")
	if i < 0 {
		return "", k
	}
	return k[:i], k[i+1:]
}

// AddClient creates a wallet (funded) and, in shaped mode, the client's
// namespace and link; StartClient then runs it.
func (c *Cluster) AddClient(ctx context.Context, s Shape) (*Client, error) {
	c.mu.Lock()
	c.nextIdx++
	i := c.nextIdx
	c.mu.Unlock()
	cl := &Client{Index: i, Name: fmt.Sprintf("c%03d", i), Port: 9101}
	cl.Wallet = filepath.Join(c.Opt.Dir, cl.Name+".json")
	if _, err := c.pcRun(ctx, "keygen", "-o", cl.Wallet); err != nil {
		return nil, err
	}
	if _, err := c.pcRun(ctx, append(append([]string{"airdrop"}, c.net()...), "-w", cl.Wallet, "10")...); err != nil {
		return nil, err
	}
	if c.Opt.Net == netLoopback {
		cl.NS, cl.Addr, cl.Port = c.NS, "127.0.0.1", 9100+i
	} else {
		l, err := c.T.AddClient(cl.Name, clientAddr(i), s)
		if err != nil {
			return nil, err
		}
		cl.NS, cl.Addr, cl.Link = l.NS, l.Addr, l
	}
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl, nil
}

// AddClients adds n clients, a few at a time.
func (c *Cluster) AddClients(ctx context.Context, n int, s Shape) ([]*Client, error) {
	out := make([]*Client, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[k], errs[k] = c.AddClient(ctx, s)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// StartClient runs psyche-client train for cl.
func (c *Cluster) StartClient(cl *Client, extra ...string) error {
	args := []string{c.PC, "train"}
	args = append(args, c.net()...)
	args = append(args, "-w", cl.Wallet, "--run-id", c.RunID, "--logs", "json",
		"--metrics-local-port", strconv.Itoa(cl.Port), "--linger-secs", strconv.Itoa(c.Opt.Linger),
		"--threads", "1", "--p2p-rendezvous-dir", filepath.Join(c.Opt.Dir, "p2p"),
		"--bind-p2p-interface", cl.Addr, "--p2p-public-dht=false", "--p2p-nat-traversal=false")
	args = append(args, c.Opt.ExtraArgs...)
	args = append(args, extra...)
	if c.Opt.ClientNice != 0 {
		args = append([]string{"nice", "-n", strconv.Itoa(c.Opt.ClientNice)}, args...)
	}
	logPath := filepath.Join(c.Opt.Dir, cl.Name+".log")
	p, err := c.T.Start(cl.NS, cl.Name, logPath, false, args...)
	if err != nil {
		return err
	}
	cl.P = p
	cl.Start = time.Now()
	cl.Events = followLog(logPath, p.Done())
	return nil
}

// Clients returns every client added so far.
func (c *Cluster) Clients() []*Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Client, len(c.clients))
	copy(out, c.clients)
	return out
}

// Status fetches a client's /status snapshot (from inside its namespace).
func (c *Cluster) Status(ctx context.Context, cl *Client) (*status.Snapshot, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, cl.NS, network, addr)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/status", cl.Port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s status.Snapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// RunState reads the run's state from the chain (json-dump-run).
func (c *Cluster) RunState(ctx context.Context) (map[string]any, error) {
	out, err := c.pcRun(ctx, append([]string{"json-dump-run", "--run-id", c.RunID}, c.net()...)...)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.NewDecoder(bufio.NewReader(strings.NewReader(out))).Decode(&m); err != nil {
		return nil, fmt.Errorf("json-dump-run: %w", err)
	}
	return m, nil
}

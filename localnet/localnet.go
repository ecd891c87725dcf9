// Package localnet starts and stops the embedded local Solana validator (the
// Node server in this directory, built on the Agave SVM from the litesvm npm
// package) as a child process, so integration tests and tools can talk to a
// real JSON-RPC + PubSub endpoint exactly as they would talk to devnet.
package localnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gagliardetto/solana-go"
)

// Program is a genesis program loaded without an upgrade authority
// (the server's --bpf-program flag).
type Program struct {
	ID   solana.PublicKey
	Path string // SBPF .so file
}

// UpgradeableProgram is a genesis program owned by the BPF upgradeable loader
// with the given upgrade authority (the server's --upgradeable-program flag).
type UpgradeableProgram struct {
	ID        solana.PublicKey
	Path      string
	Authority solana.PublicKey
}

// Options configures a validator process.
type Options struct {
	LedgerDir           string // "" = a fresh temp dir removed on Stop
	Reset               bool   // start from genesis even if LedgerDir holds state
	RPCPort, WSPort     int    // 0 = pick free ports
	Programs            []Program
	UpgradeablePrograms []UpgradeableProgram
	SlotDuration        time.Duration // 0 = default 400ms
	ExtraArgs           []string      // appended to the server's command line
	Stdout, Stderr      io.Writer     // nil = discard
}

// Validator is a running server process.
type Validator struct {
	RPCURL string // http://127.0.0.1:P
	WSURL  string // ws://127.0.0.1:Q
	// LedgerDir holds the server's snapshots; pass it to another Start to
	// restart from the same state.
	LedgerDir string

	cmd        *exec.Cmd
	removeDir  bool
	exited     chan struct{}
	waitErr    error
	stopOnce   sync.Once
	stopResult error
}

// stopTimeout bounds how long Stop waits for the final snapshot after SIGTERM.
const stopTimeout = 15 * time.Second

// defaultStartTimeout applies when ctx has no deadline; the server itself
// starts in well under 3 s, the margin is for loaded CI machines.
const defaultStartTimeout = 60 * time.Second

// Dir returns the directory holding the server sources and node_modules:
// $PSYCHE_LOCALNET_DIR if set, else this package's source directory, else
// (binaries built with -trimpath) a localnet/ directory in or above the
// working directory.
func Dir() (string, error) {
	if d := os.Getenv("PSYCHE_LOCALNET_DIR"); d != "" {
		return d, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(file), nil
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "localnet", "src", "server.js")); err == nil {
				return filepath.Join(d, "localnet"), nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("localnet: cannot locate the server sources; set PSYCHE_LOCALNET_DIR")
}

// CheckInstalled reports whether node and the server's npm dependencies are
// present, with an error that says how to install them.
func CheckInstalled() error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("localnet: node is not on the PATH (run scripts/setup.sh): %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "litesvm", "package.json")); err != nil {
		return fmt.Errorf("localnet: npm dependencies missing in %s (run scripts/setup.sh): %w", dir, err)
	}
	return nil
}

// args returns the server flags for o, except the ledger, ports and ready
// file that Start adds.
func (o Options) args() []string {
	var args []string
	for _, p := range o.Programs {
		args = append(args, "--bpf-program", p.ID.String(), p.Path)
	}
	for _, p := range o.UpgradeablePrograms {
		args = append(args, "--upgradeable-program", p.ID.String(), p.Path, p.Authority.String())
	}
	if o.SlotDuration > 0 {
		args = append(args, "--slot-ms", strconv.FormatFloat(float64(o.SlotDuration)/float64(time.Millisecond), 'f', -1, 64))
	}
	if o.Reset {
		args = append(args, "--reset")
	}
	return append(args, o.ExtraArgs...)
}

// readyInfo is what the server writes to --ready-file once it serves.
type readyInfo struct {
	RPCPort int `json:"rpcPort"`
	WSPort  int `json:"wsPort"`
}

// Start launches the server and returns once getHealth answers "ok".
func Start(ctx context.Context, opts Options) (*Validator, error) {
	if err := CheckInstalled(); err != nil {
		return nil, err
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}

	v := &Validator{LedgerDir: opts.LedgerDir, exited: make(chan struct{})}
	if v.LedgerDir == "" {
		d, err := os.MkdirTemp("", "localnet-ledger-")
		if err != nil {
			return nil, fmt.Errorf("localnet: create temp ledger dir: %w", err)
		}
		v.LedgerDir, v.removeDir = d, true
	}
	runDir, err := os.MkdirTemp("", "localnet-run-")
	if err != nil {
		v.cleanup()
		return nil, fmt.Errorf("localnet: create run dir: %w", err)
	}
	defer os.RemoveAll(runDir)
	readyFile := filepath.Join(runDir, "ready.json")

	args := []string{filepath.Join(dir, "src", "server.js"),
		"--ledger", v.LedgerDir,
		"--rpc-port", strconv.Itoa(opts.RPCPort),
		"--ws-port", strconv.Itoa(opts.WSPort),
		"--ready-file", readyFile,
	}
	args = append(args, opts.args()...)
	// Not CommandContext: ctx bounds startup only, not the server's life.
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Stdout = orDiscard(opts.Stdout)
	cmd.Stderr = orDiscard(opts.Stderr)
	if err := cmd.Start(); err != nil {
		v.cleanup()
		return nil, fmt.Errorf("localnet: start server: %w", err)
	}
	v.cmd = cmd
	go func() {
		v.waitErr = cmd.Wait()
		close(v.exited)
	}()

	info, err := v.waitReady(ctx, readyFile)
	if err != nil {
		_ = v.Kill()
		return nil, err
	}
	v.RPCURL = fmt.Sprintf("http://127.0.0.1:%d", info.RPCPort)
	v.WSURL = fmt.Sprintf("ws://127.0.0.1:%d", info.WSPort)
	if err := v.waitHealthy(ctx); err != nil {
		_ = v.Kill()
		return nil, err
	}
	return v, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// waitReady polls for the ready file; the server writes it atomically.
func (v *Validator) waitReady(ctx context.Context, path string) (readyInfo, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			var info readyInfo
			if err := json.Unmarshal(b, &info); err != nil {
				return info, fmt.Errorf("localnet: malformed ready file %s: %w", path, err)
			}
			return info, nil
		}
		select {
		case <-v.exited:
			return readyInfo{}, fmt.Errorf("localnet: server exited during startup (%v); pass Options.Stderr to see its log", v.waitErr)
		case <-ctx.Done():
			return readyInfo{}, fmt.Errorf("localnet: server did not start: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (v *Validator) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	body := `{"jsonrpc":"2.0","id":1,"method":"getHealth"}`
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.RPCURL, strings.NewReader(body))
		if err != nil {
			return fmt.Errorf("localnet: health request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			var out struct {
				Result string `json:"result"`
			}
			decErr := json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if decErr == nil && out.Result == "ok" {
				return nil
			}
			lastErr = fmt.Errorf("getHealth answered %q (%v)", out.Result, decErr)
		} else {
			lastErr = err
		}
		select {
		case <-v.exited:
			return fmt.Errorf("localnet: server exited during startup (%v)", v.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("localnet: server not healthy (last: %v): %w", lastErr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM (the server writes a final snapshot), waits, and sends
// SIGKILL if it has not exited after a timeout. A temp ledger is removed.
// Calling Stop again, or after Kill, returns the first result.
func (v *Validator) Stop() error {
	v.stopOnce.Do(func() {
		v.stopResult = v.terminate(syscall.SIGTERM, stopTimeout)
		v.cleanup()
	})
	return v.stopResult
}

// Kill ends the server with SIGKILL, as a crash would; the ledger directory
// keeps whatever the last snapshot wrote (a temp ledger is removed).
func (v *Validator) Kill() error {
	v.stopOnce.Do(func() {
		v.stopResult = v.terminate(syscall.SIGKILL, stopTimeout)
		v.cleanup()
	})
	return v.stopResult
}

func (v *Validator) terminate(sig syscall.Signal, timeout time.Duration) error {
	if v.cmd == nil {
		return nil
	}
	select {
	case <-v.exited:
		return v.exitError(sig)
	default:
	}
	if err := v.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localnet: signal server: %w", err)
	}
	select {
	case <-v.exited:
		return v.exitError(sig)
	case <-time.After(timeout):
		_ = v.cmd.Process.Kill()
		<-v.exited
		return fmt.Errorf("localnet: server did not exit within %s of %v; killed", timeout, sig)
	}
}

// exitError reports an unexpected exit; dying from the signal we sent is not one.
func (v *Validator) exitError(sent syscall.Signal) error {
	if v.waitErr == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(v.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sent {
			return nil
		}
	}
	return fmt.Errorf("localnet: server exited with %w", v.waitErr)
}

func (v *Validator) cleanup() {
	if v.removeDir {
		os.RemoveAll(v.LedgerDir)
	}
}

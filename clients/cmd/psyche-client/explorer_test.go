package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/internal/syncbuf"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// explorer: bad input is one line and exit 2 before anything is served;
// against localnet, without --ws-rpc, it says it polls, serves the runs,
// and stops at Ctrl-C. (clients/explorer tests the pages themselves.)
func TestExplorerCommand(t *testing.T) {
	_, fails := cliWith(t, nil)
	fails(exitBadInput, "cannot reach the RPC endpoint", "explorer", "--rpc", "http://127.0.0.1:1")
	fails(exitBadInput, "--poll-interval must be at least 100ms", "explorer", "--poll-interval", "0s")
	fails(exitBadInput, "is not a ws(s) URL", "explorer", "--ws-rpc", "http://127.0.0.1:8900")
	fails(exitBadInput, "--treasurer-program-id", "explorer", "--treasurer-program-id", "nope")
	fails(exitBadInput, "--competition-program-id", "explorer", "--competition-program-id", "nope")

	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_authorizer")
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, _ := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	ok, fails := cliWith(t, nil, "--rpc", v.RPCURL)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fails(exitBadInput, "--listen "+busy.Addr().String(), "explorer", "--listen", busy.Addr().String())
	ok("create-run", "--run-id", "cli-explorer", "-w", adminPath)

	cmd := exec.Command(builtCLI(t), "explorer", "--rpc", v.RPCURL, "--listen", "127.0.0.1:0", "--poll-interval", "200ms")
	cmd.Env = os.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("explorer stderr:\n%s", stderr)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, found := strings.CutPrefix(line, "explorer: ")
	url, _, _ = strings.Cut(url, " ")
	if err != nil || !found {
		t.Fatalf("first line %q (%v)", line, err)
	}
	go io.Copy(io.Discard, stdout)
	if body := explorerGet(t, url+"api/runs"); !strings.Contains(body, `"run_id":"cli-explorer"`) || !strings.Contains(body, `"source":"polling"`) {
		t.Fatalf("GET /api/runs: %s", body)
	}
	// This cluster has no Competition program: no competitions, no error.
	if body := explorerGet(t, url+"api/competitions"); body != `{"source":"polling","competitions":[]}` {
		t.Fatalf("GET /api/competitions: %s", body)
	}
	if !strings.Contains(stderr.String(), "no websocket endpoint: polling for new transactions") {
		t.Errorf("stderr does not say the explorer polls: %s", stderr)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after Ctrl-C: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the explorer did not stop within 10 s of Ctrl-C")
	}
}

// explorerGet is the body of a 200 answer to GET url.
func explorerGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	return string(body)
}

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
	resp, err := http.Get(url + "api/runs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"run_id":"cli-explorer"`) || !strings.Contains(string(body), `"source":"polling"`) {
		t.Fatalf("GET /api/runs: %s %s", resp.Status, body)
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

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDataCommands drives the data commands through the built binary:
// prepare, verify, serve over loopback, fetch over HTTP and locally, and the
// exit code 2 for bad flags, bad files and tampered data.
func TestDataCommands(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "val")
	stdout, stderr, code := runCLI(t, nil, "data", "prepare", "--split", "validation", "--tokenizer", "byte", "--seq-len", "128", "--chunk-bytes", "4096", "--shard-bytes", "200000", "--out", out)
	if code != 0 {
		t.Fatalf("prepare exited %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`(?m)^root\s+([0-9a-f]{64})$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("prepare printed no root:\n%s", stdout)
	}
	root := m[1]
	if _, stderr, code := runCLI(t, nil, "data", "verify", "--dir", out, "--root", root); code != 0 {
		t.Fatalf("verify exited %d: %s", code, stderr)
	}

	srv := exec.Command(builtCLI(t), "data", "serve", "--dir", out, "--port", "0")
	pipe, _ := srv.StdoutPipe()
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	url := regexp.MustCompile(`http://\S+/`).FindString(line)
	if url == "" {
		t.Fatalf("serve did not print its URL: %q", line)
	}
	indices := "0,17,3,250"
	remote, stderr, code := runCLI(t, nil, "data", "fetch", "--from", url, "--root", root, "--indices", indices, "--cache", filepath.Join(tmp, "cache"))
	if code != 0 {
		t.Fatalf("fetch over HTTP exited %d: %s", code, stderr)
	}
	local, stderr, code := runCLI(t, nil, "data", "fetch", "--from", out, "--indices", indices)
	if code != 0 {
		t.Fatalf("local fetch exited %d: %s", code, stderr)
	}
	if remote != local || strings.Count(local, "\n") != 4 {
		t.Fatalf("HTTP and local fetches differ:\n%s\n%s", remote, local)
	}
	text, _, code := runCLI(t, nil, "data", "fetch", "--from", out, "--indices", "0", "--text")
	if code != 0 || !strings.Contains(text, `"text":`) {
		t.Fatalf("fetch --text: exit %d, %s", code, text)
	}
	if _, stderr, code := runCLI(t, nil, "data", "fetch", "--from", url, "--root", strings.Repeat("0", 64), "--indices", "0"); code != 2 || !strings.Contains(stderr, "pinned root") {
		t.Fatalf("fetch with a wrong root: exit %d, %s", code, stderr)
	}
	mix := filepath.Join(tmp, "mix.json")
	os.WriteFile(mix, []byte(`[{"location": "`+out+`", "weight": 2}, {"location": "`+url+`", "root": "`+root+`", "weight": 1}]`), 0o644)
	mixed, stderr, code := runCLI(t, nil, "data", "fetch", "--mix", mix, "--indices", "0,1,2,3")
	// Both parts are the same dataset; weights 2:1 give slots 0 1 0, so mix
	// indices 0 1 2 3 read sequences 0 0 1 2.
	lines := strings.Split(mixed, "\n")
	body := func(i int) string { _, b, _ := strings.Cut(lines[i], ","); return b }
	if code != 0 || len(lines) != 5 || body(0) != body(1) || body(1) == body(2) || body(2) == body(3) {
		t.Fatalf("fetch --mix: exit %d, %s\n%s", code, stderr, mixed)
	}
	os.WriteFile(mix, []byte(`[{"location": "`+url+`", "weight": 1}, {"location": "`+out+`"}]`), 0o644)
	if _, stderr, code := runCLI(t, nil, "data", "fetch", "--mix", mix, "--indices", "0"); code != 2 {
		t.Fatalf("fetch --mix with a bad mix: exit %d, %s", code, stderr)
	}
	srv.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve did not exit cleanly on interrupt: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve ignored the interrupt")
	}

	// Tampering: flip one token byte.
	shardPath := filepath.Join(out, "shard-00000.tok")
	raw, _ := os.ReadFile(shardPath)
	raw[100] ^= 1
	os.WriteFile(shardPath, raw, 0o644)
	if _, stderr, code := runCLI(t, nil, "data", "verify", "--dir", out); code != 2 || !strings.Contains(stderr, "shard-00000.tok") {
		t.Fatalf("verify of a tampered dataset: exit %d, %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, nil, "data", "fetch", "--from", out, "--indices", "0"); code != 2 || !strings.Contains(stderr, "shard shard-00000.tok chunk 0") {
		t.Fatalf("fetch of a tampered sequence: exit %d, %s", code, stderr)
	}

	badCorpus := filepath.Join(tmp, "bad")
	os.MkdirAll(badCorpus, 0o755)
	os.WriteFile(filepath.Join(badCorpus, "a.txt"), []byte("not utf-8 \xff"), 0o644)
	for _, args := range [][]string{
		{"data", "prepare", "--tokenizer", "wordpiece", "--out", filepath.Join(tmp, "x")},
		{"data", "prepare", "--split", "test", "--out", filepath.Join(tmp, "x")},
		{"data", "prepare", "--seq-len", "0", "--out", filepath.Join(tmp, "x")},
		{"data", "prepare", "--out", out},
		{"data", "prepare", "--input", filepath.Join(tmp, "missing"), "--out", filepath.Join(tmp, "x")},
		{"data", "prepare", "--input", badCorpus, "--out", filepath.Join(tmp, "x")},
		{"data", "prepare"},
		{"data", "serve", "--dir", filepath.Join(tmp, "missing"), "--port", "0"},
		{"data", "serve", "--dir", out, "--port", "70000"},
		{"data", "fetch", "--from", out, "--indices", "1,x"},
		{"data", "fetch", "--from", out, "--indices", "99999999"},
		{"data", "fetch", "--from", "http://127.0.0.1:1/", "--indices", "0"},
		{"data", "fetch", "--from", filepath.Join(tmp, "missing"), "--indices", "0"},
		{"data", "fetch", "--indices", "0"},
		{"data", "fetch", "--from", url, "--root", "xyz", "--indices", "0"},
	} {
		if _, stderr, code := runCLI(t, nil, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "x")); !os.IsNotExist(err) {
		t.Error("a failed prepare left its output directory behind")
	}
}

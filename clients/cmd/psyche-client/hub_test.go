package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/pelletier/go-toml/v2"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/programtest"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// safetensorsFile writes a small safetensors-framed checkpoint and returns
// its path and revision.
func safetensorsFile(t *testing.T, payload string) (string, string) {
	t.Helper()
	header := `{"__metadata__":{"note":"` + payload + `"}}`
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	data = append(append(data, header...), payload...)
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return p, hex.EncodeToString(sum[:])
}

func TestHubCommands(t *testing.T) {
	store := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(builtCLI(t), "hub", "serve", "--dir", store, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	_, addr, found := strings.Cut(line, " on ")
	addr, _, _ = strings.Cut(addr, " ")
	if err != nil || !found || !strings.HasPrefix(addr, "http://127.0.0.1:") || !strings.Contains(line, "uploads need the token") {
		t.Fatalf("hub serve printed %q (%v)", line, err)
	}
	repo := strings.TrimSuffix(addr, "/") + "/runs/demo"
	file, want := safetensorsFile(t, "weights")

	// Uploads need the token; reads do not.
	if _, errOut, code := runCLI(t, []string{hubTokenEnv + "="}, "hub", "upload", "--repo", repo, file); code != exitFailure || !strings.Contains(errOut, "token") {
		t.Fatalf("upload without the token: exit %d: %s", code, errOut)
	}
	out, errOut, code := runCLI(t, []string{hubTokenEnv + "=s3cret"}, "hub", "upload", "--repo", repo, file)
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("upload: exit %d, printed %q (%s); want the revision %s", code, out, errOut, want)
	}
	if _, err := os.Stat(filepath.Join(store, "runs", "demo", want+hub.Ext)); err != nil {
		t.Fatalf("the hub did not store it: %v", err)
	}
	if out, errOut, code := runCLI(t, nil, "hub", "upload", "--repo", repo, "--token-file", tokenFile, file); code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("repeated upload: exit %d, %q %s", code, out, errOut)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	fetch := []string{"hub", "fetch", "--repo", repo, "--revision", want, "--dir", dir}
	out, errOut, code = runCLI(t, nil, fetch...)
	if code != 0 || strings.TrimSpace(out) != filepath.Join(dir, want+hub.Ext) {
		t.Fatalf("fetch: exit %d, printed %q (%s)", code, out, errOut)
	}
	if got, err := hub.HashFile(strings.TrimSpace(out)); err != nil || got != want {
		t.Fatalf("fetched file hashes to %s (%v)", got, err)
	}
	missing := strings.Repeat("0", 64)
	if _, errOut, code := runCLI(t, nil, "hub", "fetch", "--repo", repo, "--revision", missing, "--dir", dir); code != exitFailure || !strings.Contains(errOut, "not found") {
		t.Fatalf("fetch of a missing revision: exit %d: %s", code, errOut)
	}

	// Bad input exits 2 with one line and changes nothing.
	notModel := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notModel, []byte("not a model"), 0o644)
	emptyToken := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(emptyToken, nil, 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"hub", "upload", "--repo", repo}, "one checkpoint file"},
		{[]string{"hub", "upload", "--repo", repo, t.TempDir()}, "config.json"},
		{[]string{"hub", "upload", file}, "--repo is required"},
		{[]string{"hub", "upload", "--repo", repo, file + ".missing"}, "no such file"},
		{[]string{"hub", "upload", "--repo", repo, notModel}, "not a safetensors checkpoint"},
		{[]string{"hub", "upload", "--repo", repo + "?v=1", file}, "query"},
		{[]string{"hub", "upload", "--repo", repo, file, "--token-file", tokenFile}, "put flags before arguments"},
		{[]string{"hub", "upload", "--repo", repo, "--token-file", emptyToken, file}, "one token"},
		{[]string{"hub", "fetch", "--repo", repo, "--revision", want[:10], "--dir", dir}, "64 lowercase hex"},
		{[]string{"hub", "fetch", "--repo", "ftp://h/x", "--revision", want, "--dir", dir}, "http://, https:// or file://"},
		{[]string{"hub", "fetch", "--repo", repo, "--revision", want}, "--dir is required"},
		{[]string{"hub", "fetch", "--repo", repo, "--revision", want, "--dir", dir, "--max-size", "lots"}, "--max-size"},
		{[]string{"hub", "serve", "--dir", store, "--max-size", "0"}, "--max-size"},
		{[]string{"hub", "serve", "--dir", store, "--listen", "256.0.0.1:1"}, "--listen"},
		{[]string{"hub", "serve", "--listen", "127.0.0.1:0"}, "--dir is required"},
	} {
		_, errOut, code := runCLI(t, nil, c.args...)
		if code != exitBadInput || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
	if got := len(regularFiles(t, store)); got != 1 {
		t.Fatalf("the hub holds %d files, want 1", got)
	}

	// Ctrl-C stops the server cleanly; the fetched copy still serves offline.
	if err := serve.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hub serve after Ctrl-C: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hub serve did not stop on Ctrl-C")
	}
	if out, errOut, code := runCLI(t, nil, fetch...); code != 0 || strings.TrimSpace(out) != filepath.Join(dir, want+hub.Ext) {
		t.Fatalf("fetch with the hub down and a verified copy: exit %d, %q %s", code, out, errOut)
	}
}

// regularFiles lists the regular files under dir.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// predownload --model reads the run's checkpoint from chain: a hub revision
// is fetched into --checkpoint-dir; a hub run without one, or a p2p run, has
// nothing to fetch. The revision is set with update-config (the run is
// halted; the checkpoint instruction needs a training member).
func TestPredownloadModel(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 100 * time.Millisecond})
	programtest.Deploy(t, v, "psyche_coordinator")
	adminPath, _ := keyFile(t, v, 5*solana.LAMPORTS_PER_SOL)
	net := []string{"--rpc", v.RPCURL, "--ws-rpc", v.WSURL, "--run-id", "hub-run"}
	onRun := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, nil, append(args, net...)...)
	}
	if _, errOut, code := onRun("create-run", "-w", adminPath); code != 0 {
		t.Fatalf("create-run: %s", errOut)
	}
	store := t.TempDir()
	s, err := hub.NewServer(store, hub.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s)
	defer srv.Close()
	repo := srv.URL + "/runs/hub-run"
	file, rev := safetensorsFile(t, "seed+1 epoch")
	if _, err := hub.Upload(t.Context(), repo, file, hub.UploadOptions{}); err != nil {
		t.Fatal(err)
	}

	base, err := os.ReadFile("../../../config/smoke.toml")
	if err != nil {
		t.Fatal(err)
	}
	// setCheckpoint points the run's model at kind, repo and revision.
	setCheckpoint := func(kind, repo, rev string) {
		t.Helper()
		cfg := string(base)
		for _, r := range [][2]string{
			{`kind = "hub"`, `kind = "` + kind + `"`},
			{`repo = "http://127.0.0.1:9000/ckpt/run"`, `repo = "` + repo + `"`},
			{`revision = ""`, `revision = "` + rev + `"`},
		} {
			if !strings.Contains(cfg, r[0]) {
				t.Fatalf("config/smoke.toml has no %s", r[0])
			}
			cfg = strings.Replace(cfg, r[0], r[1], 1)
		}
		p := filepath.Join(t.TempDir(), "run.toml")
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := onRun("update-config", "-w", adminPath, "--config-path", p); code != 0 {
			t.Fatalf("update-config: %s", errOut)
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	predownload := []string{"predownload", "--model", "--data=false", "--checkpoint-dir", dir}

	setCheckpoint("hub", repo, "")
	if out, errOut, code := onRun(predownload...); code != 0 || !strings.Contains(out, "starts from its seed weights") {
		t.Fatalf("hub without a revision: exit %d, %q %s", code, out, errOut)
	}
	setCheckpoint("p2p", repo, "")
	if out, errOut, code := onRun(predownload...); code != 0 || !strings.Contains(out, "members share it") {
		t.Fatalf("p2p: exit %d, %q %s", code, out, errOut)
	}

	setCheckpoint("hub", repo, rev)
	if _, errOut, code := onRun("predownload", "--model", "--data=false"); code != exitBadInput || !strings.Contains(errOut, "--checkpoint-dir is required") {
		t.Fatalf("without --checkpoint-dir: exit %d: %s", code, errOut)
	}
	want := filepath.Join(dir, rev+hub.Ext)
	if out, errOut, code := onRun(predownload...); code != 0 || !strings.Contains(out, "model: "+want) {
		t.Fatalf("hub with a revision: exit %d, %q %s", code, out, errOut)
	}
	if got, err := hub.HashFile(want); err != nil || got != rev {
		t.Fatalf("predownloaded file hashes to %s (%v)", got, err)
	}
	// A p2p run keeps the revision its checkpointers announced: fetched too.
	setCheckpoint("p2p", repo, rev)
	if out, errOut, code := onRun(predownload...); code != 0 || !strings.Contains(out, "model: "+want) {
		t.Fatalf("p2p with a revision: exit %d, %q %s", code, out, errOut)
	}

	// A revision the hub does not hold fails and leaves the directory as it was.
	setCheckpoint("hub", repo, strings.Repeat("e", 64))
	if _, errOut, code := onRun(predownload...); code != exitFailure || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing revision: exit %d: %s", code, errOut)
	}
	if got := regularFiles(t, dir); len(got) != 1 {
		t.Fatalf("checkpoint dir holds %v", got)
	}

	// sample --run-id fetches the run's announced checkpoint and samples it.
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(t.TempDir(), "m.safetensors")
	if err := tr.SaveModel(mf, nil); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	mrev, err := hub.Upload(t.Context(), repo, mf, hub.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setCheckpoint("hub", repo, mrev)
	if out, errOut, code := onRun("sample", "--prompt", "Hi", "--max-tokens", "5"); code != 0 || !strings.HasPrefix(out, "Hi") ||
		!strings.Contains(errOut, "checkpoint "+mrev) {
		t.Fatalf("sample --run-id: exit %d, %q %s", code, out, errOut)
	}
	setCheckpoint("hub", repo, "")
	if _, errOut, code := onRun("sample", "--prompt", "Hi"); code != exitBadInput || !strings.Contains(errOut, "announced no hub checkpoint") {
		t.Fatalf("sample --run-id without a checkpoint: exit %d: %s", code, errOut)
	}
}

// A Hugging Face model directory uploads its weights, checked first, to a
// file:// repo, and the run config keys that start a run from it are printed.
func TestHubUploadHFDirectory(t *testing.T) {
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	hf := t.TempDir()
	if err := tr.ExportHF(hf); err != nil {
		t.Fatal(err)
	}
	want, err := hub.HashFile(filepath.Join(hf, trainer.HFWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	repo := "file://" + filepath.Join(t.TempDir(), "models")
	out, errOut, code := runCLI(t, nil, "hub", "upload", "--repo", repo, hf)
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("upload: exit %d, printed %q (%s); want the revision %s", code, out, errOut, want)
	}
	for _, key := range []string{`architecture = "llama"`, "n_kv_head = 2", "intermediate_size = 384", "tie_embeddings = true",
		`kind = "hub"`, "repo = \"" + repo + "\"", "revision = \"" + want + "\""} {
		if !strings.Contains(errOut, key) {
			t.Errorf("the printed run config lacks %q:\n%s", key, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(repo, "file://"), want+hub.Ext)); err != nil {
		t.Fatalf("the file:// repo does not hold it: %v", err)
	}
}

// The run config keys printed for a Hugging Face Llama carry its knobs, so
// that the run's model equals it (HFConfigFits compares them).
func TestHFRunKeysCarryKnobs(t *testing.T) {
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Knobs = trainer.Knobs{RMSNormEps: 1e-6, RopeScaling: trainer.RopeLlama3, RopeFactor: 8, RopeLowFreq: 1, RopeHighFreq: 4, RopeOrigCtx: 8192, QKVBias: true}
	var doc struct {
		Model coordinator.ModelTOML `toml:"model"`
	}
	keys := hfRunKeys(cfg, "file:///models/x", "abc")
	if err := toml.Unmarshal([]byte(keys), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, keys)
	}
	m := doc.Model
	if m.RMSNormEps != 1e-6 || m.RopeScaling == nil || m.RopeScaling.Name != trainer.RopeLlama3 || m.RopeFactor != 8 || m.RopeLowFreqFactor != 1 ||
		m.RopeHighFreqFactor != 4 || m.RopeOriginalContext != 8192 || !m.QKVBias {
		t.Errorf("keys:\n%s", keys)
	}
	cfg.Knobs = trainer.Knobs{}
	keys = hfRunKeys(cfg, "file:///models/x", "abc")
	for _, k := range []string{"rms_norm_eps", "rope_scaling", "rope_factor", "qkv_bias"} {
		if strings.Contains(keys, k) {
			t.Errorf("default knobs print %s:\n%s", k, keys)
		}
	}
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

// run-config describe prints each shipped config's parameter count, which
// its metadata states too, and the trainer's footprint for every row: the
// run's contract first, the micro-batch asked for and 1, a GPU client's
// device and host memory and a CPU client's.
func TestRunConfigDescribe(t *testing.T) {
	files, err := filepath.Glob("../../../config/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("config/*.toml: %v", err)
	}
	for _, f := range files {
		out, errOut, code := runCLI(t, nil, "run-config", "describe", "--threads", "2", f)
		if code != 0 {
			t.Fatalf("describe %s: exit %d: %s", f, code, errOut)
		}
		p, err := coordinator.LoadParams(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := client.TrainerConfig(p.Model, client.DefaultMicroBatch)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, fmt.Sprintf("\nparameters: %d\n", cfg.Params())) {
			t.Errorf("%s: no parameter count %d in\n%s", f, cfg.Params(), out)
		}
		if want := fmt.Sprintf("; precision %s; grad_shards %d\n", cfg.Arith, coordinator.GradShards(p.Model.GradShardsLog2)); !strings.Contains(out, want) {
			t.Errorf("%s: no %q in\n%s", f, want, out)
		}
		if n := p.Metadata.NumParameters; n != 0 && n != uint64(cfg.Params()) {
			t.Errorf("%s: metadata num_parameters = %d, the model has %d", f, n, cfg.Params())
		}
		// 2 contracts x 2 micro-batches x 4 memories.
		rows := 0
		for _, l := range strings.Split(out, "\n") {
			if fs := strings.Fields(l); len(fs) == 12 && (fs[0] == "fp32" || fs[0] == "mx8") {
				rows++
			}
		}
		if rows != 16 {
			t.Errorf("%s: %d memory rows, want 16:\n%s", f, rows, out)
		}
	}

	// The 1.1B run's GPU client at micro-batch 1: the device total is the
	// trainer's, in GiB, on its own row.
	out, _, code := runCLI(t, nil, "run-config", "describe", "--members", "4", "--threads", "2", "../../../config/llama-1.1b.toml")
	if code != 0 {
		t.Fatal(out)
	}
	cfg, err := trainer.ConfigByName("llama-1.1b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arith, cfg.MicroBatch, cfg.GradShards = trainer.ArithMX8, 1, 8
	fp, err := trainer.Footprint(cfg, trainer.FootprintOptions{Optimizer: "demo", GPU: true, Threads: 2, Payloads: 4, Chunk: 64, TopK: 32})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mx8 1 GPU device %.2f %.2f %.2f", float64(fp.OnDevice.Weights)/(1<<30), float64(fp.OnDevice.Gradients)/(1<<30),
		float64(fp.OnDevice.Optimizer)/(1<<30))
	total := fmt.Sprintf(" %.2f", float64(fp.Device())/(1<<30))
	found := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		found = found || strings.HasPrefix(l, want) && strings.HasSuffix(l, total)
	}
	if !found || !strings.Contains(out, "parameters: 1071998976\n") || !strings.Contains(out, "applying 4 payload(s) a step, in GiB") {
		t.Errorf("no row %q ... %q in\n%s", want, total, out)
	}
	// And with activation recompute: fewer activations, the rest the same.
	cfg.Recompute = true
	if fp, err = trainer.Footprint(cfg, trainer.FootprintOptions{Optimizer: "demo", GPU: true, Threads: 2, Payloads: 4, Chunk: 64, TopK: 32}); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("mx8 1 GPU+recompute device %.2f %.2f %.2f %.2f", float64(fp.OnDevice.Weights)/(1<<30), float64(fp.OnDevice.Gradients)/(1<<30),
		float64(fp.OnDevice.Optimizer)/(1<<30), float64(fp.OnDevice.Activations)/(1<<30))
	total = fmt.Sprintf(" %.2f", float64(fp.Device())/(1<<30))
	found = false
	for _, l := range strings.Split(out, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		found = found || strings.HasPrefix(l, want) && strings.HasSuffix(l, total)
	}
	if !found {
		t.Errorf("no row %q ... %q in\n%s", want, total, out)
	}
}

// Bad input: one line, exit 2.
func TestRunConfigDescribeBadInput(t *testing.T) {
	dir := t.TempDir()
	partial := filepath.Join(dir, "partial.toml")
	if err := os.WriteFile(partial, []byte("[metadata]\nname = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.toml")
	if err := os.WriteFile(typo, []byte("[model]\nn_layers = 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "../../../config/tiny.toml"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "run-config describe takes FILE"},
		{"two files", []string{cfg, cfg}, "run-config describe takes FILE"},
		{"missing", []string{filepath.Join(dir, "none.toml")}, "none.toml"},
		{"unknown key", []string{typo}, "n_layers"},
		{"partial", []string{partial}, "needs the [config] and [model] sections"},
		{"micro-batch", []string{"--micro-batch-size", "0", cfg}, "--micro-batch-size must be in [1, 65536], not 0"},
		{"threads", []string{"--threads", "300", cfg}, "--threads must be in [0, 256], not 300"},
		{"members", []string{"--members", "-1", cfg}, "--members must be in [1, 65535], not -1"},
		{"late flag", []string{cfg, "--threads", "2"}, "put flags before arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"run-config", "describe"}, tc.args...)...)
			if code != exitBadInput || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", code, out, errOut, tc.want)
			}
		})
	}
}

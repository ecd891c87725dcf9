package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// Bad train and predownload flags are refused as bad input (exit 2) before anything starts.
func TestTrainBadInput(t *testing.T) {
	dir := t.TempDir()
	wallet := filepath.Join(dir, "id.json")
	if out, errOut, code := runCLI(t, nil, "keygen", "-o", wallet); code != 0 {
		t.Fatalf("keygen: %s %s", out, errOut)
	}
	base := []string{"train", "--run-id", "r", "-w", wallet, "--logs", "none"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"long run id", []string{"train", "--run-id", strings.Repeat("x", 33), "-w", wallet}, "run id"},
		{"missing wallet", []string{"train", "--run-id", "r", "-w", filepath.Join(dir, "none.json")}, "none.json"},
		{"bad device", append(base, "--device", "tpu"), "--device"},
		{"cuda index", append(base, "--device", "cuda:1"), "--device cuda:1"},
		{"not a device number", append(base, "--device", "cuda:0,x"), `"x" is not a CUDA device number`},
		{"data parallelism not a power of two", append(base, "--data-parallelism", "3"), "--data-parallelism 3: must be a power of two"},
		{"zero data parallelism", append(base, "--data-parallelism", "0"), "--data-parallelism 0: must be a power of two"},
		{"devices not a power of two", append(base, "--device", "cuda:0,1,2"), "3 groups of 1 devices; data parallelism needs a power of two groups"},
		{"devices and data parallelism disagree", append(base, "--device", "cuda:0", "--data-parallelism", "2"), "--device names 1 devices, but the parallelism needs 2 x 1 = 2"},
		{"devices and both parallelisms disagree", append(base, "--device", "cuda:0,1", "--data-parallelism", "2", "--tensor-parallelism", "2"), "needs 2 x 2 = 4"},
		{"data parallelism without the GPUs", append(base, "--data-parallelism", "64"), "--device auto --data-parallelism 64 --tensor-parallelism 1: "},
		{"data parallelism on the CPU", append(base, "--device", "cpu", "--data-parallelism", "2"), "parallelism needs CUDA devices, and --device cpu trains on the CPU"},
		{"tensor parallelism on the CPU", append(base, "--device", "cpu", "--tensor-parallelism", "2"), "--tensor-parallelism 2: parallelism needs CUDA devices"},
		{"zero tensor parallelism", append(base, "--tensor-parallelism", "0"), "--tensor-parallelism 0: must be 1 to 8"},
		{"tensor parallelism too large", append(base, "--tensor-parallelism", "9"), "--tensor-parallelism 9: must be 1 to 8"},
		{"devices not in groups", append(base, "--device", "cuda:0,1,2", "--tensor-parallelism", "2"), "3 devices, which do not split into groups of --tensor-parallelism 2"},
		{"tensor parallelism without the GPUs", append(base, "--tensor-parallelism", "2"), "--device auto --data-parallelism 1 --tensor-parallelism 2: needs CUDA devices"},
		{"unknown precision", append(base, "--precision", "fp32,fp16"), `--precision: unknown numeric contract "fp16"`},
		{"empty precision", append(base, "--precision", ""), "--precision"},
		{"zero micro-batch", append(base, "--micro-batch-size", "0"), "--micro-batch-size"},
		{"negative delay", append(base, "--dummy-training-delay-secs", "-1"), "--dummy-training-delay-secs"},
		{"two data sources", append(base, "--data-url", "http://127.0.0.1:1/", "--data-dir", dir), "not both"},
		{"bad authorizer", append(base, "--authorizer", "nope"), "--authorizer"},
		{"bad rpc", append(base, "--rpc", "ftp://x"), "--rpc"},
		{"predownload without a cache", []string{"predownload", "--run-id", "r"}, "--data-cache-dir"},
		{"missing hub token file", append(base, "--hub-upload", "--hub-token-file", filepath.Join(dir, "none")), "--hub-token-file"},
		{"ws without rpc", append(base, "--ws-rpc-2", "ws://127.0.0.1:1"), "--rpc-2"},
		{"unknown built-in task", append(base, "--eval-tasks", "builtin:nope"), "--eval-tasks"},
		{"missing task file", append(base, "--eval-tasks", filepath.Join(dir, "none.jsonl")), "none.jsonl"},
		{"negative eval limit", append(base, "--eval-limit", "-1"), "--eval-task-max-docs cannot be negative"},
		{"negative eval max docs", append(base, "--eval-task-max-docs", "-1"), "--eval-task-max-docs cannot be negative"},
		{"bad eval seed", append(base, "--eval-seed", "x"), "--eval-seed"},
		{"prompt task with a value", append(base, "--prompt-task=maybe"), "prompt-task"},
		{"zero gradient steps kept", append(base, "--write-gradients-dir", dir, "--keep-gradients-steps", "0"), "--keep-gradients-steps must be at least 1"},
		{"bad otlp url", append(base, "--oltp-metrics-url", "ftp://x"), "--oltp-metrics-url"},
		{"bad otlp interval", append(base, "--oltp-metrics-url", "http://127.0.0.1:1", "--oltp-report-interval", "soon"), "--oltp-report-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			if code != exitBadInput || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, errOut, exitBadInput, tc.want)
			}
		})
	}
}

// --device cuda where no GPU can be used is bad input, said in one line
// before anything touches the run; where a GPU can be used, the flag passes
// that check (and the client goes on to the unreachable RPC endpoint).
func TestTrainDeviceWithoutGPU(t *testing.T) {
	wallet := filepath.Join(t.TempDir(), "id.json")
	if out, errOut, code := runCLI(t, nil, "keygen", "-o", wallet); code != 0 {
		t.Fatalf("keygen: %s %s", out, errOut)
	}
	// The RPC endpoint answers nothing: the check comes before any request.
	_, errOut, code := runCLI(t, nil, "train", "--run-id", "r", "-w", wallet, "--logs", "none", "--rpc", "http://127.0.0.1:1", "--device", "cuda")
	if trainer.GPUAvailable() == nil {
		if strings.Contains(errOut, "no GPU") {
			t.Errorf("a GPU is usable here, yet: exit %d, stderr %q", code, errOut)
		}
		return
	}
	if code != exitBadInput || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "no GPU") {
		t.Errorf("exit %d, stderr %q; want exit %d and one line saying there is no GPU", code, errOut, exitBadInput)
	}
}

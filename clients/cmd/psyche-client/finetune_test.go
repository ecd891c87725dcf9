package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

var finetuneDir = filepath.Join("..", "..", "..", "config", "finetune")

// data prepare --examples writes a loss-masked dataset whose trained spans
// are the assistant's answers, and refuses bad examples, templates and
// flags with one line, exit 2, and nothing written.
func TestPrepareExamples(t *testing.T) {
	tmp := t.TempDir()
	tok := filepath.Join(finetuneDir, "tokenizer.json")
	out := filepath.Join(tmp, "ft")
	stdout, stderr, code := runCLI(t, nil, "data", "prepare", "--examples", filepath.Join(finetuneDir, "heldout.jsonl"),
		"--tokenizer", tok, "--seq-len", "128", "--out", out)
	if code != 0 || !strings.Contains(stdout, "loss-masked") || !regexp.MustCompile(`(?m)^root\s+[0-9a-f]{64}$`).MatchString(stdout) {
		t.Fatalf("prepare --examples: exit %d\n%s%s", code, stdout, stderr)
	}
	text, stderr, code := runCLI(t, nil, "data", "fetch", "--from", out, "--indices", "0", "--text", "--tokenizer-file", tok)
	// heldout.jsonl's first example: "Spell forest in capital letters." and its answer.
	if code != 0 || !strings.Contains(text, `"trained":["FOREST\u003c|im_end|\u003e\n"]`) {
		t.Fatalf("fetch --text: exit %d, %s%s", code, text, stderr)
	}

	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}`+"\n")
	bare := filepath.Join(tmp, "bare")
	os.Mkdir(bare, 0o755)
	data, _ := os.ReadFile(tok)
	os.WriteFile(filepath.Join(bare, "tokenizer.json"), data, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--examples", write("bad.jsonl", `{"messages": [{"role": "user"}]}`), "--tokenizer", tok}, "bad.jsonl:1"},
		{[]string{"--examples", write("forge.jsonl", `{"messages": [{"role": "user", "content": "x<|im_end|>"}, {"role": "assistant", "content": "y"}]}`), "--tokenizer", tok}, `spells the special token "<|im_end|>"`},
		{[]string{"--examples", good, "--tokenizer", tok, "--chat-template", write("macro.jinja", "{% macro m() %}{% endmacro %}")}, "macro"},
		{[]string{"--examples", good, "--tokenizer", "byte", "--chat-template", filepath.Join(finetuneDir, "tokenizer_config.json")}, "needs a tokenizer.json"},
		{[]string{"--examples", good, "--tokenizer", filepath.Join(bare, "tokenizer.json")}, "template"},
		{[]string{"--examples", good, "--tokenizer", tok, "--input", tmp}, "--examples replaces --input"},
		{[]string{"--tokenizer", tok, "--chat-template", filepath.Join(finetuneDir, "tokenizer_config.json")}, "--chat-template needs --examples"},
	} {
		dir := filepath.Join(tmp, "out")
		args := append([]string{"data", "prepare", "--seq-len", "64", "--out", dir}, tc.args...)
		_, stderr, code := runCLI(t, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line containing %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: wrote %s", tc.args, dir)
		}
	}
}

// sample --chat sends the prompt through the chat template and prints the
// reply on a line of its own; its bad flags exit 2 with one line.
func TestSampleChat(t *testing.T) {
	cfg, err := trainer.ConfigByName("llama-light")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Vocab, cfg.PaddedVocab = 512, 512
	tr, err := trainer.New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "m.safetensors")
	err = tr.SaveModel(model, nil)
	tr.Close()
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(finetuneDir, "tokenizer.json")
	args := []string{"sample", "--model", model, "--tokenizer", tok, "--prompt", "Add 2 and 3.", "--temperature", "0", "--max-tokens", "8"}
	out, stderr, code := runCLI(t, nil, append(args, "--chat")...)
	if code != 0 || !strings.HasPrefix(out, "Add 2 and 3.\n") {
		t.Fatalf("sample --chat: exit %d, %q %s", code, out, stderr)
	}
	plain, _, _ := runCLI(t, nil, args...)
	if plain == out {
		t.Errorf("--chat changed nothing: %q", out)
	}
	for _, bad := range [][]string{
		append(args, "--chat-template", filepath.Join(finetuneDir, "tokenizer_config.json")),
		{"sample", "--model", model, "--tokenizer", tok, "--chat", "--prompt", "<|im_start|>system"},
		{"sample", "--model", model, "--tokenizer", "byte", "--chat"},
	} {
		_, stderr, code := runCLI(t, nil, bad...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want 2 and one line", bad, code, stderr)
		}
	}
}

// config/finetune.toml pins the tokenizer config/finetune ships, and is a
// fine-tuning run.
func TestFinetuneConfigPinsItsTokenizer(t *testing.T) {
	p, err := coordinator.LoadParams(filepath.Join(finetuneDir, "..", "finetune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(finetuneDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model.TokenizerHash != sha256.Sum256(data) || !coordinator.FineTuning(p.Model) {
		t.Errorf("config/finetune.toml: tokenizer hash %x, data type %d; want %x (config/finetune/tokenizer.json) and finetuning",
			p.Model.TokenizerHash, p.Model.DataType, sha256.Sum256(data))
	}
}

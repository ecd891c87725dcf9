package evaluate

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// rewriteHeader writes a copy of the model file at path whose header edit
// has changed (data unchanged), and returns the copy's path.
func rewriteHeader(t *testing.T, path string, edit func(hdr map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var hdr map[string]any
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	edit(hdr)
	hj, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hj)))
	out = append(append(out, hj...), raw[8+n:]...)
	p := filepath.Join(t.TempDir(), "edited.safetensors")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// editConfig changes the psyche.config in a header.
func editConfig(t *testing.T, edit func(cfg map[string]any)) func(hdr map[string]any) {
	return func(hdr map[string]any) {
		md := hdr["__metadata__"].(map[string]any)
		var cfg map[string]any
		if err := json.Unmarshal([]byte(md["psyche.config"].(string)), &cfg); err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		b, _ := json.Marshal(cfg)
		md["psyche.config"] = string(b)
	}
}

// Every reason Check gives, and what it accepts.
func TestCheckReasons(t *testing.T) {
	gpt2 := modelFile(t, newModel(t, tinyGPT2, 1, 0), "gpt2")
	llama := modelFile(t, newModel(t, tinyLlama, 2, 0), "llama")
	cg, cl := constraintsFor(tinyGPT2), constraintsFor(tinyLlama)
	sub := func(path string) Submission { return submit(t, 0, path, "http://hub/comp", minerKey(0)) }

	for _, prec := range []string{trainer.ArithFP32, trainer.ArithMX8} {
		cg.Precision, cl.Precision = prec, prec
		if err := Check(gpt2, sub(gpt2), cg); err != nil {
			t.Errorf("a gpt2 model at %s: %v", prec, err)
		}
		if err := Check(llama, sub(llama), cl); err != nil {
			t.Errorf("a llama model at %s: %v", prec, err)
		}
	}
	cg.Precision, cl.Precision = trainer.ArithFP32, trainer.ArithFP32

	check := func(what, path string, s Submission, c Constraints, reason string) {
		t.Helper()
		wantInvalid(t, what, Check(path, s, c), reason)
	}
	check("a llama model in a gpt2 competition", llama, sub(llama), cg, ReasonArchitecture)
	check("a gpt2 model in a llama competition", gpt2, sub(gpt2), cl, ReasonArchitecture)

	s := sub(gpt2)
	s.Params++
	check("a parameter count other than declared", gpt2, s, cg, ReasonParams)
	small := cg
	small.MaxParams = sub(gpt2).Params - 1
	check("more parameters than max_params", gpt2, sub(gpt2), small, ReasonTooLarge)

	v128 := tinyGPT2
	v128.Vocab, v128.PaddedVocab = 128, 128
	p := modelFile(t, newModel(t, v128, 1, 0), "v128")
	check("a vocabulary of 128 for a dataset of 256", p, sub(p), cg, ReasonVocab)
	padded := tinyGPT2
	padded.PaddedVocab = 320 // the same vocabulary with padded rows: fine
	p = modelFile(t, newModel(t, padded, 1, 0), "padded")
	if err := Check(p, sub(p), cg); err != nil {
		t.Errorf("a padded vocabulary: %v", err)
	}

	short := tinyLlama
	short.SeqLen = testSeqLen / 2
	p = modelFile(t, newModel(t, short, 1, 0), "short")
	check("a context of 16 for sequences of 32", p, sub(p), cl, ReasonContext)

	// Malformed files, each its own way.
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not a safetensors file at all"), 0o644)
	check("garbage", garbage, sub(gpt2), cg, ReasonBadCheckpoint)
	tiny := filepath.Join(dir, "tiny")
	os.WriteFile(tiny, []byte{1, 2, 3}, 0o644)
	check("a 3-byte file", tiny, sub(gpt2), cg, ReasonBadCheckpoint)

	full := filepath.Join(dir, "full.safetensors")
	tr := newModel(t, tinyGPT2, 1, 2) // with AdamW's moments
	if err := tr.SaveCheckpoint(full, nil); err != nil {
		t.Fatal(err)
	}
	check("a full-state checkpoint", full, sub(gpt2), cg, ReasonBadCheckpoint)

	raw, _ := os.ReadFile(gpt2)
	cut := filepath.Join(dir, "cut")
	os.WriteFile(cut, raw[:len(raw)-4], 0o644)
	check("a truncated file", cut, sub(gpt2), cg, ReasonBadCheckpoint)
	long := filepath.Join(dir, "long")
	os.WriteFile(long, append(raw[:len(raw):len(raw)], 0, 0, 0, 0), 0o644)
	check("trailing bytes", long, sub(gpt2), cg, ReasonBadCheckpoint)

	nan := filepath.Join(dir, "nan")
	bad := append([]byte{}, raw...)
	binary.LittleEndian.PutUint32(bad[len(bad)-8:], math.Float32bits(float32(math.NaN())))
	os.WriteFile(nan, bad, 0o644)
	check("a NaN parameter", nan, sub(gpt2), cg, ReasonBadCheckpoint)

	p = rewriteHeader(t, gpt2, func(hdr map[string]any) { hdr["wpe"].(map[string]any)["dtype"] = "F16" })
	check("a tensor of another dtype", p, sub(gpt2), cg, ReasonBadCheckpoint)
	p = rewriteHeader(t, gpt2, func(hdr map[string]any) {
		hdr["lnfb"], hdr["lnfw"] = hdr["lnfw"], hdr["lnfb"] // in the wrong order
	})
	check("tensors out of storage order", p, sub(gpt2), cg, ReasonBadCheckpoint)
	p = rewriteHeader(t, gpt2, func(hdr map[string]any) {
		hdr["extra"] = map[string]any{"dtype": "F32", "shape": []int{0}, "data_offsets": []int{0, 0}}
	})
	check("an extra tensor", p, sub(gpt2), cg, ReasonBadCheckpoint)
	p = rewriteHeader(t, gpt2, editConfig(t, func(cfg map[string]any) { cfg["kv_heads"] = 1 }))
	check("a gpt2 config with a llama setting", p, sub(gpt2), cg, ReasonBadCheckpoint)
	p = rewriteHeader(t, gpt2, func(hdr map[string]any) { hdr["__metadata__"].(map[string]any)["psyche.version"] = "2" })
	check("another format version", p, sub(gpt2), cg, ReasonBadCheckpoint)

	// What a file says of the run or the machine is not the model's, and
	// is ignored: its own micro-batch, shard count or numeric contract.
	p = rewriteHeader(t, gpt2, editConfig(t, func(cfg map[string]any) {
		cfg["micro_batch"], cfg["grad_shards"], cfg["arith"] = 65536, 64, "mx8"
	}))
	if err := Check(p, sub(p), cg); err != nil {
		t.Errorf("a file naming its own micro-batch, shards and contract: %v", err)
	}

	// Errors of the validator's are not the model's.
	wantOrdinary(t, "a missing file", Check(filepath.Join(dir, "missing"), sub(gpt2), cg))
	if err := Check(gpt2, sub(gpt2), Constraints{}); err == nil || strings.Contains(err.Error(), "invalid model") {
		t.Errorf("unusable constraints: %v", err)
	}
}

// A model with a longer context than the competition's is evaluated cut
// to it, with the same bits as the whole model evaluated on the same
// sequences: GPT-2's position rows past the context and a Llama's longer
// rotary table are never read.
func TestLongerContextIsCutWithTheSameBits(t *testing.T) {
	data := testData(t)
	pages := []uint64{0, 7, 11}
	for _, base := range []trainer.Config{tinyGPT2, tinyLlama} {
		cfg := base
		cfg.SeqLen = 3 * testSeqLen
		tr := newModel(t, cfg, 5, 20)
		path := modelFile(t, tr, "long")
		c := constraintsFor(cfg)
		s := submit(t, 0, path, "http://hub/comp", minerKey(0))
		if err := Check(path, s, c); err != nil {
			t.Fatalf("%s: %v", cfg.Name, err)
		}
		losses, _, err := LossTable(context.Background(), []Model{{Submission: s, Path: path}}, data, pages, testSPP, c, TableOptions{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pages {
			idx := make([]uint64, testSPP)
			for k := range idx {
				idx[k] = p*testSPP + uint64(k)
			}
			seqs, err := data.Sequences(context.Background(), idx)
			if err != nil {
				t.Fatal(err)
			}
			in, tg := inputsTargets(t, data, seqs)
			want, err := tr.Eval(context.Background(), in, tg, testSeqLen)
			if err != nil {
				t.Fatal(err)
			}
			if math.Float32bits(losses[i]) != math.Float32bits(want) {
				t.Errorf("%s page %d: cut to %d tokens %v, the whole model %v", cfg.Name, p, testSeqLen, losses[i], want)
			}
		}
	}
}

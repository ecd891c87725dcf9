package trainer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	untied := llamaLight(t)
	untied.Untied = true
	for _, cfg := range []Config{lightConfig(t), untied} {
		t.Run(cfg.Name, func(t *testing.T) { checkpointRoundTrip(t, cfg) })
	}
}

func checkpointRoundTrip(t *testing.T, cfg Config) {
	text := MarkovText(14, 4*2*32+1)
	dir := t.TempDir()
	for _, opt := range []string{"demo", "adamw"} {
		t.Run(opt, func(t *testing.T) {
			a := newTrainer(t, cfg, 1)
			runSteps(t, a, opt, text, 0, 2, 2, 32)
			path := filepath.Join(dir, opt+".safetensors")
			if err := a.SaveCheckpoint(path, map[string]string{"run": "test"}); err != nil {
				t.Fatal(err)
			}
			want := runSteps(t, a, opt, text, 2, 2, 2, 32)

			b, err := LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if got := runSteps(t, b, opt, text, 2, 2, 2, 32); got[1] != want[1] {
				t.Fatalf("after loading the checkpoint: digest %x, original run %x", got[1][:8], want[1][:8])
			}
			// The file is plain safetensors: header names every tensor with its shape.
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var hdr map[string]json.RawMessage
			if err := json.Unmarshal(raw[8:8+binary.LittleEndian.Uint64(raw)], &hdr); err != nil {
				t.Fatal(err)
			}
			var wte stEntry
			if err := json.Unmarshal(hdr["wte"], &wte); err != nil || wte.DType != "F32" || len(wte.Shape) != 2 || wte.Shape[0] != 256 {
				t.Errorf("wte entry %+v, %v", wte, err)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if filepath.Ext(e.Name()) != ".safetensors" {
					t.Errorf("left behind %s", e.Name())
				}
			}
		})
	}
}

func TestBadCheckpointRejected(t *testing.T) {
	cfg := lightConfig(t)
	dir := t.TempDir()
	a := newTrainer(t, cfg, 1)
	runSteps(t, a, "adamw", MarkovText(1, 2*32+1), 0, 1, 2, 32)
	good := filepath.Join(dir, "good.safetensors")
	if err := a.SaveCheckpoint(good, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(binary.LittleEndian.Uint64(raw))
	other := cfg
	other.Layers = 2
	small := newTrainer(t, other, 1)
	smallPath := filepath.Join(dir, "small.safetensors")
	if err := small.SaveCheckpoint(smallPath, nil); err != nil {
		t.Fatal(err)
	}
	smallRaw, _ := os.ReadFile(smallPath)
	b := newTrainer(t, cfg, 2)
	before := digest(t, b, nil)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated data", raw[:len(raw)-4]},
		{"truncated header", raw[:8+hlen/2]},
		{"huge header length", append(binary.LittleEndian.AppendUint64(nil, 1<<40), raw[8:]...)},
		{"not JSON", append(append(append([]byte(nil), raw[:8]...), make([]byte, hlen)...), raw[8+hlen:]...)},
		{"other model", smallRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.safetensors")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := b.LoadCheckpoint(path); err == nil {
				t.Fatal("accepted")
			}
			if d := digest(t, b, nil); d != before {
				t.Fatal("a rejected checkpoint changed the trainer")
			}
		})
	}
	if err := a.SaveCheckpoint(filepath.Join(dir, "x"), map[string]string{"psyche.step": "1"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserved metadata key: got %v", err)
	}
	if err := b.LoadCheckpoint(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestSaveModel(t *testing.T) {
	for _, cfg := range []Config{lightConfig(t), llamaLight(t)} {
		t.Run(cfg.Name, func(t *testing.T) { checkSaveModel(t, cfg) })
	}
}

func checkSaveModel(t *testing.T, cfg Config) {
	dir := t.TempDir()
	text := MarkovText(3, 3*2*32+1)
	a := newTrainer(t, cfg, 1)
	runSteps(t, a, "demo", text, 0, 2, 2, 32)
	params, err := a.Params()
	if err != nil {
		t.Fatal(err)
	}
	// b is another replica: same seed and steps, but its own micro-batch and
	// thread count. Its model file must be the same bytes.
	other := cfg
	other.MicroBatch = 3
	b := newTrainer(t, other, 1)
	if err := b.SetThreads(1); err != nil {
		t.Fatal(err)
	}
	runSteps(t, b, "demo", text, 0, 2, 2, 32)
	meta := map[string]string{"run": "r1", "a": "x", "z": "y"}
	pa, pb := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if err := a.SaveModel(pa, meta); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveModel(pb, map[string]string{"z": "y", "run": "r1", "a": "x"}); err != nil {
		t.Fatal(err)
	}
	ra, _ := os.ReadFile(pa)
	rb, _ := os.ReadFile(pb)
	if !bytes.Equal(ra, rb) {
		t.Fatalf("equal parameters gave different model files (%d and %d bytes)", len(ra), len(rb))
	}
	if err := a.SaveModel(pb, meta); err != nil {
		t.Fatal(err)
	}
	if rb, _ = os.ReadFile(pb); !bytes.Equal(ra, rb) {
		t.Fatal("saving twice gave different bytes")
	}

	// Only the parameter tensors, in storage order, metadata first.
	hlen := binary.LittleEndian.Uint64(ra)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(ra[8:8+hlen], &hdr); err != nil {
		t.Fatal(err)
	}
	tensors, _ := a.Tensors()
	if len(hdr) != len(tensors)+1 || int(hlen)+8+4*a.NumParams() != len(ra) {
		t.Fatalf("%d header entries, %d bytes; want %d entries, %d bytes", len(hdr), len(ra), len(tensors)+1, int(hlen)+8+4*a.NumParams())
	}
	if !bytes.HasPrefix(ra[8:], []byte(`{"__metadata__":{"a":"x",`)) {
		t.Errorf("header starts %q", ra[8:40])
	}

	// A replica that joined late (its own step counter at 0, no momentum)
	// holding the same parameters writes the same bytes too.
	late := newTrainer(t, cfg, 5)
	if err := late.SetParams(params); err != nil {
		t.Fatal(err)
	}
	if err := late.SaveModel(pb, meta); err != nil {
		t.Fatal(err)
	}
	if rb, _ = os.ReadFile(pb); !bytes.Equal(ra, rb) {
		t.Fatal("a late replica with equal parameters wrote different bytes")
	}

	// Round trip: the loaded trainer is exactly a new trainer holding these
	// parameters (no optimizer state, counters at zero).
	c, err := LoadCheckpoint(pa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Config().MicroBatch != cfg.MicroBatch {
		t.Errorf("micro-batch %d, want the %s default %d", c.Config().MicroBatch, cfg.Name, cfg.MicroBatch)
	}
	stC, _ := c.ExportState()
	stLate, _ := late.ExportState()
	if !bytes.Equal(stC, stLate) {
		t.Fatal("the loaded model's state differs from a new trainer's with the same parameters")
	}
	// The method replaces a trained trainer's state the same way.
	if err := a.LoadCheckpoint(pa); err != nil {
		t.Fatal(err)
	}
	if stA, _ := a.ExportState(); !bytes.Equal(stA, stLate) {
		t.Fatal("LoadCheckpoint of a model file left optimizer state behind")
	}
	if got, want := runSteps(t, c, "adamw", text, 2, 1, 2, 32), runSteps(t, late, "adamw", text, 2, 1, 2, 32); got[0] != want[0] {
		t.Fatal("training from the loaded model differs from training a new trainer with the same parameters")
	}
}

func TestBadModelFileRejected(t *testing.T) {
	cfg := lightConfig(t)
	dir := t.TempDir()
	other := cfg
	other.Channels = 64
	small := newTrainer(t, other, 1)
	path := filepath.Join(dir, "small.safetensors")
	if err := small.SaveModel(path, nil); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, cfg, 2)
	runSteps(t, b, "demo", MarkovText(1, 2*32+1), 0, 1, 2, 32)
	before := digest(t, b, nil)
	if err := b.LoadCheckpoint(path); err == nil {
		t.Fatal("a model file of another shape was accepted")
	}
	raw, _ := os.ReadFile(path)
	good := filepath.Join(dir, "good.safetensors")
	if err := b.SaveModel(good, nil); err != nil {
		t.Fatal(err)
	}
	goodRaw, _ := os.ReadFile(good)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"other shape", raw},
		{"truncated", goodRaw[:len(goodRaw)-4]},
		{"extra data", append(append([]byte(nil), goodRaw...), 0, 0, 0, 0)},
		{"NaN parameter", append(append([]byte(nil), goodRaw[:len(goodRaw)-4]...), 0, 0, 0xc0, 0x7f)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.safetensors")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := b.LoadCheckpoint(p); err == nil {
				t.Fatal("accepted")
			}
			if d := digest(t, b, nil); d != before {
				t.Fatal("a rejected model file changed the trainer")
			}
		})
	}
	if err := b.SaveModel(filepath.Join(dir, "x"), map[string]string{"psyche.format": "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserved metadata key: got %v", err)
	}
}

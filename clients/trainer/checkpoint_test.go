package trainer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	cfg := lightConfig(t)
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

package evaluate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/competition/comptest"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

// The tests' models: byte-level (the dataset's 256 tokens), small enough
// that a table of a few models and pages takes well under a second.
var (
	tinyGPT2 = trainer.Config{Name: "tiny-gpt2", Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2, SeqLen: testSeqLen, MicroBatch: 4}

	tinyLlama = trainer.Config{Name: "tiny-llama", Arch: trainer.ArchLlama, Vocab: 256, PaddedVocab: 256, Layers: 1, Channels: 32, Heads: 2,
		KVHeads: 1, Hidden: 64, RopeTheta: 10000, SeqLen: testSeqLen, MicroBatch: 4}
)

const (
	testSeqLen = 32
	testSPP    = 4 // sequences a page
)

func constraintsFor(cfg trainer.Config) Constraints {
	arch := cfg.Arch
	if arch == "" {
		arch = trainer.ArchGPT2
	}
	return Constraints{Architecture: arch, MaxParams: 1 << 20, Vocab: 256, Tokenizer: tokenizer.ByteName, SeqLen: testSeqLen, Precision: trainer.ArithFP32}
}

// testData is a real dataset (comptest.Dataset): 12 documents of 4 KiB of
// Markov text, about 1500 sequences of testSeqLen tokens.
func testData(t testing.TB) provider.Provider {
	p, _ := comptest.Dataset(t, 12, testSeqLen)
	return p
}

// newModel is a fresh model of cfg from seed, trained steps AdamW steps
// on Markov text the dataset does not hold (another walk of its chain).
func newModel(t testing.TB, cfg trainer.Config, seed uint64, steps int) *trainer.Trainer {
	t.Helper()
	tr, err := trainer.New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	const batch = 8
	text := trainer.MarkovText(seed+77, steps*batch*cfg.SeqLen+1)
	for s := range steps {
		tok, tgt := trainer.Window(text, s*batch*cfg.SeqLen, batch, cfg.SeqLen)
		if _, err := tr.Step(context.Background(), tok, tgt, cfg.SeqLen); err != nil {
			t.Fatal(err)
		}
		if err := tr.AdamWStep(trainer.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, ClipNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// modelFile saves tr's parameters as a model file (trainer.SaveModel, what
// a miner uploads) and returns its path.
func modelFile(t testing.TB, tr *trainer.Trainer, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".safetensors")
	if err := tr.SaveModel(path, map[string]string{"miner": name}); err != nil {
		t.Fatal(err)
	}
	return path
}

// minerKey is a fixed miner pubkey per index.
func minerKey(i int) solana.PublicKey {
	return solana.PublicKeyFromBytes(func() []byte { h := sha256.Sum256([]byte(fmt.Sprintf("miner %d", i))); return h[:] }())
}

// submit is what a miner commits for the file at path.
func submit(t testing.TB, index int, path, repo string, miner solana.PublicKey) Submission {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The parameter count as a miner reads it off the file: the product
	// of each tensor's shape, summed.
	var hdr map[string]json.RawMessage
	if len(raw) >= 8 {
		if n := binary.LittleEndian.Uint64(raw); n <= uint64(len(raw)-8) {
			json.Unmarshal(raw[8:8+n], &hdr)
		}
	}
	var params uint64
	for name, v := range hdr {
		var e struct{ Shape []uint64 }
		if name == "__metadata__" || json.Unmarshal(v, &e) != nil {
			continue
		}
		n := uint64(1)
		for _, d := range e.Shape {
			n *= d
		}
		params += n
	}
	return Submission{Index: uint16(index), Miner: miner, Commitment: Commitment(raw, miner), Revision: sha256.Sum256(raw),
		Params: params, Slot: uint64(100 + index), Repo: repo}
}

// testHub is a real hub (comptest.StartHub).
type testHub struct{ *comptest.Hub }

func startHub(t testing.TB) *testHub { return &testHub{comptest.StartHub(t)} }

func (h *testHub) upload(t testing.TB, path string) { h.Upload(t, path) }

// quickFetch fails fast on transient errors (two tries, 1 ms apart).
var quickFetch = hub.FetchOptions{Attempts: 2, Backoff: 1e6}

// referenceHash is TableHash written out another way.
func referenceHash(losses []float32) [32]byte {
	h := sha256.New()
	for _, l := range losses {
		binary.Write(h, binary.LittleEndian, l)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func inputsTargets(t testing.TB, data provider.Provider, seqs [][]uint32) (in, tg []int32) {
	t.Helper()
	in, tg, err := provider.InputsAndTargets(data.Info(), seqs)
	if err != nil {
		t.Fatal(err)
	}
	return in, tg
}

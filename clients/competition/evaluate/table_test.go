package evaluate

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/psyche-go/psyche/clients/trainer"
)

// bits are a table's f32 bit patterns, for exact comparison.
func bits(losses []float32) []uint32 {
	out := make([]uint32, len(losses))
	for i, l := range losses {
		out[i] = math.Float32bits(l)
	}
	return out
}

// tableModels are three entries: a fresh model, a trained one, and one
// invalid, in a gpt2 competition.
func tableModels(t *testing.T) []Model {
	fresh := modelFile(t, newModel(t, tinyGPT2, 1, 0), "fresh")
	trained := modelFile(t, newModel(t, tinyGPT2, 2, 60), "trained")
	return []Model{
		{Submission: submit(t, 0, fresh, "http://hub/comp", minerKey(0)), Path: fresh},
		{Submission: submit(t, 1, trained, "http://hub/comp", minerKey(1)), Path: trained},
		{Submission: Submission{Index: 2}, Invalid: &Invalid{Reason: ReasonNotFound}},
	}
}

// The table is the same bits run after run, whatever the thread count or
// micro-batch, at either precision; an invalid model is +Inf everywhere;
// the hash is sha256 over the bits, model-major.
func TestLossTableIsBitExact(t *testing.T) {
	data := testData(t)
	models := tableModels(t)
	seed := [32]byte{1, 2, 3}
	pages, err := Pages(seed, data.Info().NumSequences, testSPP, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []string{trainer.ArithFP32, trainer.ArithMX8} {
		c := constraintsFor(tinyGPT2)
		c.Precision = prec
		var first []float32
		var firstHash [32]byte
		for _, opts := range []TableOptions{{Threads: 1}, {Threads: 2}, {Threads: 1}, {Threads: 2, MicroBatch: 1}, {Threads: 3, MicroBatch: 3}, {}} {
			losses, hash, err := LossTable(context.Background(), models, data, pages, testSPP, c, opts)
			if err != nil {
				t.Fatalf("%s %+v: %v", prec, opts, err)
			}
			if len(losses) != len(models)*len(pages) {
				t.Fatalf("%d losses for %d models and %d pages", len(losses), len(models), len(pages))
			}
			if hash != referenceHash(losses) || hash != TableHash(losses) {
				t.Fatalf("%s: the hash is not sha256 of the table's bits", prec)
			}
			if first == nil {
				first, firstHash = losses, hash
				t.Logf("%s: %v", prec, losses)
				continue
			}
			if !slices.Equal(bits(losses), bits(first)) || hash != firstHash {
				t.Errorf("%s %+v: table %v, first run %v", prec, opts, losses, first)
			}
		}
		for p := range pages {
			if l := first[2*len(pages)+p]; !math.IsInf(float64(l), 1) {
				t.Errorf("%s: the invalid model has %v on page %d, want +Inf", prec, l, p)
			}
			for m := range 2 {
				if l := first[m*len(pages)+p]; !(l > 0) || math.IsInf(float64(l), 0) {
					t.Errorf("%s: model %d has loss %v on page %d", prec, m, l, p)
				}
			}
		}
	}
}

// A model trained on the dataset's kind of text has a lower loss than a
// fresh one on every page a round draws.
func TestTrainedModelBeatsAFreshOne(t *testing.T) {
	data := testData(t)
	models := tableModels(t)[:2]
	pages, err := Pages([32]byte{9}, data.Info().NumSequences, testSPP, 16)
	if err != nil {
		t.Fatal(err)
	}
	losses, _, err := LossTable(context.Background(), models, data, pages, testSPP, constraintsFor(tinyGPT2), TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh, trained := losses[:len(pages)], losses[len(pages):]
	for p := range pages {
		if !(trained[p] < fresh[p]) {
			t.Errorf("page %d: trained %v, fresh %v", pages[p], trained[p], fresh[p])
		}
	}
	t.Logf("fresh %v\ntrained %v", fresh, trained)
	if fresh[0] < 5 || trained[0] > 4 { // ln 256 = 5.55; the chain's text has 32 symbols
		t.Errorf("fresh %v, trained %v: not the losses of an untrained and a trained model", fresh[0], trained[0])
	}
}

// Cancellation, and a model that was never checked, are errors of the
// table, not verdicts on a model.
func TestLossTableErrorsAreNotInvalid(t *testing.T) {
	data := testData(t)
	models := tableModels(t)
	c := constraintsFor(tinyGPT2)
	pages := []uint64{1, 2}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := LossTable(ctx, models, data, pages, testSPP, c, TableOptions{})
	wantOrdinary(t, "a cancelled table", err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled table: %v", err)
	}

	unchecked := slices.Clone(models)
	unchecked[0].Submission.Params++ // Check would refuse it
	_, _, err = LossTable(context.Background(), unchecked, data, pages, testSPP, c, TableOptions{})
	wantOrdinary(t, "a model Check would refuse", err)

	gone := slices.Clone(models)
	os.Remove(gone[1].Path)
	_, _, err = LossTable(context.Background(), gone, data, pages, testSPP, c, TableOptions{})
	wantOrdinary(t, "a checked file since deleted", err)

	_, _, err = LossTable(context.Background(), models, data, []uint64{data.Info().NumSequences / testSPP}, testSPP, c, TableOptions{})
	if err == nil {
		t.Error("a page past the dataset")
	}
	wrong := c
	wrong.SeqLen = 16
	if _, _, err := LossTable(context.Background(), models, data, pages, testSPP, wrong, TableOptions{}); err == nil {
		t.Error("a dataset of another sequence length")
	}
}

// A whole round through Evaluate, from a real hub: valid models, a copy
// under the original's commitment, a missing file, a model of another
// architecture. A second round over the cache downloads nothing and gives
// the same bits.
func TestEvaluateRound(t *testing.T) {
	data := testData(t)
	h := startHub(t)
	a := modelFile(t, newModel(t, tinyGPT2, 1, 30), "a")
	b := modelFile(t, newModel(t, tinyGPT2, 2, 0), "b")
	l := modelFile(t, newModel(t, tinyLlama, 3, 0), "llama")
	missing := modelFile(t, newModel(t, tinyGPT2, 4, 0), "missing") // never uploaded
	for _, p := range []string{a, b, l} {
		h.upload(t, p)
	}
	stolen := submit(t, 2, a, h.Repo, minerKey(0))
	stolen.Miner = minerKey(2)
	subs := []Submission{
		submit(t, 0, a, h.Repo, minerKey(0)),
		submit(t, 1, b, h.Repo, minerKey(1)),
		stolen,
		submit(t, 3, missing, h.Repo, minerKey(3)),
		submit(t, 4, l, h.Repo, minerKey(4)),
	}
	c := constraintsFor(tinyGPT2)
	dir := t.TempDir()
	opts := Options{Fetch: quickFetch}
	r, err := Evaluate(context.Background(), subs, dir, data, [32]byte{7}, 5, testSPP, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := []string{"", "", ReasonCommitmentMismatch, ReasonNotFound, ReasonArchitecture}
	for i, want := range wantReasons {
		switch got := r.Invalid[i]; {
		case want == "" && got != nil:
			t.Errorf("entry %d: invalid (%v)", i, got)
		case want != "" && (got == nil || got.Reason != want):
			t.Errorf("entry %d: %v, want %s", i, got, want)
		}
	}
	size := func(p string) int64 { st, _ := os.Stat(p); return st.Size() }
	// a's file once: the stolen copy has its revision, already in dir.
	if want := size(a) + size(b) + size(l); r.Downloaded != want {
		t.Errorf("downloaded %d bytes, want %d", r.Downloaded, want)
	}
	if len(r.Pages) != 5 || len(r.Losses) != 5*5 || r.TableHash != TableHash(r.Losses) {
		t.Fatalf("round: %d pages, %d losses", len(r.Pages), len(r.Losses))
	}
	for i := range subs {
		for p := range r.Pages {
			if l := r.Losses[i*5+p]; math.IsInf(float64(l), 1) != (r.Invalid[i] != nil) {
				t.Errorf("entry %d page %d: loss %v, invalid %v", i, p, l, r.Invalid[i])
			}
		}
	}
	again, err := Evaluate(context.Background(), subs, dir, data, [32]byte{7}, 5, testSPP, c, Options{Fetch: quickFetch, Table: TableOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Downloaded != 0 || again.TableHash != r.TableHash || !slices.Equal(bits(again.Losses), bits(r.Losses)) {
		t.Errorf("the second round downloaded %d bytes, hash %x (first %x)", again.Downloaded, again.TableHash, r.TableHash)
	}
	other, err := Evaluate(context.Background(), subs, dir, data, [32]byte{8}, 5, testSPP, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(other.Pages, r.Pages) || other.TableHash == r.TableHash {
		t.Error("another seed evaluated the same pages")
	}
}

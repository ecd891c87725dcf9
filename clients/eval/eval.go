// Package eval scores a model on multiple-choice tasks the way
// lm-evaluation-harness does: each choice is a continuation of the context,
// scored by its log-likelihood under the model; acc counts the items whose
// gold choice scores highest, acc_norm the same with each score divided by
// the choice's length in characters (the harness's len of a Python string).
//
// Tasks are JSONL files, one item per line:
//
//	{"context": "The capital of France is", "choices": [" Paris", " Rome"], "gold": 0}
//
// Convert writes HellaSwag, ARC, PIQA and MMLU in it as lm-evaluation-harness
// prompts them. BuiltinSOTU makes a task from the held-out corpus that
// needs nothing but this repo.
package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Item is one multiple-choice question. Each choice continues the context
// after TargetDelimiter (lm-evaluation-harness's target_delimiter, " " in
// the sets Convert writes; empty when the choices carry their own): the
// delimiter's tokens are scored with the choice's, and acc_norm divides by
// the choice's characters alone, as there.
type Item struct {
	Context         string   `json:"context"`
	Choices         []string `json:"choices"`
	Gold            int      `json:"gold"`
	TargetDelimiter string   `json:"target_delimiter,omitempty"`
}

// check says what makes it an item no task can hold.
func (it Item) check() error {
	if len(it.Choices) < 2 || it.Gold < 0 || it.Gold >= len(it.Choices) {
		return fmt.Errorf("want at least 2 choices and gold an index into them, got %d choices and gold %d", len(it.Choices), it.Gold)
	}
	for i, c := range it.Choices {
		if c == "" {
			return fmt.Errorf("choice %d is empty", i)
		}
	}
	return nil
}

// Task is a named list of items.
type Task struct {
	Name  string
	Key   string // a short name (at most KeyLen bytes): what a client publishes on chain
	Items []Item
}

// KeyLen bounds a task's Key: the Coordinator's report_eval takes 32 bytes.
const KeyLen = 32

// Result of a task.
type Result struct {
	Task    string
	Key     string
	N       int     // items scored
	Acc     float64 // fraction whose gold choice has the highest log-likelihood
	AccNorm float64 // the same, per character of the choice
	Chance  float64 // mean of 1/len(choices): what guessing scores
}

// ErrTask marks a task file that cannot be used.
var ErrTask = errors.New("unusable eval task")

// Load reads a JSONL task file; every line must be a valid item.
func Load(path string) (Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return Task{}, fmt.Errorf("%w: %v", ErrTask, err)
	}
	defer f.Close()
	t := Task{Name: path, Key: fileKey(path)}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var it Item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			return Task{}, fmt.Errorf("%w: %s:%d: %v", ErrTask, path, line, err)
		}
		if err := it.check(); err != nil {
			return Task{}, fmt.Errorf("%w: %s:%d: %v", ErrTask, path, line, err)
		}
		t.Items = append(t.Items, it)
	}
	if err := sc.Err(); err != nil {
		return Task{}, fmt.Errorf("%w: %s: %v", ErrTask, path, err)
	}
	if len(t.Items) == 0 {
		return Task{}, fmt.Errorf("%w: %s holds no items", ErrTask, path)
	}
	return t, nil
}

// DefaultSeed is the seed Task.Sample draws with unless told otherwise
// (the reference client's --eval-seed default).
const DefaultSeed = 42

// Builtin names the built-in task in task lists; DefaultBuiltinItems is
// how many items it has unless asked otherwise.
const (
	Builtin             = "builtin:sotu"
	DefaultBuiltinItems = 200
)

// Open reads the task spec names: Builtin (builtinItems items) or a JSONL file.
func Open(ctx context.Context, spec string, builtinItems int) (Task, error) {
	switch {
	case spec == Builtin:
		return BuiltinSOTU(ctx, builtinItems, BuiltinContextBytes, BuiltinChoiceBytes)
	case strings.HasPrefix(spec, "builtin:"):
		return Task{}, fmt.Errorf("%w: unknown built-in task %q (known: %s)", ErrTask, spec, Builtin)
	}
	return Load(spec)
}

// fileKey is a task file's name without its directory and extension,
// cut to KeyLen bytes at a character boundary.
func fileKey(path string) string {
	k := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	for len(k) > KeyLen {
		_, size := utf8.DecodeLastRuneInString(k)
		k = k[:len(k)-size]
	}
	return k
}

// Run scores every item of task (Sample picks a subset). Sequences longer
// than the model's context keep their last tokens (the choice always fits
// whole, or the item is an error).
func Run(ctx context.Context, tr *trainer.Trainer, tok tokenizer.Tokenizer, task Task) (Result, error) {
	r := Result{Task: task.Name, Key: task.Key}
	items := task.Items
	var acc, accNorm, chance float64
	for i, it := range items {
		best, bestNorm := math.Inf(-1), math.Inf(-1)
		pick, pickNorm := -1, -1
		for c, choice := range it.Choices {
			ll, err := logLikelihood(ctx, tr, tok, it.Context, it.TargetDelimiter+choice)
			if err != nil {
				return Result{}, fmt.Errorf("%s item %d choice %d: %w", task.Name, i, c, err)
			}
			if ll > best {
				best, pick = ll, c
			}
			if n := ll / float64(utf8.RuneCountInString(choice)); n > bestNorm {
				bestNorm, pickNorm = n, c
			}
		}
		if pick == it.Gold {
			acc++
		}
		if pickNorm == it.Gold {
			accNorm++
		}
		chance += 1 / float64(len(it.Choices))
	}
	r.N = len(items)
	r.Acc, r.AccNorm, r.Chance = acc/float64(r.N), accNorm/float64(r.N), chance/float64(r.N)
	return r, nil
}

// logLikelihood is the sum of log p(choice token | everything before it).
func logLikelihood(ctx context.Context, tr *trainer.Trainer, tok tokenizer.Tokenizer, context, choice string) (float64, error) {
	cids, err := tok.Encode(context)
	if err != nil {
		return 0, fmt.Errorf("%w: context: %v", ErrTask, err)
	}
	all, err := tok.Encode(context + choice)
	if err != nil {
		return 0, fmt.Errorf("%w: choice: %v", ErrTask, err)
	}
	// The choice's tokens are those after the context's (a BPE may merge
	// across the boundary: then the boundary moves to the first difference).
	start := 0
	for start < len(cids) && start < len(all) && cids[start] == all[start] {
		start++
	}
	start = max(start, 1) // the first token has no prediction
	seq := tr.Config().SeqLen + 1
	if len(all)-start >= seq {
		return 0, fmt.Errorf("%w: the choice takes %d tokens, more than the model's context of %d", ErrTask, len(all)-start, seq-1)
	}
	if len(all) > seq {
		drop := len(all) - seq
		all, start = all[drop:], start-drop
	}
	in := make([]int32, len(all)-1)
	for i := range in {
		in[i] = int32(all[i])
	}
	logits, err := tr.Logits(ctx, in, len(in))
	if err != nil {
		return 0, err
	}
	V := tr.Config().Vocab
	var ll float64
	for p := start; p < len(all); p++ {
		row := logits[(p-1)*V : p*V]
		ll += logSoftmax(row, int(all[p]))
	}
	return ll, nil
}

// logSoftmax returns log softmax(row)[i] in float64.
func logSoftmax(row []float32, i int) float64 {
	top := math.Inf(-1)
	for _, v := range row {
		top = math.Max(top, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - top)
	}
	return float64(row[i]) - top - math.Log(sum)
}

package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/trainer"
)

// Each format's rows (written for this test, in the datasets' field
// layouts) become the prompts and choices lm-evaluation-harness scores:
// its templates, HellaSwag's preprocess and Python's capitalize (checked
// against them by hand with Python), MMLU's subject description, ARC's two
// row layouts, answers as integers, strings or letters.
func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		format, in string
		want       []Item
	}{
		{"hellaswag", `{"ind": 1, "activity_label": "Baking cookies", "ctx_a": "A woman puts flour in a bowl.", "ctx_b": "SHE then [title] adds eggs", ` +
			`"endings": ["  stirs the batter [step] slowly.", "throws the bowl.", "sings a song.", "leaves the kitchen."], "label": "0"}` + "\n\n" +
			`{"activity_label": "Tying a knot", "ctx_a": "A man holds a rope.", "ctx_b": "he", "endings": ["loops it.", "eats it."], "label": 1}`,
			[]Item{
				{Context: "Baking cookies: A woman puts flour in a bowl. She then. adds eggs", Choices: []string{"stirs the batter slowly.", "throws the bowl.", "sings a song.", "leaves the kitchen."}, Gold: 0, TargetDelimiter: " "},
				{Context: "Tying a knot: A man holds a rope. He", Choices: []string{"loops it.", "eats it."}, Gold: 1, TargetDelimiter: " "},
			}},
		{"arc", `{"id": "q1", "question": "Which is a liquid at room temperature?", "choices": {"text": ["iron", "water", "salt"], "label": ["A", "B", "C"]}, "answerKey": "B"}` + "\n" +
			`{"id": "q2", "question": {"stem": "What do plants take in?", "choices": [{"text": "light", "label": "1"}, {"text": "sound", "label": "2"}]}, "answerKey": "1"}`,
			[]Item{
				{Context: "Question: Which is a liquid at room temperature?\nAnswer:", Choices: []string{"iron", "water", "salt"}, Gold: 1, TargetDelimiter: " "},
				{Context: "Question: What do plants take in?\nAnswer:", Choices: []string{"light", "sound"}, Gold: 0, TargetDelimiter: " "},
			}},
		{"piqa", `{"goal": "Open a jar.", "sol1": "Twist the lid.", "sol2": "Paint the lid.", "label": 0}`,
			[]Item{{Context: "Question: Open a jar.\nAnswer:", Choices: []string{"Twist the lid.", "Paint the lid."}, Gold: 0, TargetDelimiter: " "}}},
		{"mmlu", `{"question": " What is 2 + 2? ", "subject": "elementary_mathematics", "choices": ["3", "4", "5", "22"], "answer": 1}` + "\n" +
			`{"question": "Pick D.", "subject": "logic", "choices": ["a", "b", "c", "d"], "answer": "D"}`,
			[]Item{
				{Context: "The following are multiple choice questions (with answers) about elementary mathematics.\n\nWhat is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 22\nAnswer:",
					Choices: []string{"A", "B", "C", "D"}, Gold: 1, TargetDelimiter: " "},
				{Context: "The following are multiple choice questions (with answers) about logic.\n\nPick D.\nA. a\nB. b\nC. c\nD. d\nAnswer:",
					Choices: []string{"A", "B", "C", "D"}, Gold: 3, TargetDelimiter: " "},
			}},
	} {
		var out bytes.Buffer
		n, err := Convert(tc.format, "in.jsonl", strings.NewReader(tc.in), &out)
		if err != nil || n != len(tc.want) {
			t.Fatalf("%s: %d items, %v", tc.format, n, err)
		}
		var got []Item
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var it Item
			if err := json.Unmarshal([]byte(l), &it); err != nil {
				t.Fatalf("%s: %q: %v", tc.format, l, err)
			}
			got = append(got, it)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.format, got, tc.want)
		}
	}
}

// A row that is not an item of its format names its line and what is
// wrong, and nothing is written.
func TestConvertBadInput(t *testing.T) {
	for _, tc := range []struct{ format, in, want string }{
		{"squad", `{}`, `unknown format "squad" (known: arc, hellaswag, mmlu, piqa)`},
		{"arc", `{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"}` + "\n" + `not json`, "in.jsonl:2: not a JSON object"},
		{"arc", `{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"}`, `in.jsonl:1: arc: answerKey "E" is none of the labels`},
		{"arc", `{"question": 7, "answerKey": "A"}`, `in.jsonl:1: arc: "question" is neither a string nor {"stem", "choices"}`},
		{"hellaswag", `{"activity_label": "a", "ctx_a": "b", "ctx_b": "c", "label": 0}`, `in.jsonl:1: hellaswag: no "endings"`},
		{"hellaswag", `{"activity_label": "a", "ctx_a": "b", "ctx_b": "c", "endings": ["x", "y"], "label": 2}`, "in.jsonl:1: hellaswag: want at least 2 choices and gold an index"},
		{"piqa", `{"goal": "g", "sol1": "a", "sol2": "b"}`, `in.jsonl:1: piqa: no "label" (PIQA's own files keep the labels in a separate .lst`},
		{"mmlu", `{"question": "q", "subject": "s", "choices": ["a", "b"], "answer": 0}`, `in.jsonl:1: mmlu: "choices": 2, MMLU has 4`},
		{"mmlu", `{"question": "q", "subject": "s", "choices": ["a", "b", "c", "d"], "answer": "E"}`, `in.jsonl:1: mmlu: "answer": "E" is not an answer`},
		{"piqa", "\n\n", "in.jsonl holds no items"},
	} {
		var out bytes.Buffer
		_, err := Convert(tc.format, "in.jsonl", strings.NewReader(tc.in), &out)
		if !errors.Is(err, ErrTask) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: %v; want ErrTask in one line with %q", tc.format, tc.in, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s %q: wrote %q", tc.format, tc.in, out.String())
		}
	}
}

// Sample keeps the items whose SplitMix64 keys under the seed are smallest,
// in file order: pinned for seed 42 (the default) and 7, so that the
// subset never changes under a run's clients.
func TestSample(t *testing.T) {
	task := Task{Name: "t"}
	for i := range 10 {
		task.Items = append(task.Items, Item{Context: string(rune('a' + i)), Choices: []string{"x", "y"}})
	}
	pick := func(s Task) string {
		var b strings.Builder
		for _, it := range s.Items {
			b.WriteString(it.Context)
		}
		return b.String()
	}
	for _, tc := range []struct {
		n    int
		seed uint64
		want string
	}{{3, 42, "beg"}, {3, 7, "bfi"}, {0, 42, "abcdefghij"}, {10, 42, "abcdefghij"}, {11, 7, "abcdefghij"}} {
		if got := pick(task.Sample(tc.n, tc.seed)); got != tc.want {
			t.Errorf("Sample(%d, %d) = %q, want %q", tc.n, tc.seed, got, tc.want)
		}
	}
	if len(task.Items) != 10 {
		t.Error("Sample changed the task it was called on")
	}
}

// An item's target delimiter is scored with each choice, as if the choice
// began with it, while acc_norm divides by the choice's own characters: the
// converted form of an item scores as its hand-written form with the
// delimiter in the choices for acc, and per character of the bare choices
// ("é" one, though two bytes).
func TestTargetDelimiter(t *testing.T) {
	cfg, err := trainer.ConfigByName("light")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, tok := context.Background(), tokenizer.Byte{}
	bare := Task{Name: "bare", Items: []Item{{Context: "The cat", Choices: []string{"sat down", "ran é"}, Gold: 0, TargetDelimiter: " "}}}
	baked := Task{Name: "baked", Items: []Item{{Context: "The cat", Choices: []string{" sat down", " ran é"}, Gold: 0}}}
	a, err := Run(ctx, tr, tok, bare)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(ctx, tr, tok, baked)
	if err != nil {
		t.Fatal(err)
	}
	if a.Acc != b.Acc {
		t.Errorf("acc %v with the delimiter apart, %v with it in the choices", a.Acc, b.Acc)
	}
	var norm [2]float64
	for c, choice := range bare.Items[0].Choices {
		ll, err := logLikelihood(ctx, tr, tok, "The cat", " "+choice)
		if err != nil {
			t.Fatal(err)
		}
		norm[c] = ll / float64(utf8.RuneCountInString(choice))
	}
	if want := map[bool]float64{true: 1, false: 0}[norm[0] > norm[1]]; a.AccNorm != want {
		t.Errorf("acc_norm %v, want %v from the scores per bare character %v", a.AccNorm, want, norm)
	}
}

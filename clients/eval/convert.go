package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Formats are the public multiple-choice sets Convert reads, as
// lm-evaluation-harness formats them (its task YAML and utils in the
// comments below): one JSON object per line, as the datasets' JSONL
// exports write them.
var Formats = []string{"arc", "hellaswag", "mmlu", "piqa"}

// Convert reads the JSONL of a public multiple-choice set in format (one of
// Formats) from in and writes our task items to out: the prompt and choices
// lm-evaluation-harness scores, with its target delimiter, so that acc and
// acc_norm mean what they mean there. A line that is not an item of the
// format is an error naming it (name:line), and nothing is written then:
// the items are written once every line has been read. It returns how many
// items it wrote.
func Convert(format, name string, in io.Reader, out io.Writer) (int, error) {
	conv, ok := converters[format]
	if !ok {
		return 0, fmt.Errorf("%w: unknown format %q (known: %s)", ErrTask, format, strings.Join(Formats, ", "))
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var items []Item
	for line := 1; sc.Scan(); line++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			return 0, fmt.Errorf("%w: %s:%d: not a JSON object: %v", ErrTask, name, line, err)
		}
		it, err := conv(doc)
		if err != nil {
			return 0, fmt.Errorf("%w: %s:%d: %s: %v", ErrTask, name, line, format, err)
		}
		if err := it.check(); err != nil {
			return 0, fmt.Errorf("%w: %s:%d: %s: %v", ErrTask, name, line, format, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrTask, name, err)
	}
	if len(items) == 0 {
		return 0, fmt.Errorf("%w: %s holds no items", ErrTask, name)
	}
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return 0, err
		}
	}
	return len(items), bw.Flush()
}

var converters = map[string]func(map[string]json.RawMessage) (Item, error){
	"arc":       convertARC,
	"hellaswag": convertHellaSwag,
	"mmlu":      convertMMLU,
	"piqa":      convertPIQA,
}

// field decodes doc[key] into v, naming the key when it is missing or of
// another type.
func field(doc map[string]json.RawMessage, key string, v any) error {
	raw, ok := doc[key]
	if !ok {
		return fmt.Errorf("no %q", key)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%q: %v", key, err)
	}
	return nil
}

// kv is a key of a row and where its value goes (fields).
type kv struct {
	key string
	v   any
}

// fields decodes each of fs from doc (field), stopping at the first error.
func fields(doc map[string]json.RawMessage, fs ...kv) error {
	for _, f := range fs {
		if err := field(doc, f.key, f.v); err != nil {
			return err
		}
	}
	return nil
}

// index reads a gold answer written as an integer, a string of one, or
// (letters non-empty) one of letters.
func index(doc map[string]json.RawMessage, key string, letters []string) (int, error) {
	raw, ok := doc[key]
	if !ok {
		return 0, fmt.Errorf("no %q", key)
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%q: neither an integer nor a string", key)
	}
	for i, l := range letters {
		if s == l {
			return i, nil
		}
	}
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("%q: %q is not an answer", key, s)
}

// ARC (ai2_arc, arc_easy.yaml / arc_challenge.yaml): "Question:
// {question}\nAnswer:", the choices' texts, gold the index of answerKey in
// their labels. Both the Hugging Face rows ({"question": "...", "choices":
// {"text": [...], "label": [...]}, "answerKey"}) and AI2's original JSONL
// ({"question": {"stem", "choices": [{"text", "label"}]}, "answerKey"}).
func convertARC(doc map[string]json.RawMessage) (Item, error) {
	var question string
	var texts, labels []string
	if field(doc, "question", &question) != nil {
		var q struct {
			Stem    string `json:"stem"`
			Choices []struct {
				Text  string `json:"text"`
				Label string `json:"label"`
			} `json:"choices"`
		}
		if err := field(doc, "question", &q); err != nil || q.Stem == "" {
			return Item{}, fmt.Errorf(`"question" is neither a string nor {"stem", "choices"}`)
		}
		question = q.Stem
		for _, c := range q.Choices {
			texts, labels = append(texts, c.Text), append(labels, c.Label)
		}
	} else {
		var c struct {
			Text  []string `json:"text"`
			Label []string `json:"label"`
		}
		if err := field(doc, "choices", &c); err != nil {
			return Item{}, err
		}
		if len(c.Text) != len(c.Label) {
			return Item{}, fmt.Errorf(`"choices": %d texts but %d labels`, len(c.Text), len(c.Label))
		}
		texts, labels = c.Text, c.Label
	}
	var key string
	if err := field(doc, "answerKey", &key); err != nil {
		return Item{}, err
	}
	gold := -1
	for i, l := range labels {
		if l == key {
			gold = i
		}
	}
	if gold < 0 {
		return Item{}, fmt.Errorf("answerKey %q is none of the labels %q", key, labels)
	}
	return Item{Context: "Question: " + question + "\nAnswer:", Choices: texts, Gold: gold, TargetDelimiter: " "}, nil
}

// HellaSwag (hellaswag.yaml, utils.py): the query preprocess(activity_label
// + ": " + ctx_a + " " + capitalize(ctx_b)), the preprocessed endings, gold
// label (an integer or a string of one).
func convertHellaSwag(doc map[string]json.RawMessage) (Item, error) {
	var activity, ctxA, ctxB string
	var endings []string
	if err := fields(doc, kv{"activity_label", &activity}, kv{"ctx_a", &ctxA}, kv{"ctx_b", &ctxB}, kv{"endings", &endings}); err != nil {
		return Item{}, err
	}
	gold, err := index(doc, "label", nil)
	if err != nil {
		return Item{}, err
	}
	choices := make([]string, len(endings))
	for i, e := range endings {
		choices[i] = hellaswagPreprocess(e)
	}
	query := hellaswagPreprocess(activity + ": " + ctxA + " " + pythonCapitalize(ctxB))
	return Item{Context: query, Choices: choices, Gold: gold, TargetDelimiter: " "}, nil
}

var hellaswagBrackets = regexp.MustCompile(`\[.*?\]`)

// hellaswagPreprocess is utils.py's preprocess: strip, " [title]" to ". ",
// drop bracketed WikiHow artifacts, then one pass of double spaces to one.
func hellaswagPreprocess(s string) string {
	s = strings.TrimFunc(s, unicode.IsSpace)
	s = strings.ReplaceAll(s, " [title]", ". ")
	s = hellaswagBrackets.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "  ", " ")
}

// pythonCapitalize is Python's str.capitalize: the first character upper
// case (title case, as Python uses), the rest lower case.
func pythonCapitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if size == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[size:])
}

// MMLU (mmlu/default: _default_template_yaml and each subject's
// description): "The following are multiple choice questions (with
// answers) about {subject, _ as spaces}.\n\n{question}\nA. {choice 0}\nB.
// ...\nAnswer:", the choices " A" to " D", gold answer (an index or a
// letter). The Hugging Face rows ({"question", "subject", "choices",
// "answer"}).
func convertMMLU(doc map[string]json.RawMessage) (Item, error) {
	var question, subject string
	var choices []string
	if err := fields(doc, kv{"question", &question}, kv{"subject", &subject}, kv{"choices", &choices}); err != nil {
		return Item{}, err
	}
	letters := []string{"A", "B", "C", "D"}
	if len(choices) != len(letters) {
		return Item{}, fmt.Errorf(`"choices": %d, MMLU has 4`, len(choices))
	}
	gold, err := index(doc, "answer", letters)
	if err != nil {
		return Item{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The following are multiple choice questions (with answers) about %s.\n\n", strings.ReplaceAll(subject, "_", " "))
	b.WriteString(strings.TrimFunc(question, unicode.IsSpace))
	for i, c := range choices {
		fmt.Fprintf(&b, "\n%s. %s", letters[i], c)
	}
	b.WriteString("\nAnswer:")
	return Item{Context: b.String(), Choices: letters, Gold: gold, TargetDelimiter: " "}, nil
}

// PIQA (piqa.yaml): "Question: {goal}\nAnswer:", the choices sol1 and sol2,
// gold label. PIQA's own files keep the labels apart (train-labels.lst):
// rows without "label" are refused; the Hugging Face rows carry it.
func convertPIQA(doc map[string]json.RawMessage) (Item, error) {
	var goal, sol1, sol2 string
	if err := fields(doc, kv{"goal", &goal}, kv{"sol1", &sol1}, kv{"sol2", &sol2}); err != nil {
		return Item{}, err
	}
	gold, err := index(doc, "label", nil)
	if err != nil {
		return Item{}, fmt.Errorf(`%v (PIQA's own files keep the labels in a separate .lst: use rows that carry "label", as the Hugging Face export does)`, err)
	}
	return Item{Context: "Question: " + goal + "\nAnswer:", Choices: []string{sol1, sol2}, Gold: gold, TargetDelimiter: " "}, nil
}

// Sample is task with at most maxDocs of its items (0 or more than it has:
// all): those whose keys under seed are smallest (a SplitMix64 of the seed
// and the item's index), kept in the file's order. The same file, seed and
// count give the same items on every machine and in every version, so the
// clients of a run score the same subset (train --eval-seed, the seed's
// default 42).
func (t Task) Sample(maxDocs int, seed uint64) Task {
	if maxDocs <= 0 || maxDocs >= len(t.Items) {
		return t
	}
	idx := make([]int, len(t.Items))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) uint64 { return splitMix64(seed + uint64(i)*0x9e3779b97f4a7c15) }
	sort.Slice(idx, func(a, b int) bool { return key(idx[a]) < key(idx[b]) })
	idx = idx[:maxDocs]
	sort.Ints(idx)
	out := t
	out.Items = make([]Item, maxDocs)
	for i, j := range idx {
		out.Items[i] = t.Items[j]
	}
	return out
}

// splitMix64 is SplitMix64's output function (Steele, Lea and Flood 2014).
func splitMix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

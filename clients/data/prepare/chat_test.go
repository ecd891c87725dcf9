package prepare

import (
	"slices"
	"strings"
	"testing"

	"github.com/psyche-go/psyche/clients/data/chat"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

// A conversation is tokenized whole, as inference tokenizes it, and the
// mask follows the answers: with SentencePiece-style tokenizers, encoding
// each segment alone would start every answer with a second ▁.
func TestChatExampleTokenizedWhole(t *testing.T) {
	tmpl, _, _, err := chat.LoadTemplate("../chat/testdata/templates/llama2.jinja")
	if err != nil {
		t.Fatal(err)
	}
	vars := chat.Vars{BOS: "<s>", EOS: "</s>"}
	ex := chat.Example{Messages: []chat.Message{
		{Role: "user", Content: "Spell forest in capitals."}, {Role: "assistant", Content: "FOREST, in capitals."},
		{Role: "user", Content: "And river?"}, {Role: "assistant", Content: "RIVER"},
	}}
	for _, file := range []string{"spm.json", "spm-legacy.json", "spm-metaspace.json", "llama3.json"} {
		js, err := tokenizer.LoadJSON("../tokenizer/testdata/hfjson/" + file)
		if err != nil {
			t.Fatal(err)
		}
		full, err := tmpl.Render(ex.Messages, false, vars)
		if err != nil {
			t.Fatal(err)
		}
		want, err := js.EncodeSpecial(full)
		if err != nil {
			t.Fatal(err)
		}
		e := segmentEncoder{tok: js, tmpl: tmpl, vars: vars, special: js}
		ids, train, err := e.encode(ex)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s: tokens %v, the whole conversation's %v", file, ids, want)
			continue
		}
		// The trained tokens spell the answers and their ends, nothing else.
		var answers []string
		for i := 0; i < len(ids); {
			if !train[i] {
				i++
				continue
			}
			j := i
			for j < len(ids) && train[j] {
				j++
			}
			s, err := js.Decode(ids[i:j])
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, strings.TrimSpace(s))
			i = j
		}
		if got := strings.Join(answers, "|"); got != "FOREST, in capitals. </s>|RIVER </s>" && got != "FOREST, in capitals.</s>|RIVER</s>" {
			t.Errorf("%s: trained %q", file, got)
		}
	}
}

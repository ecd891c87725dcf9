package chat

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// show formats segments with their text quoted.
func show(segs []Segment) string {
	var parts []string
	for _, s := range segs {
		parts = append(parts, fmt.Sprintf("{%q %v}", s.Text, s.Train))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestSegmentsKnownSplits(t *testing.T) {
	g := loadGoldens(t)
	for _, tc := range []struct {
		template     string
		vars         Vars
		conversation int
		want         []Segment
	}{
		{"mistral", Vars{"<s>", "</s>"}, 3, []Segment{
			{"<s>[INST] Name a colour. [/INST]", false},
			{"Blue.</s>", true},
			{"[INST] Another one? [/INST]", false},
		}},
		{"llama2", Vars{"<s>", "</s>"}, 0, []Segment{
			{"<s>[INST] Hello there. [/INST]", false},
			{" Hi! How can I help? </s>", true},
		}},
		{"qwen25", Vars{EOS: "<|im_end|>"}, 2, []Segment{
			{"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCount to three.<|im_end|>\n<|im_start|>assistant\n", false},
			{"1, 2, 3.<|im_end|>\n", true},
			{"<|im_start|>user\nNow backwards.<|im_end|>\n<|im_start|>assistant\n", false},
			{"3, 2, 1.<|im_end|>\n", true},
		}},
		{"zephyr", Vars{"<s>", "</s>"}, 0, []Segment{
			{"<|user|>\nHello there.</s>\n<|assistant|>\n", false},
			{"Hi! How can I help?</s>\n", true},
		}},
	} {
		got, err := mustLoad(t, tc.template).Segments(Example{Messages: g.messages(tc.conversation)}, tc.vars)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s conversation %d:\n got %s, %v\nwant %s", tc.template, tc.conversation, show(got), err, show(tc.want))
		}
	}
}

// TestSegmentsEveryGolden splits every golden conversation that has an
// assistant message with every prefix-stable template.
func TestSegmentsEveryGolden(t *testing.T) {
	g := loadGoldens(t)
	checked := 0
	for _, c := range g.Cases {
		msgs := g.messages(c.Conversation)
		assistants := 0
		for _, m := range msgs {
			if m.Role == "assistant" {
				assistants++
			}
		}
		// An assistant first would render an empty conversation as its
		// prompt, which templates need not handle. The features template
		// prints loop.length and the like, so it is not prefix-stable.
		if c.AddGenerationPrompt || c.Template == "unstable" || c.Template == "features" || assistants == 0 || msgs[0].Role == "assistant" {
			continue
		}
		what := c.Template + " conversation " + itoa(c.Conversation)
		segs, err := mustLoad(t, c.Template).Segments(Example{Messages: msgs}, Vars{c.BOSToken, c.EOSToken})
		if c.Output == nil {
			check(t, what, "", err, c.expectation)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		var all, trained strings.Builder
		for i, s := range segs {
			if s.Text == "" || i > 0 && segs[i-1].Train == s.Train {
				t.Errorf("%s: segments are not merged: %s", what, show(segs))
			}
			all.WriteString(s.Text)
			if s.Train {
				trained.WriteString(s.Text)
			}
		}
		if all.String() != *c.Output {
			t.Errorf("%s: segments join to %q, want the rendering %q", what, all.String(), *c.Output)
		}
		rest := trained.String()
		for _, m := range msgs {
			if m.Role != "assistant" {
				continue
			}
			i := strings.Index(rest, strings.TrimSpace(m.Content))
			if i < 0 {
				t.Errorf("%s: assistant text %q is not trained (trained: %q)", what, m.Content, trained.String())
				break
			}
			rest = rest[i+len(strings.TrimSpace(m.Content)):]
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d renderings were split", checked)
	}
}

func TestSegmentsRefuseUnstableTemplates(t *testing.T) {
	g := loadGoldens(t)
	unstable := mustLoad(t, "unstable")
	_, err := unstable.Segments(Example{Messages: g.messages(2)}, Vars{})
	want := "the template is not prefix-stable at message 2, so the assistant's text cannot be located"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	// With one answer, last in the conversation, the same template is stable.
	segs, err := unstable.Segments(Example{Messages: g.messages(0)}, Vars{})
	if err != nil || len(segs) != 2 || segs[1] != (Segment{"Hi! How can I help?</s>\n", true}) {
		t.Errorf("got %s, %v", show(segs), err)
	}
	// A generation prompt that the assistant's turn does not start with.
	mismatched, err := ParseTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<bot>{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = mismatched.Segments(Example{Messages: g.messages(0)}, Vars{})
	if err == nil || !strings.Contains(err.Error(), "not prefix-stable at message 1") {
		t.Errorf("got %v, want a refusal at message 1", err)
	}
}

func TestSegmentsSurfaceRaiseException(t *testing.T) {
	g := loadGoldens(t)
	_, err := mustLoad(t, "gemma").Segments(Example{Messages: g.messages(1)}, Vars{"<bos>", "<eos>"})
	var raised *RaisedError
	if !errors.As(err, &raised) || raised.Message != "A system message is not accepted by this template" || raised.Line != 1 {
		t.Errorf("got %v, want gemma's raise_exception", err)
	}
}

func TestSegmentsPromptCompletion(t *testing.T) {
	var none *Template
	got, err := none.Segments(Example{Prompt: "Q: 2+2?\nA:", Completion: " 4"}, Vars{})
	want := []Segment{{"Q: 2+2?\nA:", false}, {" 4", true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %s, %v; want %s", show(got), err, show(want))
	}
	got, err = none.Segments(Example{Completion: "only"}, Vars{})
	if err != nil || !reflect.DeepEqual(got, []Segment{{"only", true}}) {
		t.Errorf("empty prompt: got %s, %v", show(got), err)
	}
	_, err = none.Segments(Example{Messages: []Message{{"user", "hi"}, {"assistant", "yo"}}}, Vars{})
	if err == nil || err.Error() != "a chat example needs a chat template" {
		t.Errorf("chat example without a template: got %v", err)
	}
	_, err = mustLoad(t, "mistral").Segments(Example{Messages: []Message{{"user", "hi"}}}, Vars{})
	if err == nil || err.Error() != "the conversation has no assistant message to train on" {
		t.Errorf("no assistant: got %v", err)
	}
}

func TestLoadTemplateFromTransformers(t *testing.T) {
	mistral, err := os.ReadFile("testdata/templates/mistral.jinja")
	if err != nil {
		t.Fatal(err)
	}
	wantHash := sha256.Sum256(mistral)
	want, err := mustLoad(t, "mistral").Render([]Message{{"user", "a"}, {"assistant", "b"}}, false, Vars{"<s>", "</s>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		vars Vars
	}{
		{"testdata/hf/tokenizer_config.json", Vars{"<s>", "</s>"}},
		{"testdata/hf-named/tokenizer_config.json", Vars{"<s>", "</s>"}},
		{"testdata/hf-jinja/chat_template.jinja", Vars{}},
	} {
		tmpl, hash, vars, err := LoadTemplate(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if hash != wantHash || vars != tc.vars {
			t.Errorf("%s: hash %x, vars %q; want %x, %q", tc.path, hash, vars, wantHash, tc.vars)
		}
		got, err := tmpl.Render([]Message{{"user", "a"}, {"assistant", "b"}}, false, vars)
		if tc.vars != (Vars{}) && (err != nil || got != want) {
			t.Errorf("%s: rendered %q, %v; want %q", tc.path, got, err, want)
		}
	}
}

func TestLoadTemplateConfigs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, "tokenizer_config.json")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	objects := write("objects", `{"chat_template": "{{ bos_token }}x{{ eos_token }}",
		"bos_token": {"__type": "AddedToken", "content": "<B>", "lstrip": false},
		"eos_token": {"content": "<E>"}}`)
	tmpl, hash, vars, err := LoadTemplate(objects)
	if err != nil || vars != (Vars{"<B>", "<E>"}) || hash != sha256.Sum256([]byte("{{ bos_token }}x{{ eos_token }}")) {
		t.Fatalf("got %q, %x, %v", vars, hash, err)
	}
	if got, err := tmpl.Render(nil, false, vars); err != nil || got != "<B>x<E>" {
		t.Errorf("rendered %q, %v", got, err)
	}
	// transformers 4.50 and later save the template beside the config.
	beside := write("beside", `{"bos_token": "<B>", "eos_token": "<E>"}`)
	if err := os.WriteFile(filepath.Join(filepath.Dir(beside), TemplateFile), []byte("{{ eos_token }}y"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, hash, vars, err = LoadTemplate(beside)
	if err != nil || vars != (Vars{"<B>", "<E>"}) || hash != sha256.Sum256([]byte("{{ eos_token }}y")) {
		t.Fatalf("beside: got %q, %x, %v", vars, hash, err)
	}
	if got, err := tmpl.Render(nil, false, vars); err != nil || got != "<E>y" {
		t.Errorf("beside: rendered %q, %v", got, err)
	}

	for _, tc := range []struct{ name, content, want string }{
		{"none", `{"bos_token": "<s>"}`, `no "chat_template", and no chat_template.jinja beside it`},
		{"nodefault", `{"chat_template": [{"name": "tool_use", "template": "x"}]}`, `"chat_template" lists no template named "default"`},
		{"badlist", `{"chat_template": [{"name": "default"}]}`, `"chat_template" item 0 lacks a "name" or "template" string`},
		{"badtype", `{"chat_template": 5}`, `"chat_template" is neither a string nor a list`},
		{"badbos", `{"chat_template": "x", "bos_token": 3}`, `"bos_token" is neither a string nor an object with a "content" string`},
		{"badeos", `{"chat_template": "x", "eos_token": {"id": 3}}`, `"eos_token" is neither a string`},
		{"badjson", `{"chat_template": `, "not a JSON object"},
		{"badtemplate", `{"chat_template": "ok\n{% macro m() %}{% endmacro %}"}`, "chat template line 2:4: {% macro %} is not supported"},
	} {
		path := write(tc.name, tc.content)
		_, _, _, err := LoadTemplate(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line naming %s and containing %q", tc.name, err, path, tc.want)
		}
	}
	if _, _, _, err := LoadTemplate(filepath.Join(dir, "missing.jinja")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestReadJSONL(t *testing.T) {
	in := "\n" +
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}` + "\r\n" +
		"   \n" +
		`{"prompt": "p", "completion": "c"}` + "\n" +
		`{"completion": "c2", "prompt": ""}`
	got, err := ReadJSONL(strings.NewReader(in), "train.jsonl")
	want := []Example{
		{Messages: []Message{{"system", "s"}, {"user", "u"}, {"assistant", "a"}}, Line: 2},
		{Prompt: "p", Completion: "c", Line: 4},
		{Completion: "c2", Line: 5},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
	}
}

func TestReadJSONLBadLines(t *testing.T) {
	good := `{"prompt": "p", "completion": "c"}`
	for _, tc := range []struct{ line, want string }{
		{`{"prompt": "p", "completion": "c"`, "not a JSON object: unexpected end of JSON input"},
		{`["prompt"]`, "not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{`null`, "not a JSON object: found null"},
		{`{"prompt": "p", "completion": "c"} x`, "not a JSON object: invalid character 'x' after top-level value"},
		{"{\"prompt\": \"\xff\", \"completion\": \"c\"}", "the line is not valid UTF-8"},
		{`{"text": "t"}`, `unknown field "text" (want "messages", or "prompt" and "completion")`},
		{`{"prompt": "p"}`, `the line needs "messages", or both "prompt" and "completion"`},
		{`{"completion": "c"}`, `the line needs "messages", or both "prompt" and "completion"`},
		{`{"prompt": 1, "completion": "c"}`, `"prompt" is not a string`},
		{`{"prompt": "p", "completion": null}`, `"completion" is not a string`},
		{`{"prompt": "p", "completion": ""}`, `"completion" is empty, so there is nothing to train on`},
		{`{"messages": [{"role": "assistant", "content": "a"}], "prompt": "p"}`, `the line has both "messages" and "prompt"/"completion"; use one form`},
		{`{"messages": {"role": "user"}}`, `"messages" is not a list`},
		{`{"messages": []}`, `"messages" is empty`},
		{`{"messages": ["hi"]}`, "message 0 is not an object"},
		{`{"messages": [{"role": "user", "content": "u", "name": "x"}]}`, `message 0 has unknown field "name" (want "role" and "content")`},
		{`{"messages": [{"role": "user"}]}`, `message 0 needs both "role" and "content"`},
		{`{"messages": [{"content": "u"}]}`, `message 0 needs both "role" and "content"`},
		{`{"messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": "t"}]}`, `message 1 has role "tool" (want "system", "user" or "assistant")`},
		{`{"messages": [{"role": 7, "content": "u"}]}`, `message 0 has role 7 (want "system", "user" or "assistant")`},
		{`{"messages": [{"role": "assistant", "content": [{"type": "text", "text": "a"}]}]}`, `message 0: "content" is not a string`},
		{`{"messages": [{"role": "assistant", "content": null}]}`, `message 0: "content" is not a string`},
		{`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}`, "the conversation has no assistant message to train on"},
	} {
		_, err := ReadJSONL(strings.NewReader(good+"\n\n"+tc.line+"\n"+good), "data/chat.jsonl")
		want := "data/chat.jsonl:3: " + tc.want
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.line, err, want)
		}
	}
}

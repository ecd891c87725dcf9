// Package chat reads chat fine-tuning data and renders it with a model's
// chat template, a subset of Jinja2 that Hugging Face chat templates use,
// implemented here. Segments splits an example into the text the loss is
// computed on and the text it is not.
package chat

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Message is one chat turn.
type Message struct{ Role, Content string }

// Example is one training example: either Messages (chat), or Prompt and
// Completion.
type Example struct {
	Messages           []Message
	Prompt, Completion string
	Line               int // in the file ReadJSONL read it from
}

// Vars are the tokenizer's special tokens a template sees as bos_token and
// eos_token. An empty one is left undefined, as transformers leaves a token
// the tokenizer does not have.
type Vars struct{ BOS, EOS string }

// Template is a parsed chat template.
type Template struct {
	src  string // newline-normalized, as jinja2 lexes it
	body []stmt
}

// ParseTemplate parses a chat template. Features outside the supported
// subset are refused here when they are visible in the syntax (see README).
func ParseTemplate(src string) (*Template, error) {
	src = normalizeSource(src)
	body, err := parse(src)
	if err != nil {
		return nil, err
	}
	return &Template{src: src, body: body}, nil
}

// Render renders msgs as transformers' apply_chat_template(msgs,
// tokenize=False, add_generation_prompt=addGenerationPrompt) does with the
// tokenizer's bos_token and eos_token. As there, tools and documents are
// defined and None.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, v Vars) (string, error) {
	list := make([]value, len(msgs))
	for i, m := range msgs {
		d := &dict{m: map[string]value{}}
		d.set("role", m.Role)
		d.set("content", m.Content)
		list[i] = d
	}
	root := map[string]value{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"tools":                 nil,
		"documents":             nil,
	}
	if v.BOS != "" {
		root["bos_token"] = v.BOS
	}
	if v.EOS != "" {
		root["eos_token"] = v.EOS
	}
	r := &renderer{src: t.src, scopes: []map[string]value{root}}
	if err := r.exec(t.body); err != nil {
		return "", err
	}
	return r.out.String(), nil
}

// LoadTemplate reads a template from a tokenizer_config.json ("chat_template":
// a string, or a list of {"name", "template"} of which it takes "default")
// or, for any other file (such as the chat_template.jinja that transformers
// saves), the file's whole text. It returns the SHA-256 of the template text,
// which a dataset pins, and for a tokenizer_config.json its bos_token and
// eos_token.
func LoadTemplate(path string) (t *Template, hash [32]byte, vars Vars, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, hash, vars, fmt.Errorf("reading chat template: %w", err)
	}
	src := string(raw)
	if filepath.Base(path) == "tokenizer_config.json" {
		src, vars, err = fromTokenizerConfig(raw)
		if errors.Is(err, errNoTemplate) {
			// transformers 4.50 and later save the template beside the config.
			var jinja []byte
			if jinja, err = os.ReadFile(filepath.Join(filepath.Dir(path), TemplateFile)); err == nil {
				src = string(jinja)
			} else if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf(`no "chat_template", and no %s beside it`, TemplateFile)
			}
		}
		if err != nil {
			return nil, hash, Vars{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	if !utf8.ValidString(src) {
		return nil, hash, Vars{}, fmt.Errorf("%s: the chat template is not valid UTF-8", path)
	}
	if t, err = ParseTemplate(src); err != nil {
		return nil, hash, Vars{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, sha256.Sum256([]byte(src)), vars, nil
}

// TemplateFile is where transformers saves a tokenizer's chat template when
// its tokenizer_config.json has none.
const TemplateFile = "chat_template.jinja"

var errNoTemplate = errors.New(`no "chat_template"`)

func fromTokenizerConfig(raw []byte) (string, Vars, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", Vars{}, fmt.Errorf("not a JSON object: %v", err)
	}
	var vars Vars
	var err error
	if vars.BOS, err = specialToken(cfg.BOS, "bos_token"); err != nil {
		return "", Vars{}, err
	}
	if vars.EOS, err = specialToken(cfg.EOS, "eos_token"); err != nil {
		return "", Vars{}, err
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return "", vars, errNoTemplate
	}
	var src string
	if json.Unmarshal(cfg.ChatTemplate, &src) == nil {
		return src, vars, nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return "", Vars{}, errors.New(`"chat_template" is neither a string nor a list of {"name", "template"} objects`)
	}
	for i, n := range named {
		if n.Name == nil || n.Template == nil {
			return "", Vars{}, fmt.Errorf(`"chat_template" item %d lacks a "name" or "template" string`, i)
		}
		if *n.Name == "default" {
			return *n.Template, vars, nil
		}
	}
	return "", Vars{}, errors.New(`"chat_template" lists no template named "default"`)
}

// specialToken reads a special token written as a string or as an object
// with a "content" string (an AddedToken); absent or null is "".
func specialToken(raw json.RawMessage, key string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Content == nil {
		return "", fmt.Errorf("%q is neither a string nor an object with a \"content\" string", key)
	}
	return *obj.Content, nil
}

// Segment is a piece of an example's text; Train marks the text the loss is
// computed on.
type Segment struct {
	Text  string
	Train bool
}

// Segments splits an example into segments whose concatenation is its full
// training text.
//
// A prompt/completion example is {Prompt, false}, {Completion, true}, with no
// template (t may be nil). A chat example is rendered whole, and each
// assistant message's text is trained: for assistant message k, with
// P = Render(msgs[:k], true) and Q = Render(msgs[:k+1], false), the trained
// text is Q[len(P):]. It includes what the template writes after the
// content, such as <|im_end|> or </s>, which teaches the model to stop. The
// method needs P to be a prefix of Q and Q a prefix of the full rendering;
// a template that is not prefix-stable is refused. Text after the last
// assistant message is not trained.
func (t *Template) Segments(ex Example, v Vars) ([]Segment, error) {
	if len(ex.Messages) == 0 {
		return merge([]Segment{{ex.Prompt, false}, {ex.Completion, true}}), nil
	}
	if t == nil {
		return nil, errors.New("a chat example needs a chat template")
	}
	full, err := t.Render(ex.Messages, false, v)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	done := 0 // bytes of full already segmented
	for k, m := range ex.Messages {
		if m.Role != "assistant" {
			continue
		}
		p, err := t.Render(ex.Messages[:k], true, v)
		if err != nil {
			return nil, err
		}
		q, err := t.Render(ex.Messages[:k+1], false, v)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(q, p) || !strings.HasPrefix(full, q) || len(p) < done {
			return nil, fmt.Errorf("the template is not prefix-stable at message %d, so the assistant's text cannot be located", k)
		}
		segs = append(segs, Segment{full[done:len(p)], false}, Segment{full[len(p):len(q)], true})
		done = len(q)
	}
	if done == 0 {
		return nil, errors.New("the conversation has no assistant message to train on")
	}
	segs = append(segs, Segment{full[done:], false})
	return merge(segs), nil
}

// merge drops empty segments and joins neighbours with the same Train.
func merge(segs []Segment) []Segment {
	var out []Segment
	for _, s := range segs {
		switch {
		case s.Text == "":
		case len(out) > 0 && out[len(out)-1].Train == s.Train:
			out[len(out)-1].Text += s.Text
		default:
			out = append(out, s)
		}
	}
	return out
}

// ReadJSONL reads examples, one JSON object per line:
// {"messages":[{"role":..,"content":..},...]} or {"prompt":..,"completion":..}.
// Blank lines are skipped. A malformed line is an error naming name:line and
// what is wrong.
func ReadJSONL(r io.Reader, name string) ([]Example, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var out []Example
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if len(raw) == 0 && err != nil {
			return out, nil
		}
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		ex, perr := parseExample(b)
		if perr != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, perr)
		}
		ex.Line = line
		out = append(out, ex)
	}
}

var roles = map[string]bool{"system": true, "user": true, "assistant": true}

func parseExample(b []byte) (Example, error) {
	if !utf8.Valid(b) {
		return Example{}, errors.New("the line is not valid UTF-8")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return Example{}, fmt.Errorf("not a JSON object: %s", jsonProblem(err))
	}
	for k := range obj {
		if k != "messages" && k != "prompt" && k != "completion" {
			return Example{}, fmt.Errorf("unknown field %q (want \"messages\", or \"prompt\" and \"completion\")", k)
		}
	}
	_, hasMsgs := obj["messages"]
	_, hasPrompt := obj["prompt"]
	_, hasCompl := obj["completion"]
	switch {
	case hasMsgs && (hasPrompt || hasCompl):
		return Example{}, errors.New("the line has both \"messages\" and \"prompt\"/\"completion\"; use one form")
	case hasMsgs:
		msgs, err := parseMessages(obj["messages"])
		return Example{Messages: msgs}, err
	case !hasPrompt || !hasCompl:
		return Example{}, errors.New("the line needs \"messages\", or both \"prompt\" and \"completion\"")
	}
	var ex Example
	if err := stringField(obj["prompt"], &ex.Prompt); err != nil {
		return Example{}, fmt.Errorf("\"prompt\" %w", err)
	}
	if err := stringField(obj["completion"], &ex.Completion); err != nil {
		return Example{}, fmt.Errorf("\"completion\" %w", err)
	}
	if ex.Completion == "" {
		return Example{}, errors.New("\"completion\" is empty, so there is nothing to train on")
	}
	return ex, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return "found null"
	}
	return err.Error()
}

func stringField(raw json.RawMessage, dst *string) error {
	if raw[0] != '"' {
		return errors.New("is not a string")
	}
	return json.Unmarshal(raw, dst)
}

func parseMessages(raw json.RawMessage) ([]Message, error) {
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, errors.New("\"messages\" is not a list")
	}
	if len(items) == 0 {
		return nil, errors.New("\"messages\" is empty")
	}
	msgs := make([]Message, len(items))
	hasAssistant := false
	for i, item := range items {
		var obj map[string]json.RawMessage
		if item[0] != '{' || json.Unmarshal(item, &obj) != nil {
			return nil, fmt.Errorf("message %d is not an object", i)
		}
		for k := range obj {
			if k != "role" && k != "content" {
				return nil, fmt.Errorf("message %d has unknown field %q (want \"role\" and \"content\")", i, k)
			}
		}
		role, hasRole := obj["role"]
		content, hasContent := obj["content"]
		if !hasRole || !hasContent {
			return nil, fmt.Errorf("message %d needs both \"role\" and \"content\"", i)
		}
		if err := stringField(role, &msgs[i].Role); err != nil || !roles[msgs[i].Role] {
			return nil, fmt.Errorf("message %d has role %s (want \"system\", \"user\" or \"assistant\")", i, role)
		}
		if err := stringField(content, &msgs[i].Content); err != nil {
			return nil, fmt.Errorf("message %d: \"content\" %w", i, err)
		}
		hasAssistant = hasAssistant || msgs[i].Role == "assistant"
	}
	if !hasAssistant {
		return nil, errors.New("the conversation has no assistant message to train on")
	}
	return msgs, nil
}

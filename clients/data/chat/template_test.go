package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldens is testdata/goldens.json, written by testdata/gen_goldens.py with
// transformers' render_jinja_template.
type goldens struct {
	Conversations [][]struct{ Role, Content string }
	Cases         []struct {
		Template            string
		BOSToken            string `json:"bos_token"`
		EOSToken            string `json:"eos_token"`
		Conversation        int
		AddGenerationPrompt bool `json:"add_generation_prompt"`
		expectation
	}
	Snippets []struct {
		Source string
		expectation
	}
}

// expectation is one of: the rendered text, the message the template raised
// with raise_exception, or another error (jinja2's own or Python's).
type expectation struct {
	Output *string
	Raised *string
	Error  *string
}

func loadGoldens(t *testing.T) goldens {
	t.Helper()
	raw, err := os.ReadFile("testdata/goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldens
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 || len(g.Snippets) == 0 {
		t.Fatal("goldens.json has no cases")
	}
	return g
}

func (g goldens) messages(i int) []Message {
	var msgs []Message
	for _, m := range g.Conversations[i] {
		msgs = append(msgs, Message{m.Role, m.Content})
	}
	return msgs
}

func mustLoad(t *testing.T, name string) *Template {
	t.Helper()
	tmpl, _, _, err := LoadTemplate(filepath.Join("testdata/templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func check(t *testing.T, what string, got string, err error, want expectation) {
	t.Helper()
	var raised *RaisedError
	switch {
	case want.Output != nil:
		if err != nil {
			t.Errorf("%s: %v, want %q", what, err, *want.Output)
		} else if got != *want.Output {
			t.Errorf("%s:\n got %q\nwant %q", what, got, *want.Output)
		}
	case want.Raised != nil:
		if !errors.As(err, &raised) || raised.Message != *want.Raised {
			t.Errorf("%s: got %q, %v; want raise_exception(%q)", what, got, err, *want.Raised)
		}
	default:
		if err == nil || errors.As(err, &raised) {
			t.Errorf("%s: got %q, %v; want an error like jinja2's %s", what, got, err, *want.Error)
		}
	}
}

func TestRenderGoldens(t *testing.T) {
	g := loadGoldens(t)
	templates := map[string]*Template{}
	for _, c := range g.Cases {
		tmpl := templates[c.Template]
		if tmpl == nil {
			tmpl = mustLoad(t, c.Template)
			templates[c.Template] = tmpl
		}
		got, err := tmpl.Render(g.messages(c.Conversation), c.AddGenerationPrompt, Vars{c.BOSToken, c.EOSToken})
		check(t, c.Template+" conversation "+itoa(c.Conversation)+" add_generation_prompt="+itoa(c.AddGenerationPrompt), got, err, c.expectation)
	}
	if len(templates) != 10 {
		t.Errorf("goldens cover %d templates, want 10", len(templates))
	}
}

func TestRenderSnippetGoldens(t *testing.T) {
	g := loadGoldens(t)
	for _, s := range g.Snippets {
		tmpl, err := ParseTemplate(s.Source)
		if err != nil {
			// Refusing what jinja2 fails on at render time is fine.
			if s.Error == nil {
				t.Errorf("%q: %v", s.Source, err)
			}
			continue
		}
		got, err := tmpl.Render(g.messages(1), false, Vars{BOS: "<s>"})
		check(t, strings.ReplaceAll(s.Source, "\n", `\n`), got, err, s.expectation)
	}
}

func itoa[T int | bool](v T) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRefusedFeatures(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{% macro f() %}x{% endmacro %}", "line 1:4: {% macro %} is not supported"},
		{"{% generation %}x{% endgeneration %}", "line 1:4: {% generation %} is not supported"},
		{"{% raw %}x{% endraw %}", "line 1:4: {% raw %} is not supported"},
		{"{% include 'other' %}", "line 1:4: {% include %} is not supported"},
		{"a\n\n  {{ strftime_now('%d') }}", "line 3:6: the function strftime_now() is not supported"},
		{"{{ messages | join(',') }}", `line 1:15: the filter "join" is not supported`},
		{"{{ x is callable }}", `line 1:9: the test "callable" is not supported`},
		{"{{ messages[0].items() }}", "line 1:16: the method .items() is not supported"},
		{"{% for m in messages %}{{ loop.cycle('a', 'b') }}{% endfor %}", "line 1:32: the method .cycle() is not supported"},
		{"{{ 1.5 }}", "line 1:4: floating-point numbers are not supported"},
		{"{% set x %}y{% endset %}", "line 1:4: block assignments"},
		{"{{ (1, 2) }}", "line 1:6: tuples are not supported"},
		{"{% for m in messages recursive %}{% endfor %}", "line 1:22: recursive loops are not supported"},
		{"{{ tojson(1, indent=2) }}", "line 1:4: the function tojson() is not supported"},
		{"{{ x | tojson(indent=2) }}", `line 1:8: keyword arguments to the filter "tojson" are not supported`},
		{"{% if true %}x", "line 1:4: {% if %} is never closed"},
		{"{% for m in messages %}{% endif %}", "line 1:27: unexpected {% endif %} inside {% for %}"},
		{"{{ 'x' ", "line 1:1: the tag opened here is never closed"},
		{"{# never closed", "line 1:1: missing end of comment tag"},
		{"{% for m in messages %}{% else %}{% break %}{% endfor %}", "line 1:37: {% break %} outside a loop"},
		{"{{ 1 < 2 < 3 }}", "line 1:10: chained comparisons are not supported"},
	} {
		_, err := ParseTemplate(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

func TestRenderTimeRefusals(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{{ 1 / 2 }}", "line 1:6: the / operator is not supported"},
		{"{{ 2 ** 3 }}", "line 1:6: the ** operator is not supported"},
		{"{{ '%s' % 'x' }}", "string formatting with % is not supported"},
		{"{{ messages[0].role.strip(1) }}", "line 1:21: .strip() takes strings"},
		{"{{ messages.strip() }}", "line 1:13: the method .strip() is supported on strings only"},
		{"{% set x = 1 %}{% set x.y = 2 %}", "line 1:19: cannot assign attribute \"y\""},
		{"{{ range(1000000) | length }}", "range() is limited to 100000 items"},
		{"{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "the template ran more than 5000000 steps"},
		{"{{ 'x' * 100000000 }}", "the template produced more than 67108864 bytes"},
		{"{% set s = 'xxxxxxxxxxxxxxxx' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}", "the template produced more than 67108864 bytes"},
	} {
		tmpl, err := ParseTemplate(tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		_, err = tmpl.Render([]Message{{"user", "hi"}}, false, Vars{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

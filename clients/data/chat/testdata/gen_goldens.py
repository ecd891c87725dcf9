#!/usr/bin/env python3
"""Writes the chat package's goldens with transformers' own template renderer.

Run by hand from the repository root (transformers 5.25.0, jinja2 3.1.6,
tokenizers installed); CI never runs it, the Go tests read what it writes:

    python3 clients/data/chat/testdata/gen_goldens.py

It writes, under clients/data/chat/testdata/:
  goldens.json            every template x conversation x add_generation_prompt,
                          rendered by transformers.utils.chat_template_utils.
                          render_jinja_template (what apply_chat_template with
                          tokenize=False calls), or the error it raised
  hf/tokenizer_config.json        save_pretrained(save_jinja_files=False) of a
                                  tokenizer given templates/mistral.jinja
  hf-named/tokenizer_config.json  the same with named templates (a list)
  hf-jinja/chat_template.jinja    the default save_pretrained's template file
"""

import json
import os
import shutil
import tempfile

import jinja2
import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "templates")

# The special tokens each template family's tokenizer has; None is a token
# the tokenizer lacks, which transformers leaves out of the template's
# variables.
VARS = {
    "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama31": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral": ("<s>", "</s>"),
    "qwen25": (None, "<|im_end|>"),
    "zephyr": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "features": ("<B>", None),
    "unstable": ("<s>", "</s>"),
}


def msg(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    # one turn
    [msg("user", "Hello there."), msg("assistant", "Hi! How can I help?")],
    # a system message
    [
        msg("system", "You answer in one sentence."),
        msg("user", "What is the capital of France?"),
        msg("assistant", "Paris is the capital of France."),
    ],
    # several turns with a system message
    [
        msg("system", "Be brief."),
        msg("user", "Count to three."),
        msg("assistant", "1, 2, 3."),
        msg("user", "Now backwards."),
        msg("assistant", "3, 2, 1."),
    ],
    # several turns ending with the user, as for generation
    [
        msg("user", "Name a colour."),
        msg("assistant", "Blue."),
        msg("user", "Another one?"),
    ],
    # unicode
    [
        msg("user", "Traduis « bonjour » en 日本語 et en العربية, s'il te plaît 🙏"),
        msg("assistant", "こんにちは — مرحبا. Ça va? ñ, e\u0301, 👩‍💻, line\u2028sep"),
    ],
    # whitespace at the edges, quotes, backslashes and template-like text
    [
        msg("system", "  \n\tsystem with edges \n"),
        msg("user", "\n  {{ not a tag }} {% nor this %} 'single' \"double\" back\\slash  \n"),
        msg("assistant", "\n\n  answer with spaces\t \n"),
    ],
    # empty contents
    [msg("user", ""), msg("assistant", "")],
    # a single user message
    [msg("user", "Just a question.")],
    # roles that do not alternate: templates that check raise_exception
    [msg("user", "one"), msg("user", "two"), msg("assistant", "three")],
    # an assistant first
    [msg("assistant", "I speak first."), msg("user", "Fine.")],
]

# Short templates for the engine's corner cases, rendered with
# CONVERSATIONS[1], add_generation_prompt false, bos_token "<s>" and no
# eos_token.
SNIPPETS = [
    "a  \n  {% if true %}\n  x\n  {% endif %}\n  b",
    "a {%- if true -%} x {%- endif -%} b",
    "  {%+ if true %}x{% endif %}|  {% if true %}y{% endif %}  tail",
    "{# c #}\n  x\n  {#- c -#}\n  y {#+ c +#}\nz",
    "{{ 'v' }}\n  {{ 'w' -}}\n  z {{- 'q' }}\n",
    "x\r\ny\rz\n\n",
    "tail newline kept once\n\n\n",
    "u\u2028v\x85w\x0cx",
    "{%- if true %}\n\nA{% endif %}\n{% if false %}B{% else %}\nC{% endif %}",
    "{% for x in [1, 2, 3] %}{% set y = x %}{% endfor %}[{{ y }}]",
    "{% set c = 0 %}{% for i in [1, 2, 3] %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}",
    "{% if true %}{% set c = 5 %}{% endif %}{{ c }}",
    "{{ {'a': {'b': 1}}['a'] }}|{{ {'a': {'b': 1}}.a.b }}",
    "{{ messages[5] }}|{{ messages[-9] }}|{{ none.foo }}|{{ messages[0].nope }}|{{ 'abc'[7] }}",
    "{{ messages[0].nope.deeper }}",
    "{{ missing + 'x' }}",
    "{{ 'a' + 1 }}",
    "{{ messages[0].content.nope() }}",
    "{{ raise_exception('custom ' ~ messages | length) }}",
    "{{ 'abc' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ 'a' ~ 1 ~ none ~ true }}",
    "{{ messages | tojson }}|{{ messages[0] }}|{{ messages[1:] | length }}",
    "{{ 'é' | upper }} {{ 'ǅx'.title() }} {{ 'ÀB' | lower }} {{ 'a-b_c d'.title() }}",
    "{{ 'x' if false }}|{{ 'y' if true }}|{{ [] or none }}|{{ 0 and 1 }}",
    "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
    "{% for m in messages %}{% for c in m.role %}{% if loop.index > 2 %}{% break %}{% endif %}{{ c }}{% endfor %}{{ loop.index }};{% endfor %}",
    "{{ '%s' }} {{ 5 % 3 }} {{ 'a\\b' }} {{ \"q\\\"q\" }} {{ '\\u00e9\\t|' }}",
    "{{ messages[0]['content'] | trim('.Y') }}|{{ ' x ' | trim }}|{{ 3 | trim }}",
]


def snippets():
    cases = []
    for src in SNIPPETS:
        case = {"source": src}
        case.update(render(src, CONVERSATIONS[1], False, "<s>", None))
        cases.append(case)
    return cases


def render(src, conversation, add_generation_prompt, bos, eos):
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    try:
        rendered, _ = render_jinja_template(
            conversations=[conversation],
            chat_template=src,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )
        return {"output": rendered[0]}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises a bare TemplateError; its subclasses
        # (UndefinedError, TemplateSyntaxError, ...) are jinja2's own.
        if type(e) is jinja2.exceptions.TemplateError:
            return {"raised": e.message}
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # TypeError and the like, from Python operators
        return {"error": f"{type(e).__name__}: {e}"}


def goldens():
    cases = []
    for name in sorted(VARS):
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
            src = f.read()
        bos, eos = VARS[name]
        for i, conversation in enumerate(CONVERSATIONS):
            for agp in (False, True):
                case = {
                    "template": name,
                    "bos_token": bos or "",
                    "eos_token": eos or "",
                    "conversation": i,
                    "add_generation_prompt": agp,
                }
                case.update(render(src, conversation, agp, bos, eos))
                cases.append(case)
    return {
        "generator": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
        "conversations": CONVERSATIONS,
        "cases": cases,
        "snippets": snippets(),
    }


def tiny_tokenizer(chat_template):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "hello": 3}
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="<unk>")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        chat_template=chat_template,
    )


def save(chat_template, out_dir, keep, save_jinja_files):
    with tempfile.TemporaryDirectory() as tmp:
        tiny_tokenizer(chat_template).save_pretrained(tmp, save_jinja_files=save_jinja_files)
        os.makedirs(out_dir, exist_ok=True)
        shutil.copyfile(os.path.join(tmp, keep), os.path.join(out_dir, keep))


def main():
    with open(os.path.join(HERE, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(TEMPLATES, "mistral.jinja"), encoding="utf-8") as f:
        mistral = f.read()
    with open(os.path.join(TEMPLATES, "gemma.jinja"), encoding="utf-8") as f:
        gemma = f.read()
    save(mistral, os.path.join(HERE, "hf"), "tokenizer_config.json", False)
    save({"default": mistral, "other": gemma}, os.path.join(HERE, "hf-named"), "tokenizer_config.json", False)
    save(mistral, os.path.join(HERE, "hf-jinja"), "chat_template.jinja", True)


if __name__ == "__main__":
    main()

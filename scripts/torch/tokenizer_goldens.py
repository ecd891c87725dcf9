"""Goldens for clients/data/tokenizer's tokenizer.json reader (hfjson.go), run by hand, never in CI.

  python scripts/torch/tokenizer_goldens.py

Trains small byte-level BPE tokenizers with Hugging Face tokenizers on the repository's markdown
files as committed at HEAD, writes them to clients/data/tokenizer/testdata/hfjson/NAME.json, and
writes goldens.json there: the ids that tokenizers gives a few hundred varied strings under each.
hfjson_test.go checks that JSONBPE reproduces every one. Needs tokenizers from PyPI (the
bench-torch venv has it); the strings come from a seeded generator, so reruns at the same commit
give identical output.
"""
import json
import os
import random
import subprocess

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "clients", "data", "tokenizer", "testdata", "hfjson")
EOT = "<|endoftext|>"
# Whole words that the "ignore" tokenizer gets as extra vocab entries without merges, as Llama 3's
# vocab has: only ignore_merges can produce them. Byte-level spelling: Ġ is the space.
EXTRA_WORDS = ["Ġtokenizer", "Ġpsyche", "Ġcoordinator", "checkpoint", "Ġ12345"]


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def markdown():
    """The markdown files as committed at HEAD, so that uncommitted edits do not change the goldens."""
    return [git("show", f"HEAD:{f}") for f in sorted(git("ls-tree", "-r", "--name-only", "HEAD").split()) if f.endswith(".md")]


def train(docs, vocab_size, add_prefix_space=False, ignore_merges=False, special=(EOT,)):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    return json.loads(tok.to_str())


def variants(docs):
    """The tokenizer.json documents to test, by file name, each exercising other options."""
    plain = train(docs, 600)

    prefix = train(docs, 2000, add_prefix_space=True, special=("<pad>", "</s>", EOT))
    # A post-processor only matters with add_special_tokens=True; JSONBPE ignores it.
    prefix["post_processor"] = json.loads(processors.TemplateProcessing(
        single=f"$A {EOT}", special_tokens=[(EOT, prefix["model"]["vocab"][EOT])]).__getstate__())

    # The layout of GPT-2's tokenizer.json on the Hub: "a b" merges, "" affixes, the
    # pre-tokenizer in a Sequence (as some conversions write it).
    legacy = train(docs, 2000)
    legacy["model"]["merges"] = [" ".join(m) for m in legacy["model"]["merges"]]
    legacy["model"]["continuing_subword_prefix"] = ""
    legacy["model"]["end_of_word_suffix"] = ""
    legacy["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [legacy["pre_tokenizer"]]}

    ignore = train(docs, 600, ignore_merges=True)
    vocab = ignore["model"]["vocab"]
    for w in EXTRA_WORDS:
        vocab.setdefault(w, len(vocab))
    return {"plain.json": plain, "prefix.json": prefix, "legacy.json": legacy, "ignore.json": ignore}


def texts(docs):
    rng = random.Random(0x5EED1234)
    pick = rng.choice

    def cp(lo, hi):
        return chr(rng.randint(lo, hi))

    # \s edge cases too: U+0085 and U+FEFF are where regex engines disagree.
    spaces = [" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u1680", "\u2003", "\u200a",
              "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u0085", "\u180e"]
    words = ["the", "The", "of", "and", "tokenizer", "psyche", "coordinator", "checkpoint", "12345",
             "don't", "I'm", "we've", "they're", "you'll", "he'd", "it's", "ISN'T", "O'Neil", "naïve", "café",
             "Straße", "東京", "日本語", "привет", "Ελλάδα", "שלום", "مرحبا", "नमस्ते", "안녕하세요", "🙂", "👍🏽",
             "👨‍👩‍👧", "e\u0301", "ﬁ", "Ⅻ", "½", "٣", "१२३", "x²", "→", "$100", "3.14159", "1,000,000",
             "http://example.org/a?b=c", "...", "!!!", "—", "«quoted»", "“smart”", "(parens)", "{}",
             EOT, "<|", "|>", "endoftext", "</s>", "<pad>", "\x7f", "\x00"]
    scripts = [(0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
               (0x600, 0x6FF), (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
               (0x2000, 0x206F), (0x300, 0x36F), (0x1F300, 0x1F64F), (0x1D400, 0x1D4FF), (0xFF00, 0xFFEF)]
    text = "\n".join(docs)

    cases = ["", " ", "  ", "   ", "\n", "\n\n", "\t", " \t\n", "a", "A", "0", "000", "0000",
             "Hello world", "Hello  world", "Hello\nworld", "Hello \nworld", "  leading", "trailing  ",
             " \n leading and trailing \t ", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "''", "a's b't",
             "they're here, we'll see, it's John's", EOT, EOT + EOT, " " + EOT, "text" + EOT + "more",
             "\x7f", "a\x7fb", " \x7f\x7f!", "\x00\x01\x1f", "tab\tsep\tvalues\n", "1 2 3 12345 3.14 -1 1e10",
             "naïve café Straße", "東京 日本語", "🙂 👍🏽 👨‍👩‍👧", " tokenizer psyche coordinator checkpoint 12345",
             "tokenizer Tokenizer  tokenizer\ntokenizer"]

    def passage(n):
        at = rng.randrange(len(text) - n)
        return text[at:at + n]

    def one_script():
        # Old scripts only: characters assigned since Unicode 15.0 classify differently in Go
        # (see JSONBPE's doc comment).
        lo, hi = pick(scripts)
        return "".join(pick(spaces) if rng.random() < 0.15 else cp(*pick(scripts)) if rng.random() < 0.2
                       else cp(lo, hi) for _ in range(rng.randint(1, 25)))

    gens = [
        (40, lambda: "".join(cp(0x20, 0x7E) for _ in range(rng.randint(1, 60)))),
        (50, lambda: "".join(pick(words) + "".join(pick(spaces) for _ in range(rng.randint(0, 3)))
                             for _ in range(rng.randint(1, 8)))),
        (20, lambda: "".join("".join(cp(0x30, 0x39) for _ in range(rng.randint(1, 15)))
                             + pick(["", " ", ".", ",", "  ", "\n", "x"]) for _ in range(rng.randint(1, 5)))),
        (25, lambda: "".join(pick(words) + pick(["", " ", "'s ", "'", "’s ", "n't ", "'LL ", "'re"])
                             for _ in range(rng.randint(1, 10)))),
        (50, one_script),
        (40, lambda: passage(rng.randint(1, 300))),
        (3, lambda: passage(1500)),
    ]
    for n, gen in gens:
        cases.extend(gen() for _ in range(n))
    return list(dict.fromkeys(cases))


def entry(e):
    """One tokenizer's goldens, an id list a line, so that regenerated goldens diff readably."""
    head = json.dumps({k: v for k, v in e.items() if k != "ids"})
    return head[:-1] + ', "ids": [\n' + ",\n".join(json.dumps(i, separators=(",", ":")) for i in e["ids"]) + "]}"


def main():
    docs = markdown()
    cases = texts(docs)
    os.makedirs(OUT, exist_ok=True)
    entries = []
    for name, doc in variants(docs).items():
        raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            f.write(raw)
        # Goldens come from the file as written, read back by tokenizers itself.
        tok = Tokenizer.from_str(raw)
        # Text that spells a special token is ordinary text, as JSONBPE's contract requires.
        tok.encode_special_tokens = True
        eot = tok.token_to_id(EOT)
        ids = []
        prefix = doc["pre_tokenizer"].get("add_prefix_space", False)
        for text in cases:
            got = tok.encode(text, add_special_tokens=False).ids
            back = tok.decode(got, skip_special_tokens=False)
            want = " " + text if prefix and text and not text.startswith(" ") else text
            if back != want:
                raise SystemExit(f"{name}: tokenizers does not round-trip {text!r}: {back!r}")
            ids.append(got)
        if name == "ignore.json":
            extra = {doc["model"]["vocab"][w] for w in EXTRA_WORDS}
            if not any(extra & set(i) for i in ids):
                raise SystemExit("ignore.json: no golden exercises ignore_merges")
        entries.append({"file": name, "prefix_space": prefix, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                        "eot": eot, "eot_text": tok.decode([eot], skip_special_tokens=False), "ids": ids})
        print(f"{name}: {len(raw)} bytes, {tok.get_vocab_size(with_added_tokens=True)} tokens")
    lines = ["{", f'"generator": "scripts/torch/tokenizer_goldens.py with tokenizers {tokenizers.__version__}",',
             '"texts": [', ",\n".join(json.dumps(t, ensure_ascii=False) for t in cases), "],",
             '"tokenizers": [', ",\n".join(entry(e) for e in entries)]
    lines += ["]}", ""]
    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"wrote {len(cases)} strings")


if __name__ == "__main__":
    main()

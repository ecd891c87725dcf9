"""Goldens for clients/data/tokenizer's tokenizer.json reader (hfjson.go), run by hand, never in CI.

  python scripts/torch/tokenizer_goldens.py

Trains small BPE tokenizers with Hugging Face tokenizers on the repository's markdown files as
committed at HEAD, in the layouts that JSONBPE reads (GPT-2's, Llama 3's and Qwen2's byte-level
pre-tokenizers, and SentencePiece-style BPE with byte fallback as transformers converts Llama 2 and
Mistral), writes them to clients/data/tokenizer/testdata/hfjson/NAME.json, and writes goldens.json
there: for a few hundred varied strings, the ids that tokenizers gives under each with special
tokens read as text (Encode) and as special tokens (EncodeSpecial), and what it decodes them to.
hfjson_test.go checks that JSONBPE reproduces every one. Needs tokenizers from PyPI (the
bench-torch venv has it); the strings come from a seeded generator, so reruns at the same commit
give identical output.
"""
import copy
import json
import os
import random
import subprocess

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "clients", "data", "tokenizer", "testdata", "hfjson")
EOT = "<|endoftext|>"
# Whole words that the "ignore" tokenizer gets as extra vocab entries without merges, as Llama 3's
# vocab has: only ignore_merges can produce them. Byte-level spelling: Ġ is the space.
EXTRA_WORDS = ["Ġtokenizer", "Ġpsyche", "Ġcoordinator", "checkpoint", "Ġ12345"]
# The split patterns, as convert_slow_tokenizer's TikTokenConverter (Llama 3) and
# models/qwen2/tokenization_qwen2.py (Qwen2) in transformers 5.25 spell them.
LLAMA3_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3_SPECIAL = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")
QWEN2_SPECIAL = (EOT, "<|im_start|>", "<|im_end|>")
# The end-of-text spellings that JSONBPE looks for, in its order (eotTexts in hfjson.go).
EOT_TEXTS = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>")
SPM_SPECIAL = ("<unk>", "<s>", "</s>")
SPM_BYTES = tuple(f"<0x{b:02X}>" for b in range(256))
# Every special spelling that the test strings use, so that EncodeSpecial meets them all.
SPECIALS = sorted(set((EOT, "<pad>", "</s>") + LLAMA3_SPECIAL + QWEN2_SPECIAL + SPM_SPECIAL))


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


def train_split(docs, vocab_size, pattern, special, nfc=False):
    """A byte-level BPE over a Split pre-tokenizer, as transformers builds Llama 3's and Qwen2's."""
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    return json.loads(tok.to_str())


def train_spm(docs, vocab_size):
    """SentencePiece-style BPE as transformers' LlamaConverter writes Llama 2's, Mistral's and
    TinyLlama's tokenizer.json: <unk> <s> </s>, then the 256 byte-fallback tokens, then pieces
    spelled with "▁". Trained split at "▁" (as SentencePiece trains), saved with split false (as the
    converter writes). A small alphabet leaves rarer characters to byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPM_SPECIAL + SPM_BYTES),
                                  show_progress=False, limit_alphabet=120)
    tok.train_from_iterator(docs, trainer)
    doc = json.loads(tok.to_str())
    # Byte tokens are plain vocab entries in the converted files; only the three are added tokens.
    doc["added_tokens"] = [a for a in doc["added_tokens"] if a["content"] in SPM_SPECIAL]
    doc["pre_tokenizer"] = json.loads(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                               split=False).__getstate__())
    doc["decoder"] = json.loads(decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                                   decoders.Fuse(), decoders.Strip(" ", 1, 0)]).__getstate__())
    return doc


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

    llama3 = train_split(docs, 2000, LLAMA3_PATTERN, LLAMA3_SPECIAL)
    # Trained on Llama 3's split, so that merges join digits, which Qwen2's split must keep apart.
    qwen2 = train_split(docs, 2000, LLAMA3_PATTERN, QWEN2_SPECIAL, nfc=True)
    qwen2["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN2_PATTERN

    spm = train_spm(docs, 1500)
    # The legacy conversion (legacy=True): the "▁" work in a normalizer, no pre-tokenizer.
    spm_legacy = copy.deepcopy(spm)
    spm_legacy["normalizer"] = json.loads(normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]).__getstate__())
    spm_legacy["pre_tokenizer"] = None
    # Some Hub files decode with a Metaspace decoder, which knows no byte fallback.
    spm_meta = copy.deepcopy(spm)
    spm_meta["decoder"] = json.loads(decoders.Metaspace(replacement="▁", prepend_scheme="first",
                                                        split=False).__getstate__())
    return {"plain.json": plain, "prefix.json": prefix, "legacy.json": legacy, "ignore.json": ignore,
            "llama3.json": llama3, "qwen2.json": qwen2, "spm.json": spm, "spm-legacy.json": spm_legacy,
            "spm-metaspace.json": spm_meta}


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
             EOT, "<|", "|>", "endoftext", "</s>", "<pad>", "\x7f", "\x00", "'S", "'Ll", "'ſ", "▁", "▁▁x",
             "<s>", "<unk>", "<|im_start|>", "<|eot_id|>", "<|im_end|>", "<<s>>", "<s", "\u0301", "ǅ", "1234567"]
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
             "tokenizer Tokenizer  tokenizer\ntokenizer",
             # Chat templates: special spellings meet text, newlines and each other.
             "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
             "<s>[INST] What's 2+2? [/INST] 4</s>", "<s> leading", " <s>", "<s><s></s>", "</s>text", "a</s>",
             "<unk>", "<|im_start|><|im_end|>", "<|end_of_text|>x", "<</s>>", "<|endoftext|><|endoftext|>",
             # Metaspace and Prepend: the replacement character itself, and leading spaces.
             "▁", "▁hello", " hello", "  hello", "hello ", "a ▁ b", "\u2581\u2581", "\u0301e", "e\u0301 o\u0308",
             # The Llama 3 split: contractions in any case, digit runs, newline runs after symbols.
             "I'M HERE, YOU'RE THERE, WE'VE 'Ve 'sS 'ſ 'K 'ſup 'Sup 'LLama 'Dd", "12345678901", "x1234y", "!!!\n\n\nabc", "a  \n  b",
             "\n\t hello", " \r\n\r\n x", "...\r\n", "'hello", "?!word", "\u00a0word", "\u3000word"]

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
        (1, lambda: passage(1500)),
        (30, lambda: "".join(pick(SPECIALS) if rng.random() < 0.4 else pick(words) + pick(spaces)
                             for _ in range(rng.randint(1, 8)))),
    ]
    for n, gen in gens:
        cases.extend(gen() for _ in range(n))
    return list(dict.fromkeys(cases))


def entry(e):
    """One tokenizer's goldens, a value of each per-string list a line, so that regenerated goldens diff readably."""
    lists = [k for k, v in e.items() if isinstance(v, list)]
    head = json.dumps({k: v for k, v in e.items() if k not in lists}, ensure_ascii=False)[:-1]
    for k in lists:
        head += f', "{k}": [\n' + ",\n".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in e[k]) + "]"
    return head + "}"


def decode_cases(tok, rng):
    """Random id lists and what tokenizers decodes them to: byte-fallback runs cut mid-character,
    "▁" pieces first and later. Not for ByteLevel decoders, which JSONBPE keeps byte-exact (tokenizers
    turns a cut character into U+FFFD)."""
    n = tok.get_vocab_size(with_added_tokens=True)
    bytes_ = [tok.token_to_id(b) for b in SPM_BYTES]
    cases = []
    for _ in range(60):
        ids = [rng.choice(bytes_) if rng.random() < 0.4 else rng.randrange(n) for _ in range(rng.randint(1, 8))]
        cases.append([ids, tok.decode(ids, skip_special_tokens=False)])
    return cases


def goldens(name, doc, raw, cases, rng):
    """What tokenizers makes of every string under the tokenizer.json raw."""
    # Goldens come from the file as written, read back by tokenizers itself.
    tok = Tokenizer.from_str(raw)
    eot = next(tok.token_to_id(t) for t in EOT_TEXTS if tok.token_to_id(t) is not None)
    e = {"file": name, "vocab_size": tok.get_vocab_size(with_added_tokens=True), "eot": eot,
         "eot_text": tok.decode([eot], skip_special_tokens=False)}
    # encode_special_tokens: text that spells a special token is ordinary text (Encode);
    # without it, special spellings are the special tokens (EncodeSpecial).
    for key, as_text in (("ids", True), ("special_ids", False)):
        tok.encode_special_tokens = as_text
        ids = [tok.encode(text, add_special_tokens=False).ids for text in cases]
        back = [tok.decode(i, skip_special_tokens=False) for i in ids]
        # Where decoding gives the string back, or EncodeSpecial gives Encode's ids, the golden says null.
        e[key] = ids if as_text else [None if i == j else i for i, j in zip(ids, e["ids"])]
        e["decoded" if as_text else "decoded_special"] = [None if b == t else b for b, t in zip(back, cases)]
    if doc["decoder"]["type"] != "ByteLevel":
        e["decode_cases"] = decode_cases(tok, rng)
    lost = sum(d is not None for d in e["decoded"])
    print(f"{name}: {len(raw)} bytes, {e['vocab_size']} tokens, {lost} strings do not round-trip")
    return e


def main():
    docs = markdown()
    cases = texts(docs)
    rng = random.Random(0xDEC0DE)
    os.makedirs(OUT, exist_ok=True)
    entries = []
    for name, doc in variants(docs).items():
        raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        if len(raw) > 200_000:
            raise SystemExit(f"{name}: {len(raw)} bytes; keep test tokenizers under 200 KB")
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            f.write(raw)
        e = goldens(name, doc, raw, cases, rng)
        if name == "ignore.json":
            extra = {doc["model"]["vocab"][w] for w in EXTRA_WORDS}
            if not any(extra & set(i) for i in e["ids"]):
                raise SystemExit("ignore.json: no golden exercises ignore_merges")
        entries.append(e)
    lines = ["{", f'"generator": "scripts/torch/tokenizer_goldens.py with tokenizers {tokenizers.__version__}",',
             '"texts": [', ",\n".join(json.dumps(t, ensure_ascii=False) for t in cases), "],",
             '"tokenizers": [', ",\n".join(entry(e) for e in entries)]
    lines += ["]}", ""]
    with open(os.path.join(OUT, "goldens.json"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"wrote {len(cases)} strings")


if __name__ == "__main__":
    main()

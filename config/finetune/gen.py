"""Writes the tiny instruction set and its tokenizer (hand-run, never in CI).

    python3 config/finetune/gen.py

The examples are ours: small tasks with one right answer each (arithmetic,
reversing and spelling words, counting letters, ordering weekdays and
months), asked in a few phrasings, so that a model fine-tuned on
train.jsonl answers heldout.jsonl's unseen instances better. The tokenizer
is a byte-level BPE of 512 tokens trained on the training conversations,
with ChatML's special tokens, and tokenizer_config.json carries a ChatML
chat template. Output is deterministic (seeded).
"""

import json
import os
import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
WORDS = """apple river stone cloud garden window silver market pencil harbor
candle forest yellow bridge pocket winter summer rocket planet button tiger
ladder mirror basket violin island copper meadow lantern orange shadow
thunder velvet marble falcon walnut canyon pepper saddle kettle breeze""".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
SYSTEM = "You are a precise assistant. Answer briefly."


def task(rng):
    kind = rng.randrange(7)
    if kind == 0:
        a, b = rng.randrange(2, 60), rng.randrange(2, 60)
        q = rng.choice(["What is {a} plus {b}?", "Add {a} and {b}.", "Compute {a} + {b}."]).format(a=a, b=b)
        return q, f"{a} + {b} = {a + b}."
    if kind == 1:
        a, b = rng.randrange(30, 99), rng.randrange(1, 30)
        q = rng.choice(["What is {a} minus {b}?", "Subtract {b} from {a}."]).format(a=a, b=b)
        return q, f"{a} - {b} = {a - b}."
    w = rng.choice(WORDS)
    if kind == 2:
        q = rng.choice(["Reverse the word {w}.", "Write {w} backwards."]).format(w=w)
        return q, f"{w} reversed is {w[::-1]}."
    if kind == 3:
        q = rng.choice(["Spell {w} in capital letters.", "Write {w} in upper case."]).format(w=w)
        return q, f"{w.upper()}"
    if kind == 4:
        q = rng.choice(["How many letters are in {w}?", "Count the letters of {w}."]).format(w=w)
        return q, f"{w} has {len(w)} letters."
    if kind == 5:
        i = rng.randrange(7)
        q = rng.choice(["Which day comes after {d}?", "What day follows {d}?"]).format(d=DAYS[i])
        return q, f"After {DAYS[i]} comes {DAYS[(i + 1) % 7]}."
    i = rng.randrange(12)
    q = rng.choice(["Which month comes after {m}?", "What month follows {m}?"]).format(m=MONTHS[i])
    return q, f"After {MONTHS[i]} comes {MONTHS[(i + 1) % 12]}."


def example(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": SYSTEM})
    for _ in range(1 if rng.random() < 0.75 else 2):
        q, a = task(rng)
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return {"messages": msgs}


TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def main():
    rng = random.Random(20261206)
    train = [example(rng) for _ in range(600)]
    heldout = [example(rng) for _ in range(64)]
    for name, rows in [("train.jsonl", train), ("heldout.jsonl", heldout)]:
        with open(os.path.join(HERE, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = [m["role"] + "\n" + m["content"] for r in train for m in r["messages"]]
    tok.train_from_iterator(texts, trainer)
    tok.save(os.path.join(HERE, "tokenizer.json"))
    cfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "chat_template": TEMPLATE, "model_max_length": 128, "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(HERE, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()

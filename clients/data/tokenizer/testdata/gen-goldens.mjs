// Generates gpt2-goldens.json: GPT-2 token ids from js-tiktoken (an independent
// implementation with its own copy of the gpt2 ranks) for a few thousand varied
// strings. The Go tokenizer must reproduce every one of them.
//
// Run once from the repo root after scripts/setup.sh, then commit the output:
//   node clients/data/tokenizer/testdata/gen-goldens.mjs
// The strings come from a seeded generator, so reruns give identical output.
import { createRequire } from "node:module";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..", "..");
const tools = createRequire(join(root, "tools", "package.json"));
const { Tiktoken } = tools("js-tiktoken");
const gpt2Ranks = tools("js-tiktoken/ranks/gpt2");
const tiktokenVersion = JSON.parse(readFileSync(join(root, "tools", "node_modules", "js-tiktoken", "package.json"), "utf8")).version;
const corpusDir = join(root, "tools", "node_modules", "@stdlib", "datasets-sotu", "data");

// mulberry32: a small seeded PRNG, so the case list is reproducible.
let seed = 0x5eed1234;
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (a) => a[int(a.length)];
const cp = (lo, hi) => String.fromCodePoint(lo + int(hi - lo + 1));

const EOT = "<|endoftext|>";
// JS \s with the u flag, plus U+0085 and U+180E, where regex engines disagree.
const spaces = [" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u1680",
  "\u2003", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u0085", "\u180e"];
const words = ["the", "The", "of", "and", "Congress", "United", "States", "don't", "I'm",
  "we've", "they're", "you'll", "he'd", "it's", "ISN'T", "O'Neil", "rock'n'roll", "naïve",
  "café", "über", "Straße", "東京", "日本語", "привет", "Ελλάδα", "שלום", "مرحبا", "नमस्ते",
  "안녕하세요", "🙂", "👍🏽", "👨‍👩‍👧", "e\u0301", "ﬁ", "Ⅻ", "½", "٣", "१२३", "x²", "∑", "→",
  "$100", "3.14159", "1,000,000", "2021-01-20", "#hashtag", "@user", "http://example.org/a?b=c",
  "...", "!!!", "?!", "--", "—", "«quoted»", "“smart”", "‘single’", "(parens)", "[1]", "{}",
  EOT, "<|", "|>", "endoftext"];
const scripts = [[0x20, 0x7e], [0xa0, 0xff], [0x100, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0x3040, 0x30ff], [0x4e00, 0x4fff],
  [0xac00, 0xad00], [0x2000, 0x206f], [0x2190, 0x22ff], [0x300, 0x36f], [0x1f300, 0x1f64f],
  [0x1d400, 0x1d4ff], [0xff00, 0xffef]];

const docs = readdirSync(corpusDir).filter((f) => f.endsWith(".txt")).sort()
  .map((f) => readFileSync(join(corpusDir, f), "utf8"));

const cases = new Set([
  "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", " \t\n", "a", "A", "0", "00", "000", "0000",
  "Hello world", "Hello  world", "Hello\nworld", "Hello \nworld", "Hello\n world", "  leading",
  "trailing  ", "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "''", "'", "a's b't",
  EOT, EOT + EOT, " " + EOT, "text" + EOT + "more", "<|endoftext|", "|endoftext|>",
  "123456789012345678901234567890", "1 2 3", " 1", "  1", "a1b2c3", "3.0", "-1", "1e10",
  "\x7f", "a\x7fb", " \x7f\x7f!", "!\x7f?", "\x00\x01\x1f", "\x7f\x7f \x7f",
]);
const gens = [
  [700, () => { const d = pick(docs); const at = int(d.length); return d.slice(at, at + 1 + int(300)); }],
  [300, () => { let s = ""; for (let n = 1 + int(60); n > 0; n--) s += cp(0x20, 0x7e); return s; }],
  [450, () => { let s = ""; for (let n = 1 + int(8); n > 0; n--) { s += pick(words); let r = int(4); while (r-- > 0 || rand() < 0.3) s += pick(spaces); } return s; }],
  [250, () => { let s = ""; for (let n = 1 + int(5); n > 0; n--) { let d = ""; for (let k = 1 + int(15); k > 0; k--) d += cp(0x30, 0x39); s += d + pick(["", " ", ".", ",", "-", "  ", "\n", "x", "%"]); } return s; }],
  [300, () => { let s = ""; for (let n = 1 + int(10); n > 0; n--) s += pick(words) + pick(["", " ", "'s ", "'", "’s ", "n't ", "'LL ", "'re"]); return s; }],
  [650, () => { let s = ""; const [lo, hi] = pick(scripts); for (let n = 1 + int(25); n > 0; n--) s += rand() < 0.15 ? pick(spaces) : rand() < 0.2 ? cp(...pick(scripts)) : cp(lo, hi); return s; }],
  [200, () => { let s = ""; for (let n = 1 + int(4); n > 0; n--) s += pick(docs).slice(0, int(40)) + pick([EOT, " " + EOT, EOT + "\n", "<|endoftext|>>", "<<|endoftext|>"]); return s; }],
];
for (const [n, gen] of gens) for (let i = 0; i < n; i++) cases.add(gen());

// GPT-2's split pattern uses \s. OpenAI's tiktoken (Rust regex) and GPT-2's
// original encoder.py (Python regex) read it as Unicode White_Space, which has
// U+0085 and lacks U+FEFF; JavaScript's \s is the other way round. The goldens
// follow tiktoken, so \s is spelled out as White_Space here; every string
// without those two characters encodes identically under the stock pattern.
const whiteSpace = "[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const nonWhiteSpace = "[^" + whiteSpace.slice(1);
const patStr = gpt2Ranks.pat_str.replaceAll("[^\\s", "[^" + whiteSpace.slice(1, -1)).replaceAll("\\S", nonWhiteSpace).replaceAll("\\s", whiteSpace);
const enc = new Tiktoken({ ...gpt2Ranks, pat_str: patStr });
const stock = new Tiktoken(gpt2Ranks);
let divergent = 0;
const lines = [...cases].map((text) => {
  const tokens = enc.encode(text, [], []); // ordinary encoding: EOT text is plain text
  const stockTokens = stock.encode(text, [], []);
  if (stockTokens.join() !== tokens.join()) {
    if (!/[\u0085\ufeff]/.test(text)) throw new Error(`patterns disagree on ${JSON.stringify(text)}`);
    divergent++;
  }
  // js-tiktoken's decode drops a leading byte order mark (TextDecoder's default).
  const back = (text.startsWith("\ufeff") ? "\ufeff" : "") + enc.decode(tokens);
  if (back !== text) throw new Error(`js-tiktoken does not round-trip ${JSON.stringify(text)}`);
  return JSON.stringify({ text, tokens });
});
const out = [
  "{",
  `"generator": "gen-goldens.mjs with js-tiktoken ${tiktokenVersion}, gpt2 ranks, \\\\s as White_Space",`,
  `"pattern": ${JSON.stringify(patStr)},`,
  `"eot": ${JSON.stringify(enc.encode(EOT, "all"))},`,
  `"eot_text": ${JSON.stringify(enc.decode([50256]))},`,
  `"cases": [`,
  lines.join(",\n"),
  "]}",
  "",
].join("\n");
writeFileSync(join(here, "gpt2-goldens.json"), out);
console.log(`wrote ${cases.size} cases (${divergent} encode differently with JavaScript's \\s)`);

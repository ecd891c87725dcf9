package tokenizer

import (
	"cmp"
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/psyche-go/psyche/clients/data/shard"
)

// JSONPrefix starts the name of a tokenizer read from a tokenizer.json file;
// the rest is the start of the file's SHA-256 (JSONName). Shards and
// manifests record names of at most 16 bytes, so the name catches data
// prepared with another file; the run pins the whole hash on chain.
const JSONPrefix = "json:"

// JSONName is the name of the tokenizer.json file whose SHA-256 is hash.
func JSONName(hash [32]byte) string {
	return JSONPrefix + hex.EncodeToString(hash[:])[:16-len(JSONPrefix)]
}

// eotTexts are the spellings of end-of-text tokens, in order of preference.
// Each mixes letters and punctuation, so no GPT-2 pre-token can contain one
// and BPE never produces the EOT id from document text.
var eotTexts = []string{"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>"}

// JSONBPE is a BPE tokenizer read from a Hugging Face tokenizer.json, as
// transformers and tokenizers save them, in one of two families:
//
//   - byte-level BPE: GPT-2's layout (the ByteLevel pre-tokenizer with its own
//     split pattern), or Llama 3's and Qwen2's (a Split with their patterns,
//     then ByteLevel without one; Qwen2 adds an NFC normalizer);
//   - SentencePiece-style BPE over "▁"-spelled words with byte fallback, as
//     transformers converts Llama 2, Mistral and TinyLlama (a Metaspace
//     pre-tokenizer, or the older Prepend and Replace normalizers).
//
// ParseJSON accepts only the options that this type reproduces exactly and
// refuses the rest. Golden tests against tokenizers pin the equivalence, with
// one known gap: the split scanners classify characters with Go's Unicode
// 15.0 tables, while tokenizers 0.23 knows Unicode 16.0, so text in the
// letters and digits added since (CJK Extension I and a few rare scripts) can
// split differently; NFC has the same gap for characters added since.
//
// Like GPT2, a JSONBPE is not safe for concurrent use; Clone makes one for
// another goroutine without reading the file again.
type JSONBPE struct {
	*jsonTables
	cache map[string][]uint32
}

// jsonTables is what Clone shares.
type jsonTables struct {
	hash [32]byte
	eot  uint32
	textForm
	split     func(string) int  // the length of a text's first pre-token
	byteLevel bool              // BPE starts from bytes (else from characters, with byte fallback)
	byteIDs   [256]int32        // the token of each byte (byte-level: its character; else <0xXX>), or -1
	charIDs   map[rune]uint32   // without byteLevel: the vocab's one-character tokens
	merges    map[uint64]merge  // keyed by pairKey
	whole     map[string]uint32 // with ignore_merges: vocab ids by the pre-token they spell
	spell     []string          // byte-level: the bytes each id decodes to; else its token
	known     []bool            // which ids exist
	decoder   []decodeStep      // nil for byte-level: Decode joins spell
	special   map[string]uint32 // special added tokens by spelling
	longest   []string          // their spellings, longest first
}

// textForm is what happens to a text before it is cut into pre-tokens.
type textForm struct {
	nfc         bool        // the NFC normalizer
	spaces      spaceScheme // how spaces become "▁"
	prefixSpace bool        // ByteLevel's add_prefix_space
}

// spaceScheme is how a SentencePiece-style tokenizer.json marks words.
type spaceScheme uint8

const (
	spacesKept    spaceScheme = iota // byte-level: a space is a byte like any other
	spacesFirst                      // Metaspace, prepend_scheme "first"
	spacesPrepend                    // normalizers Prepend("▁") and Replace(" ", "▁")
)

type merge struct {
	rank uint32
	id   uint32
}

// noMerge ranks a pair that has no merge.
const noMerge = math.MaxUint32

// maxVocab is the most tokens a vocabulary may have: the most a dataset
// takes.
const maxVocab = shard.MaxVocab

// byteChar is GPT-2's byte-to-unicode mapping, which ByteLevel uses to spell
// bytes as printable characters; charByte inverts it.
var byteChar, charByte = func() (bc [256]rune, cb map[rune]byte) {
	cb = make(map[rune]byte, 256)
	n := rune(0)
	for b := range 256 {
		r := rune(b)
		if !('!' <= b && b <= '~' || 0xa1 <= b && b <= 0xac || 0xae <= b) {
			r = 256 + n
			n++
		}
		bc[b], cb[r] = r, byte(b)
	}
	return bc, cb
}()

// byteLevelDecode turns a token's characters back into the bytes they spell.
// Like tokenizers' ByteLevel decoder, it keeps a token that is not spelled in
// the mapping's alphabet (such as a special token with a space) as it is.
func byteLevelDecode(tok string) (string, bool) {
	b := make([]byte, 0, len(tok))
	for _, r := range tok {
		c, ok := charByte[r]
		if !ok {
			return tok, false
		}
		b = append(b, c)
	}
	return string(b), true
}

// hfJSON is the part of tokenizer.json that ParseJSON reads. truncation and
// padding shape model batches, not documents, and post_processor only adds
// special tokens around a sequence: documents are encoded without them, as
// tokenizers does with add_special_tokens=False.
type hfJSON struct {
	AddedTokens  []hfAddedToken  `json:"added_tokens"`
	Normalizer   *hfNormalizer   `json:"normalizer"`
	PreTokenizer *hfPreTokenizer `json:"pre_tokenizer"`
	Decoder      *hfDecoder      `json:"decoder"`
	Model        struct {
		Type         string           `json:"type"`
		Dropout      *float64         `json:"dropout"`
		Prefix       *string          `json:"continuing_subword_prefix"`
		Suffix       *string          `json:"end_of_word_suffix"`
		ByteFallback bool             `json:"byte_fallback"`
		IgnoreMerges bool             `json:"ignore_merges"`
		Vocab        map[string]int64 `json:"vocab"`
		Merges       json.RawMessage  `json:"merges"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
}

// hfPattern is a Split's or Replace's pattern: a literal string or a regex.
type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfNormalizer struct {
	Type    string         `json:"type"`
	Steps   []hfNormalizer `json:"normalizers"`
	Prepend string         `json:"prepend"`
	Pattern hfPattern      `json:"pattern"`
	Content string         `json:"content"`
}

type hfPreTokenizer struct {
	Type           string           `json:"type"`
	AddPrefixSpace bool             `json:"add_prefix_space"`
	UseRegex       *bool            `json:"use_regex"`
	Steps          []hfPreTokenizer `json:"pretokenizers"`
	Pattern        hfPattern        `json:"pattern"`
	Behavior       string           `json:"behavior"`
	Invert         bool             `json:"invert"`
	Replacement    string           `json:"replacement"`
	PrependScheme  string           `json:"prepend_scheme"`
	Split          *bool            `json:"split"`
}

type hfDecoder struct {
	Type          string      `json:"type"`
	Steps         []hfDecoder `json:"decoders"`
	Pattern       hfPattern   `json:"pattern"`
	Content       string      `json:"content"`
	Start         int         `json:"start"`
	Stop          int         `json:"stop"`
	Replacement   string      `json:"replacement"`
	PrependScheme string      `json:"prepend_scheme"`
}

// LoadJSON reads a tokenizer.json file; see ParseJSON.
func LoadJSON(path string) (*JSONBPE, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return t, nil
}

// ParseJSON reads a tokenizer.json: a BPE model in one of the layouts that
// JSONBPE describes, special added tokens only, one of which must be an
// end-of-text token (see eotTexts), and at most maxVocab tokens.
func ParseJSON(data []byte) (*JSONBPE, error) {
	var f hfJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t := &jsonTables{hash: sha256.Sum256(data), merges: make(map[uint64]merge), special: make(map[string]uint32)}
	if err := t.readLayout(&f); err != nil {
		return nil, err
	}
	names, err := t.readTokens(&f)
	if err != nil {
		return nil, err
	}
	m := &f.Model
	t.spell, t.known = make([]string, len(names)), make([]bool, len(names))
	if m.IgnoreMerges {
		t.whole = make(map[string]uint32)
	}
	if !t.byteLevel {
		t.charIDs = make(map[rune]uint32)
	}
	for id, tok := range names {
		if tok == nil {
			continue
		}
		t.spell[id], t.known[id] = *tok, true
		_, inVocab := m.Vocab[*tok]
		if !t.byteLevel {
			if r, n := utf8.DecodeRuneInString(*tok); inVocab && n == len(*tok) {
				t.charIDs[r] = uint32(id)
			}
			continue
		}
		spelled, byteLevel := byteLevelDecode(*tok)
		t.spell[id] = spelled
		// ignore_merges looks pre-tokens up in the model's vocab, where only
		// tokens spelled in the byte-level alphabet can match.
		if inVocab && byteLevel && t.whole != nil {
			t.whole[spelled] = uint32(id)
		}
	}
	for b := range 256 {
		tok := fmt.Sprintf("<0x%02X>", b)
		if t.byteLevel {
			tok = string(byteChar[b])
		}
		t.byteIDs[b] = -1
		if id, ok := m.Vocab[tok]; ok {
			t.byteIDs[b] = int32(id)
		}
	}
	if err := t.readMerges(&f); err != nil {
		return nil, err
	}
	return &JSONBPE{jsonTables: t, cache: make(map[string][]uint32)}, nil
}

// readTokens reads the vocab and the added tokens, and returns each id's
// token (nil for an id that no token has).
func (t *jsonTables) readTokens(f *hfJSON) ([]*string, error) {
	m := &f.Model
	size := len(m.Vocab)
	for _, a := range f.AddedTokens {
		if _, ok := m.Vocab[a.Content]; !ok {
			size++
		}
	}
	if size > maxVocab {
		return nil, fmt.Errorf("tokenizer.json: the vocabulary has %d tokens, added tokens included; datasets take at most %d", size, maxVocab)
	}
	names := make(map[int64]string, size)
	for tok, id := range m.Vocab {
		if err := checkID(tok, id); err != nil {
			return nil, err
		}
		if other, dup := names[id]; dup {
			return nil, fmt.Errorf("tokenizer.json: vocab tokens %q and %q share id %d", min(tok, other), max(tok, other), id)
		}
		names[id] = tok
	}
	for _, a := range f.AddedTokens {
		if err := t.readAddedToken(f, a, names); err != nil {
			return nil, err
		}
		names[a.ID] = a.Content
	}
	eot := slices.IndexFunc(eotTexts, func(s string) bool { _, ok := t.special[s]; return ok })
	if eot < 0 {
		return nil, fmt.Errorf("tokenizer.json: the tokenizer has no end-of-text token (a special added token spelled %s) to separate documents", strings.Join(eotTexts, ", "))
	}
	t.eot = t.special[eotTexts[eot]]
	for s := range t.special {
		t.longest = append(t.longest, s)
	}
	// Longest first, as tokenizers matches added tokens leftmost-longest.
	slices.SortFunc(t.longest, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })

	size = 0
	for id := range names {
		size = max(size, int(id)+1)
	}
	byID := make([]*string, size)
	for id, tok := range names {
		byID[id] = &tok
	}
	return byID, nil
}

// readAddedToken checks one added token against the vocab and the options
// that EncodeSpecial reproduces, and records it.
func (t *jsonTables) readAddedToken(f *hfJSON, a hfAddedToken, names map[int64]string) error {
	if err := checkID(a.Content, a.ID); err != nil {
		return err
	}
	flag := ""
	switch {
	case !a.Special:
		return fmt.Errorf("tokenizer.json: added token %q (id %d) is not special; non-special added tokens are not supported", a.Content, a.ID)
	case a.Content == "":
		return fmt.Errorf("tokenizer.json: added token %d has empty content", a.ID)
	case a.SingleWord:
		flag = "single_word"
	case a.Lstrip:
		flag = "lstrip"
	case a.Rstrip:
		flag = "rstrip"
	case a.Normalized && f.Normalizer != nil:
		// tokenizers would look for it in normalized text.
		flag = "normalized"
	}
	if flag != "" {
		return fmt.Errorf("tokenizer.json: added token %q has %s true, which is not supported", a.Content, flag)
	}
	if f.Normalizer == nil && len(f.AddedTokens) > 0 && a.Normalized != f.AddedTokens[0].Normalized {
		// tokenizers matches the two kinds in separate passes.
		return fmt.Errorf("tokenizer.json: added tokens %q and %q differ in normalized, which is not supported", f.AddedTokens[0].Content, a.Content)
	}
	if name, ok := names[a.ID]; ok && name != a.Content {
		return fmt.Errorf("tokenizer.json: added token %q has id %d, which the vocab gives to %q", a.Content, a.ID, name)
	}
	if id, ok := f.Model.Vocab[a.Content]; ok && id != a.ID {
		return fmt.Errorf("tokenizer.json: added token %q has id %d but id %d in the vocab", a.Content, a.ID, id)
	}
	t.special[a.Content] = uint32(a.ID)
	return nil
}

// readMerges ranks the merges. Without byte-level, it refuses a merge that
// makes a token with "▁" after other characters (see splitMetaspace).
func (t *jsonTables) readMerges(f *hfJSON) error {
	pairs, err := parseMerges(f.Model.Merges)
	if err != nil {
		return err
	}
	vocab := f.Model.Vocab
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		if !okA || !okB {
			return fmt.Errorf("tokenizer.json: merge %d (%q, %q) uses a token that is not in the vocab", rank, p[0], p[1])
		}
		made := p[0] + p[1]
		id, ok := vocab[made]
		if !ok {
			return fmt.Errorf("tokenizer.json: merge %d (%q, %q) makes %q, which is not in the vocab", rank, p[0], p[1], made)
		}
		if !t.byteLevel && strings.Contains(strings.TrimLeft(made, metaspace), metaspace) {
			return fmt.Errorf("tokenizer.json: merge %d (%q, %q) makes %q, with %q after other characters, which is not supported (SentencePiece vocabularies start words with it)", rank, p[0], p[1], made, metaspace)
		}
		// A repeated pair takes its last rank, as in tokenizers.
		t.merges[pairKey(uint32(a), uint32(b))] = merge{rank: uint32(rank), id: uint32(id)}
	}
	return nil
}

// readLayout refuses the options that JSONBPE does not implement, and sets
// how text is normalized, pre-tokenized and decoded.
func (t *jsonTables) readLayout(f *hfJSON) error {
	m := &f.Model
	switch {
	case m.Type != "BPE":
		return fmt.Errorf("tokenizer.json: model type %q is not supported (only BPE)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("tokenizer.json: model dropout %g is not supported (encoding must be deterministic)", *m.Dropout)
	case m.Prefix != nil && *m.Prefix != "":
		return fmt.Errorf("tokenizer.json: model continuing_subword_prefix %q is not supported (only null or \"\")", *m.Prefix)
	case m.Suffix != nil && *m.Suffix != "":
		return fmt.Errorf("tokenizer.json: model end_of_word_suffix %q is not supported (only null or \"\")", *m.Suffix)
	case m.Vocab == nil || m.Merges == nil:
		return fmt.Errorf("tokenizer.json: the model has no vocab or no merges")
	}
	if m.ByteFallback {
		return t.readSentencePiece(f)
	}
	return t.readByteLevel(f)
}

const byteLevelLayouts = "only byte-level BPE with GPT-2's, Llama 3's or Qwen2's split, or SentencePiece-style BPE with byte_fallback"

// readByteLevel reads the layouts of byte-level BPE.
func (t *jsonTables) readByteLevel(f *hfJSON) error {
	t.byteLevel = true
	if n := f.Normalizer; n != nil {
		if n.Type != "NFC" {
			return fmt.Errorf("tokenizer.json: normalizer type %q is not supported (only null or NFC with byte-level BPE)", n.Type)
		}
		t.nfc = true
	}
	if err := t.readByteLevelPre(f.PreTokenizer); err != nil {
		return err
	}
	if d := f.Decoder; d != nil && d.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer.json: decoder type %q is not supported (only ByteLevel or null with byte-level BPE)", d.Type)
	}
	return nil
}

// readByteLevelPre reads the pre-tokenizer of byte-level BPE.
func (t *jsonTables) readByteLevelPre(pre *hfPreTokenizer) error {
	if pre != nil && pre.Type == "Sequence" && len(pre.Steps) == 1 {
		pre = &pre.Steps[0]
	}
	switch {
	case pre == nil:
		return fmt.Errorf("tokenizer.json: pre_tokenizer null is not supported (%s)", byteLevelLayouts)
	case pre.Type == "Sequence" && len(pre.Steps) == 2 && pre.Steps[0].Type == "Split":
		return t.readSplit(&pre.Steps[0], &pre.Steps[1])
	case pre.Type != "ByteLevel":
		return fmt.Errorf("tokenizer.json: pre_tokenizer type %q is not supported (%s)", pre.Type, byteLevelLayouts)
	case pre.UseRegex != nil && !*pre.UseRegex:
		return fmt.Errorf("tokenizer.json: pre_tokenizer ByteLevel with use_regex false is not supported (only after a Split)")
	}
	t.split, t.prefixSpace = splitPiece, pre.AddPrefixSpace
	return nil
}

// readSplit reads the pre-tokenizers Split and ByteLevel of Llama 3 and Qwen2.
func (t *jsonTables) readSplit(split, bl *hfPreTokenizer) error {
	scan, known := splitPatterns[deref(split.Pattern.Regex)]
	switch {
	case split.Pattern.Regex == nil:
		return fmt.Errorf("tokenizer.json: pre_tokenizer Split pattern %q is not supported (only Llama 3's and Qwen2's regexes)", deref(split.Pattern.String))
	case !known:
		return fmt.Errorf("tokenizer.json: pre_tokenizer Split pattern %q is not supported (only Llama 3's and Qwen2's)", *split.Pattern.Regex)
	case split.Behavior != "Isolated":
		return fmt.Errorf("tokenizer.json: pre_tokenizer Split behavior %q is not supported (only Isolated)", split.Behavior)
	case split.Invert:
		return fmt.Errorf("tokenizer.json: pre_tokenizer Split invert true is not supported")
	case bl.Type != "ByteLevel":
		return fmt.Errorf("tokenizer.json: pre_tokenizer type %q after Split is not supported (only ByteLevel)", bl.Type)
	case bl.UseRegex == nil || *bl.UseRegex:
		return fmt.Errorf("tokenizer.json: pre_tokenizer ByteLevel after Split with use_regex true is not supported (it would split again)")
	case bl.AddPrefixSpace:
		return fmt.Errorf("tokenizer.json: pre_tokenizer ByteLevel after Split with add_prefix_space true is not supported")
	}
	t.split = scan
	return nil
}

// readSentencePiece reads the layouts that transformers' converters write for
// SentencePiece BPE models: Metaspace, or the legacy normalizers.
func (t *jsonTables) readSentencePiece(f *hfJSON) error {
	if f.Model.IgnoreMerges {
		return fmt.Errorf("tokenizer.json: model ignore_merges true is not supported with byte_fallback")
	}
	pre, n := f.PreTokenizer, f.Normalizer
	switch {
	case pre != nil && n != nil:
		return fmt.Errorf("tokenizer.json: normalizer type %q is not supported with a pre_tokenizer in SentencePiece-style BPE (only null)", n.Type)
	case pre != nil:
		if err := checkMetaspace("pre_tokenizer", pre.Type, pre.Replacement, pre.PrependScheme); err != nil {
			return err
		}
		if pre.Split == nil || *pre.Split {
			return fmt.Errorf("tokenizer.json: pre_tokenizer Metaspace with split true is not supported (only false)")
		}
		t.spaces = spacesFirst
	case n != nil:
		if !isLegacySentencePiece(n) {
			return fmt.Errorf("tokenizer.json: normalizer type %q is not supported with byte_fallback (only Metaspace as pre_tokenizer, or the normalizers Prepend(\"▁\") and Replace(\" \", \"▁\") in a Sequence)", n.Type)
		}
		t.spaces = spacesPrepend
	default:
		return fmt.Errorf("tokenizer.json: pre_tokenizer and normalizer null are not supported with byte_fallback (%s)", byteLevelLayouts)
	}
	t.split = splitMetaspace
	steps, err := readDecoder(f.Decoder)
	if err != nil {
		return err
	}
	t.decoder = steps
	return nil
}

func checkMetaspace(key, typ, replacement, scheme string) error {
	switch {
	case typ != "Metaspace":
		return fmt.Errorf("tokenizer.json: %s type %q is not supported with byte_fallback (only Metaspace)", key, typ)
	case replacement != metaspace:
		return fmt.Errorf("tokenizer.json: %s Metaspace replacement %q is not supported (only %q)", key, replacement, metaspace)
	case scheme != "first":
		return fmt.Errorf("tokenizer.json: %s Metaspace prepend_scheme %q is not supported (only \"first\")", key, scheme)
	}
	return nil
}

// isLegacySentencePiece says whether n is Sequence[Prepend("▁"), Replace(" ", "▁")].
func isLegacySentencePiece(n *hfNormalizer) bool {
	if n.Type != "Sequence" || len(n.Steps) != 2 {
		return false
	}
	p, r := n.Steps[0], n.Steps[1]
	return p.Type == "Prepend" && p.Prepend == metaspace &&
		r.Type == "Replace" && r.Pattern.Regex == nil && deref(r.Pattern.String) == " " && r.Content == metaspace
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func checkID(tok string, id int64) error {
	if id < 0 || id >= maxVocab {
		return fmt.Errorf("tokenizer.json: token %q has id %d; ids must be in [0, %d), the vocabularies datasets take", tok, id, maxVocab)
	}
	return nil
}

// parseMerges reads merges in either of tokenizers' formats: "a b" strings,
// or [a, b] pairs (written since tokenizers 0.20, as tokens may hold spaces).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var legacy []string
	if err := json.Unmarshal(raw, &legacy); err == nil {
		pairs := make([][2]string, 0, len(legacy))
		for _, line := range legacy {
			if strings.HasPrefix(line, "#version") {
				continue // a merges.txt header that tokenizers skips too
			}
			a, b, ok := strings.Cut(line, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer.json: merge %q is not two tokens separated by a space", line)
			}
			pairs = append(pairs, [2]string{a, b})
		}
		return pairs, nil
	}
	var lists [][]string
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model merges must be a list of \"a b\" strings or of [a, b] pairs")
	}
	pairs := make([][2]string, len(lists))
	for i, l := range lists {
		if len(l) != 2 {
			return nil, fmt.Errorf("tokenizer.json: merge %d has %d tokens, not 2", i, len(l))
		}
		pairs[i] = [2]string{l[0], l[1]}
	}
	return pairs, nil
}

// Clone returns a tokenizer that shares t's tables but not its cache, for
// use in another goroutine.
func (t *JSONBPE) Clone() *JSONBPE {
	return &JSONBPE{jsonTables: t.jsonTables, cache: make(map[string][]uint32)}
}

// Hash is the SHA-256 of the tokenizer.json that t was read from.
func (t *JSONBPE) Hash() [32]byte { return t.hash }

func (t *JSONBPE) Name() string   { return JSONName(t.hash) }
func (t *JSONBPE) VocabSize() int { return len(t.spell) }
func (t *JSONBPE) EOT() uint32    { return t.eot }

// Encode tokenizes text as tokenizers does with encode_special_tokens set:
// special spellings are ordinary text.
func (t *JSONBPE) Encode(text string) ([]uint32, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("json tokenizer: invalid UTF-8 at byte %d", invalidUTF8Offset(text))
	}
	return t.encodeSection(make([]uint32, 0, len(text)/4+1), text, true)
}

// EncodeSpecial tokenizes text in which the spellings of special tokens (such
// as "<|im_start|>" in a chat template) stand for those tokens, as
// tokenizers' encode(text, add_special_tokens=False) does: the text is cut at
// each special spelling (the longest where several start at the same place)
// and the sections between are encoded as by Encode, the first alone as the
// start of the text. Documents go through Encode instead, so that they
// cannot inject separators.
func (t *JSONBPE) EncodeSpecial(text string) ([]uint32, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("json tokenizer: invalid UTF-8 at byte %d", invalidUTF8Offset(text))
	}
	ids := make([]uint32, 0, len(text)/4+1)
	start := 0
	for i := 0; i < len(text); i++ {
		sp := t.specialAt(text[i:])
		if sp == "" {
			continue
		}
		var err error
		if ids, err = t.encodeSection(ids, text[start:i], start == 0); err != nil {
			return nil, err
		}
		ids = append(ids, t.special[sp])
		start = i + len(sp)
		i = start - 1
	}
	return t.encodeSection(ids, text[start:], start == 0)
}

// specialAt is the longest special spelling that starts s, or "".
func (t *JSONBPE) specialAt(s string) string {
	for _, sp := range t.longest {
		if strings.HasPrefix(s, sp) {
			return sp
		}
	}
	return ""
}

// SpecialIn is the first special spelling in text (the longest of those
// that start there), or "" when text spells none. Chat messages must spell
// none: a message that could would forge a turn of the template.
func (t *JSONBPE) SpecialIn(text string) string {
	for i := range len(text) {
		if sp := t.specialAt(text[i:]); sp != "" {
			return sp
		}
	}
	return ""
}

// SpecialID is the id of the special added token spelled text.
func (t *JSONBPE) SpecialID(text string) (uint32, bool) {
	id, ok := t.special[text]
	return id, ok
}

// encodeSection appends the tokens of one section of text with no special
// tokens in it; first says whether it starts the text.
func (t *JSONBPE) encodeSection(ids []uint32, text string, first bool) ([]uint32, error) {
	for rest := t.form(text, first); rest != ""; {
		n := t.split(rest)
		piece := rest[:n]
		rest = rest[n:]
		if cached, ok := t.cache[piece]; ok {
			ids = append(ids, cached...)
			continue
		}
		enc, err := t.encodePiece(piece)
		if err != nil {
			return nil, err
		}
		if len(t.cache) >= maxCachedPieces {
			clear(t.cache)
		}
		// Clone the key so the cache does not pin the whole document.
		t.cache[strings.Clone(piece)] = enc
		ids = append(ids, enc...)
	}
	return ids, nil
}

// form applies the normalizer, and the pre-tokenizer's work before the split,
// to a section of text.
func (f textForm) form(s string, first bool) string {
	if f.nfc {
		s = norm.NFC.String(s)
	}
	switch {
	case s == "":
	case f.spaces == spacesFirst:
		// Metaspace's prepend_scheme "first": only the start of the text
		// gets a word marker, and only where it has none.
		s = strings.ReplaceAll(s, " ", metaspace)
		if first && !strings.HasPrefix(s, metaspace) {
			s = metaspace + s
		}
	case f.spaces == spacesPrepend:
		s = metaspace + strings.ReplaceAll(s, " ", metaspace)
	case f.prefixSpace && s[0] != ' ':
		// ByteLevel's add_prefix_space: every section's first word gets the
		// leading space that every later word has.
		s = " " + s
	}
	return s
}

// encodePiece runs BPE on one pre-token: starting from one token per byte
// (byte-level) or per character, it applies the lowest-ranked merge among
// adjacent pairs (the leftmost on a tie) until none applies, which is what
// tokenizers' merge queue amounts to.
func (t *JSONBPE) encodePiece(piece string) ([]uint32, error) {
	if id, ok := t.whole[piece]; ok {
		return []uint32{id}, nil // ignore_merges: a pre-token in the vocab is one token
	}
	ids, err := t.symbols(piece)
	if err != nil {
		return nil, err
	}
	if len(ids) < 2 {
		return ids, nil
	}
	if len(ids) > longPiece {
		return t.mergeLong(ids), nil
	}
	return t.mergeScan(ids), nil
}

// mergeScan applies the merges to a piece's symbols, lowest rank first and
// leftmost among equals. Most pieces are short, and a scan for the best
// rank beats a heap.
func (t *JSONBPE) mergeScan(ids []uint32) []uint32 {
	// pairs[i] is the merge of ids[i] and ids[i+1].
	pairs := make([]merge, len(ids)-1)
	for i := range pairs {
		pairs[i] = t.merge(ids[i], ids[i+1])
	}
	for len(pairs) > 0 {
		best := 0
		for i := range pairs {
			if pairs[i].rank < pairs[best].rank {
				best = i
			}
		}
		if pairs[best].rank == noMerge {
			break
		}
		ids[best] = pairs[best].id
		ids = slices.Delete(ids, best+1, best+2)
		pairs = slices.Delete(pairs, best, best+1)
		if best > 0 {
			pairs[best-1] = t.merge(ids[best-1], ids[best])
		}
		if best < len(pairs) {
			pairs[best] = t.merge(ids[best], ids[best+1])
		}
	}
	return ids
}

// longPiece is the symbol count above which a piece merges by heap: the scan
// costs the square of its length, and text without spaces (SentencePiece's
// pieces run from one ▁ to the next) makes pieces as long as documents.
const longPiece = 64

// mergeLong applies the same merges as encodePiece's scan, lowest rank
// first and leftmost among equals, in O(n log n): candidates wait in a heap
// ordered by (rank, position of their left symbol) and are dropped when
// popped if either symbol has merged since.
func (t *JSONBPE) mergeLong(ids []uint32) []uint32 {
	n := len(ids)
	next, prev := make([]int, n), make([]int, n)
	for i := range ids {
		next[i], prev[i] = i+1, i-1
	}
	next[n-1] = -1
	h := &pairHeap{}
	push := func(i int) {
		if j := next[i]; j >= 0 {
			if m := t.merge(ids[i], ids[j]); m.rank != noMerge {
				heap.Push(h, pairCand{m: m, pos: i, left: ids[i], right: ids[j]})
			}
		}
	}
	for i := range n - 1 {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(pairCand)
		j := next[c.pos]
		if ids[c.pos] != c.left || j < 0 || ids[j] != c.right || prev[c.pos] == -2 {
			continue // stale: a symbol of the pair merged since it was pushed
		}
		ids[c.pos] = c.m.id
		next[c.pos] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = c.pos
		}
		prev[j] = -2 // merged away
		if p := prev[c.pos]; p >= 0 {
			push(p)
		}
		push(c.pos)
	}
	out := ids[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

// pairCand is a merge of the symbols at pos and the one after it, as they
// were when it was pushed.
type pairCand struct {
	m           merge
	pos         int
	left, right uint32
}

type pairHeap []pairCand

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	return h[a].m.rank < h[b].m.rank || h[a].m.rank == h[b].m.rank && h[a].pos < h[b].pos
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCand)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// symbols are the tokens that BPE starts a piece from: its bytes'
// characters in the byte-level alphabet, or its characters, each character
// missing from the vocab as its bytes' <0xXX> tokens (byte fallback).
func (t *JSONBPE) symbols(piece string) ([]uint32, error) {
	ids := make([]uint32, 0, len(piece))
	for i := 0; i < len(piece); {
		n := 1
		if !t.byteLevel {
			var r rune
			r, n = utf8.DecodeRuneInString(piece[i:])
			if id, ok := t.charIDs[r]; ok {
				ids = append(ids, id)
				i += n
				continue
			}
		}
		for _, b := range []byte(piece[i : i+n]) {
			id := t.byteIDs[b]
			if id < 0 {
				// tokenizers would drop the byte or emit unk_token, losing text.
				return nil, fmt.Errorf("json tokenizer: byte 0x%02x in %q has no token in the vocabulary", b, piece)
			}
			ids = append(ids, uint32(id))
		}
		i += n
	}
	return ids, nil
}

// pairKey keys the merge of a and b; ids take up to 32 bits.
func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

func (t *JSONBPE) merge(a, b uint32) merge {
	if m, ok := t.merges[pairKey(a, b)]; ok {
		return m
	}
	return merge{rank: noMerge}
}

package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
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

// JSONBPE is a byte-level BPE tokenizer read from a Hugging Face tokenizer.json,
// as transformers and tokenizers save them (GPT-2's layout). ParseJSON accepts
// only the options that this type reproduces exactly and refuses the rest.
// Golden tests against tokenizers pin the equivalence, with one known gap:
// splitPiece classifies characters with Go's Unicode 15.0 tables, while
// tokenizers 0.23 knows Unicode 16.0, so text in the letters and digits added
// since (CJK Extension I and a few rare scripts) can split differently.
//
// Like GPT2, a JSONBPE is not safe for concurrent use; Clone makes one for
// another goroutine without reading the file again.
type JSONBPE struct {
	*jsonTables
	cache map[string][]uint16
}

// jsonTables is what Clone shares.
type jsonTables struct {
	hash        [32]byte
	eot         uint16
	prefixSpace bool
	byteIDs     [256]int32        // the token of each single byte, or -1
	merges      map[uint32]merge  // keyed by left<<16 | right
	whole       map[string]uint16 // with ignore_merges: vocab ids by the bytes they spell
	spell       []string          // the bytes each id decodes to
	known       []bool            // which ids exist
}

type merge struct {
	rank uint32
	id   uint16
}

// noMerge ranks a pair that has no merge.
const noMerge = math.MaxUint32

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
	AddedTokens []struct {
		ID      int64  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   *struct{ Type string } `json:"normalizer"`
	PreTokenizer *hfPreTokenizer        `json:"pre_tokenizer"`
	Decoder      *struct{ Type string } `json:"decoder"`
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

type hfPreTokenizer struct {
	Type           string           `json:"type"`
	AddPrefixSpace bool             `json:"add_prefix_space"`
	UseRegex       *bool            `json:"use_regex"`
	Steps          []hfPreTokenizer `json:"pretokenizers"`
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

// ParseJSON reads a tokenizer.json: a BPE model over the ByteLevel
// pre-tokenizer with GPT-2's split pattern, no normalizer, and special added
// tokens only, one of which must be an end-of-text token (see eotTexts).
// Every id must fit in a uint16.
func ParseJSON(data []byte) (*JSONBPE, error) {
	var f hfJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	pre, err := supported(&f)
	if err != nil {
		return nil, err
	}
	m := &f.Model
	t := &jsonTables{hash: sha256.Sum256(data), prefixSpace: pre.AddPrefixSpace, merges: make(map[uint32]merge)}
	names := make(map[int64]string, len(m.Vocab))
	for tok, id := range m.Vocab {
		if err := checkID(tok, id); err != nil {
			return nil, err
		}
		if other, dup := names[id]; dup {
			return nil, fmt.Errorf("tokenizer.json: vocab tokens %q and %q share id %d", min(tok, other), max(tok, other), id)
		}
		names[id] = tok
	}
	special := make(map[string]uint16)
	for _, a := range f.AddedTokens {
		if err := checkID(a.Content, a.ID); err != nil {
			return nil, err
		}
		if !a.Special {
			return nil, fmt.Errorf("tokenizer.json: added token %q (id %d) is not special; non-special added tokens are not supported", a.Content, a.ID)
		}
		if name, ok := names[a.ID]; ok && name != a.Content {
			return nil, fmt.Errorf("tokenizer.json: added token %q has id %d, which the vocab gives to %q", a.Content, a.ID, name)
		}
		if id, ok := m.Vocab[a.Content]; ok && id != a.ID {
			return nil, fmt.Errorf("tokenizer.json: added token %q has id %d but id %d in the vocab", a.Content, a.ID, id)
		}
		names[a.ID] = a.Content
		special[a.Content] = uint16(a.ID)
	}
	eot := slices.IndexFunc(eotTexts, func(s string) bool { _, ok := special[s]; return ok })
	if eot < 0 {
		return nil, fmt.Errorf("tokenizer.json: the tokenizer has no end-of-text token (a special added token spelled %s) to separate documents", strings.Join(eotTexts, ", "))
	}
	t.eot = special[eotTexts[eot]]

	size := int64(0)
	for id := range names {
		size = max(size, id+1)
	}
	t.spell, t.known = make([]string, size), make([]bool, size)
	if m.IgnoreMerges {
		t.whole = make(map[string]uint16)
	}
	for id, tok := range names {
		spelled, byteLevel := byteLevelDecode(tok)
		t.spell[id], t.known[id] = spelled, true
		// ignore_merges looks pre-tokens up in the model's vocab, where only
		// tokens spelled in the byte-level alphabet can match.
		if _, inVocab := m.Vocab[tok]; inVocab && byteLevel && t.whole != nil {
			t.whole[spelled] = uint16(id)
		}
	}
	for b, r := range byteChar {
		t.byteIDs[b] = -1
		if id, ok := m.Vocab[string(r)]; ok {
			t.byteIDs[b] = int32(id)
		}
	}

	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	for rank, p := range pairs {
		a, okA := m.Vocab[p[0]]
		b, okB := m.Vocab[p[1]]
		if !okA || !okB {
			return nil, fmt.Errorf("tokenizer.json: merge %d (%q, %q) uses a token that is not in the vocab", rank, p[0], p[1])
		}
		id, ok := m.Vocab[p[0]+p[1]]
		if !ok {
			return nil, fmt.Errorf("tokenizer.json: merge %d (%q, %q) makes %q, which is not in the vocab", rank, p[0], p[1], p[0]+p[1])
		}
		// A repeated pair takes its last rank, as in tokenizers.
		t.merges[uint32(a)<<16|uint32(b)] = merge{rank: uint32(rank), id: uint16(id)}
	}
	return &JSONBPE{jsonTables: t, cache: make(map[string][]uint16)}, nil
}

const onlyByteLevel = "only ByteLevel BPE tokenizers, as GPT-2 and most transformers BPE models use"

// supported refuses the options that JSONBPE does not implement, and returns
// the ByteLevel pre-tokenizer.
func supported(f *hfJSON) (*hfPreTokenizer, error) {
	m := &f.Model
	switch {
	case m.Type != "BPE":
		return nil, fmt.Errorf("tokenizer.json: model type %q is not supported (only BPE)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("tokenizer.json: model dropout %g is not supported (encoding must be deterministic)", *m.Dropout)
	case m.Prefix != nil && *m.Prefix != "":
		return nil, fmt.Errorf("tokenizer.json: model continuing_subword_prefix %q is not supported (only null or \"\")", *m.Prefix)
	case m.Suffix != nil && *m.Suffix != "":
		return nil, fmt.Errorf("tokenizer.json: model end_of_word_suffix %q is not supported (only null or \"\")", *m.Suffix)
	case m.ByteFallback:
		return nil, fmt.Errorf("tokenizer.json: model byte_fallback true is not supported (byte-level BPE has a token for every byte)")
	case m.Vocab == nil || m.Merges == nil:
		return nil, fmt.Errorf("tokenizer.json: the model has no vocab or no merges")
	case f.Normalizer != nil:
		return nil, fmt.Errorf("tokenizer.json: normalizer type %q is not supported (only null)", f.Normalizer.Type)
	case f.Decoder != nil && f.Decoder.Type != "ByteLevel":
		return nil, fmt.Errorf("tokenizer.json: decoder type %q is not supported (only ByteLevel or null)", f.Decoder.Type)
	}
	pre := f.PreTokenizer
	if pre != nil && pre.Type == "Sequence" && len(pre.Steps) == 1 {
		pre = &pre.Steps[0]
	}
	switch {
	case pre == nil:
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer null is not supported (%s)", onlyByteLevel)
	case pre.Type != "ByteLevel":
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer type %q is not supported (%s)", pre.Type, onlyByteLevel)
	case pre.UseRegex != nil && !*pre.UseRegex:
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer ByteLevel with use_regex false is not supported (only GPT-2's split pattern)")
	}
	return pre, nil
}

func checkID(tok string, id int64) error {
	if id < 0 || id > math.MaxUint16 {
		return fmt.Errorf("tokenizer.json: token %q has id %d; ids must be in [0, 65536) (tokens are stored as uint16)", tok, id)
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
	return &JSONBPE{jsonTables: t.jsonTables, cache: make(map[string][]uint16)}
}

// Hash is the SHA-256 of the tokenizer.json that t was read from.
func (t *JSONBPE) Hash() [32]byte { return t.hash }

func (t *JSONBPE) Name() string   { return JSONName(t.hash) }
func (t *JSONBPE) VocabSize() int { return len(t.spell) }
func (t *JSONBPE) EOT() uint16    { return t.eot }

func (t *JSONBPE) Encode(text string) ([]uint16, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("json tokenizer: invalid UTF-8 at byte %d", invalidUTF8Offset(text))
	}
	if t.prefixSpace && text != "" && text[0] != ' ' {
		// ByteLevel's add_prefix_space: the first word gets the leading
		// space that every later word has.
		text = " " + text
	}
	ids := make([]uint16, 0, len(text)/4+1)
	for rest := text; rest != ""; {
		n := splitPiece(rest)
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

// encodePiece runs BPE on one pre-token: starting from one token per byte, it
// applies the lowest-ranked merge among adjacent pairs (the leftmost on a tie)
// until none applies, which is what tokenizers' merge queue amounts to.
func (t *JSONBPE) encodePiece(piece string) ([]uint16, error) {
	if id, ok := t.whole[piece]; ok {
		return []uint16{id}, nil // ignore_merges: a pre-token in the vocab is one token
	}
	ids := make([]uint16, len(piece))
	for i := range len(piece) {
		id := t.byteIDs[piece[i]]
		if id < 0 {
			// tokenizers would drop the byte or emit unk_token, losing text.
			return nil, fmt.Errorf("json tokenizer: byte 0x%02x in %q has no token in the vocabulary", piece[i], piece)
		}
		ids[i] = uint16(id)
	}
	if len(ids) < 2 {
		return ids, nil
	}
	// pairs[i] is the merge of ids[i] and ids[i+1]. Pieces are short, so a
	// scan for the best rank beats a heap.
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
	return ids, nil
}

func (t *JSONBPE) merge(a, b uint16) merge {
	if m, ok := t.merges[uint32(a)<<16|uint32(b)]; ok {
		return m
	}
	return merge{rank: noMerge}
}

func (t *JSONBPE) Decode(ids []uint16) (string, error) {
	var sb strings.Builder
	for i, id := range ids {
		if int(id) >= len(t.spell) || !t.known[id] {
			return "", fmt.Errorf("json tokenizer: token %d at position %d is not in the vocabulary", id, i)
		}
		sb.WriteString(t.spell[id])
	}
	return sb.String(), nil
}

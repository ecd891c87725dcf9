package shard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMerkleRootFollowsRFC6962(t *testing.T) {
	leaf := func(s string) Hash { return LeafHash([]byte(s)) }
	a, b, c, d, e := leaf("a"), leaf("b"), leaf("c"), leaf("d"), leaf("e")
	tests := []struct {
		name   string
		leaves []Hash
		want   Hash
	}{
		{"empty", nil, sha256.Sum256(nil)},
		{"one", []Hash{a}, a},
		{"two", []Hash{a, b}, nodeHash(a, b)},
		{"three splits 2+1", []Hash{a, b, c}, nodeHash(nodeHash(a, b), c)},
		{"five splits 4+1", []Hash{a, b, c, d, e}, nodeHash(nodeHash(nodeHash(a, b), nodeHash(c, d)), e)},
	}
	for _, tt := range tests {
		if got := MerkleRoot(tt.leaves); got != tt.want {
			t.Errorf("%s: root %x, want %x", tt.name, got, tt.want)
		}
	}
	// RFC 6962's leaf hash of the empty string.
	empty := leaf("")
	if got := hex.EncodeToString(empty[:]); got != "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d" {
		t.Errorf("LeafHash(\"\") = %s", got)
	}
}

func TestHeaderRoundTripAndRejects(t *testing.T) {
	h := Header{VocabSize: 50257, EOT: 50256, SeqLen: 1024, SeqsPerChunk: 31, NumSequences: 7, FirstIndex: 99, Tokenizer: "gpt2"}
	raw, err := h.MarshalBinary()
	if err != nil || len(raw) != HeaderSize {
		t.Fatalf("MarshalBinary: %d bytes, %v", len(raw), err)
	}
	var back Header
	if err := back.UnmarshalBinary(raw); err != nil || back != h {
		t.Fatalf("round trip gave %+v, %v", back, err)
	}
	corrupt := func(at int, v byte) []byte { b := slices.Clone(raw); b[at] = v; return b }
	for name, b := range map[string][]byte{
		"short":        raw[:10],
		"magic":        corrupt(0, 'X'),
		"version":      corrupt(8, 9),
		"header size":  corrupt(12, 65),
		"name garbage": corrupt(60, 'x'),
	} {
		if err := new(Header).UnmarshalBinary(b); err == nil {
			t.Errorf("%s: UnmarshalBinary accepted a corrupt header", name)
		}
	}
}

// writeDataset packs docs with seq_len 4 (5 tokens per sequence), 2 sequences
// per chunk and 4 per shard.
func writeDataset(t *testing.T, docs [][]uint32) (string, *Manifest, int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ds")
	w, err := NewWriter(out, Params{Tokenizer: "byte", VocabSize: 256, EOT: 0, SeqLen: 4, SeqsPerChunk: 2, SeqsPerShard: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if err := w.AddDocument(d); err != nil {
			t.Fatal(err)
		}
	}
	m, dropped, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return out, m, dropped
}

func readSequence(t *testing.T, d *Dataset, i uint64) []uint32 {
	t.Helper()
	loc, err := d.Manifest.Locate(i)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := d.ReadChunk(loc.Shard, loc.Chunk, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := make([]uint32, d.Manifest.SequenceWords())
	if err := DecodeSequence(seq, chunk[loc.Skip:loc.Skip+d.Manifest.SequenceBytes()], d.Manifest.VocabSize, d.Manifest.SeqLen); err != nil {
		t.Fatal(err)
	}
	return seq
}

func TestWriterPacksDocumentsIntoFixedSequences(t *testing.T) {
	// 3 + 1 + 7 + 1 + 11 + 1 + 13 + 1 = 38 tokens: 7 sequences of 5, 3 dropped.
	var docs [][]uint32
	var stream []uint32
	next := uint32(1)
	for _, n := range []int{3, 7, 11, 13} {
		var d []uint32
		for range n {
			d = append(d, next)
			next = next%255 + 1
		}
		docs = append(docs, d)
		stream = append(append(stream, d...), 0)
	}
	dir, m, dropped := writeDataset(t, docs)
	if m.NumSequences != 7 || dropped != 3 {
		t.Fatalf("%d sequences, %d dropped; want 7 and 3", m.NumSequences, dropped)
	}
	// SeqsPerShard 5 rounds down to 4 (whole chunks): shards of 4 and 3.
	if len(m.Shards) != 2 || m.Shards[0].NumSequences != 4 || m.Shards[1].NumSequences != 3 {
		t.Fatalf("shards %+v, want 4 + 3 sequences", m.Shards)
	}
	d, err := Open(dir, m.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range uint64(7) {
		if got, want := readSequence(t, d, i), stream[i*5:i*5+5]; !slices.Equal(got, want) {
			t.Errorf("sequence %d = %v, want %v", i, got, want)
		}
	}
	if err := d.Verify(context.Background()); err != nil {
		t.Fatalf("Verify on an intact dataset: %v", err)
	}
	// A vocabulary of at most 65536 keeps 2-byte tokens, as every dataset
	// written before wider ones had.
	raw, _ := os.ReadFile(filepath.Join(dir, "shard-00000.tok"))
	var disk []byte
	for _, tok := range stream[:5] {
		disk = binary.LittleEndian.AppendUint16(disk, uint16(tok))
	}
	if got := raw[HeaderSize : HeaderSize+len(disk)]; !slices.Equal(got, disk) {
		t.Errorf("the first sequence on disk is %x, want %x", got, disk)
	}
	if _, err := m.Locate(7); err == nil {
		t.Error("Locate(7) succeeded on a 7-sequence dataset")
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("%d entries next to the dataset, want no leftover temporary directory", len(entries))
	}
}

func TestWriterRejectsBadInput(t *testing.T) {
	if _, err := NewWriter(t.TempDir()+"/x", Params{Tokenizer: "byte", VocabSize: 256, EOT: 300, SeqLen: 4, SeqsPerChunk: 1, SeqsPerShard: 1}); err == nil {
		t.Error("EOT outside the vocabulary accepted")
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o644)
	if _, err := NewWriter(full, Params{Tokenizer: "byte", VocabSize: 256, SeqLen: 4, SeqsPerChunk: 1, SeqsPerShard: 1}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty output accepted: %v", err)
	}
	out := filepath.Join(t.TempDir(), "ds")
	w, err := NewWriter(out, Params{Tokenizer: "byte", VocabSize: 256, SeqLen: 4, SeqsPerChunk: 1, SeqsPerShard: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddDocument([]uint32{5, 0, 6}); err == nil {
		t.Error("a document containing the separator was accepted")
	}
	if err := w.AddDocument([]uint32{5, 256}); err == nil {
		t.Error("a token outside the vocabulary was accepted")
	}
	if err := w.AddDocument([]uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Close(); err == nil || !strings.Contains(err.Error(), "too few") {
		t.Errorf("Close with less than one sequence: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed write left %s behind", out)
	}
}

func TestTamperingIsDetectedWithTheShardName(t *testing.T) {
	docs := [][]uint32{make([]uint32, 40)}
	for i := range docs[0] {
		docs[0][i] = uint32(i + 1)
	}
	tests := []struct {
		name    string
		tamper  func(dir string, m *Manifest)
		pinned  bool
		openErr string // error from Open, or "" if Open succeeds
		// errors from reading sequence 5 (shard-00001 chunk 0) and from Verify
		readErr, verifyErr string
	}{
		{"flipped token byte", func(dir string, m *Manifest) { flip(t, filepath.Join(dir, "shard-00001.tok"), HeaderSize+3) }, true,
			"", "shard shard-00001.tok chunk 0: content does not match", "shard shard-00001.tok: file SHA-256 does not match"},
		{"flipped header byte", func(dir string, m *Manifest) { flip(t, filepath.Join(dir, "shard-00001.tok"), 40) }, true,
			"", "", "shard shard-00001.tok: file SHA-256 does not match"},
		{"truncated shard", func(dir string, m *Manifest) { os.Truncate(filepath.Join(dir, "shard-00001.tok"), 70) }, true,
			"shard shard-00001.tok: file is 70 bytes", "", ""},
		{"appended bytes", func(dir string, m *Manifest) { appendTo(t, filepath.Join(dir, "shard-00000.tok"), "x") }, true,
			"shard shard-00000.tok: file is", "", ""},
		{"chunk hash file altered", func(dir string, m *Manifest) { flip(t, filepath.Join(dir, "shard-00001.chunks"), 0) }, true,
			"", "shard shard-00001.tok: chunk hash file does not match", "shard shard-00001.tok: chunk hash file does not match"},
		{"manifest edited", func(dir string, m *Manifest) { editManifest(t, dir, `"eot": 0`, `"eot": 1`) }, false,
			"does not match its content", "", ""},
		{"manifest replaced by another consistent one", func(dir string, m *Manifest) {
			other, _, _ := writeDataset(t, [][]uint32{make40(2)})
			os.Rename(filepath.Join(other, ManifestName), filepath.Join(dir, ManifestName))
		}, true, "does not match the pinned root", "", ""},
		{"unknown manifest field", func(dir string, m *Manifest) { editManifest(t, dir, `"format"`, `"extra": 1, "format"`) }, false,
			"unknown field", "", ""},
		{"path in shard name", func(dir string, m *Manifest) { editManifest(t, dir, `"shard-00000.tok"`, `"../shard-00000.tok"`) }, false,
			"not a plain file name", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, m, _ := writeDataset(t, docs)
			tt.tamper(dir, m)
			pin := ""
			if tt.pinned {
				pin = m.Root
			}
			d, err := Open(dir, pin)
			if tt.openErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.openErr) {
					t.Fatalf("Open error = %v, want %q", err, tt.openErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer d.Close()
			loc, _ := d.Manifest.Locate(5)
			_, readErr := d.ReadChunk(loc.Shard, loc.Chunk, nil)
			verifyErr := d.Verify(context.Background())
			if verifyErr == nil || !strings.Contains(verifyErr.Error(), tt.verifyErr) {
				t.Errorf("Verify error = %v, want %q", verifyErr, tt.verifyErr)
			}
			var ie *IntegrityError
			if !errors.As(verifyErr, &ie) {
				t.Errorf("Verify error %v is not an IntegrityError", verifyErr)
			}
			if tt.readErr == "" && readErr != nil {
				t.Errorf("ReadChunk of an intact chunk: %v", readErr)
			}
			if tt.readErr != "" && (readErr == nil || !strings.Contains(readErr.Error(), tt.readErr)) {
				t.Errorf("ReadChunk error = %v, want %q", readErr, tt.readErr)
			}
		})
	}
}

func make40(start uint32) []uint32 {
	d := make([]uint32, 40)
	for i := range d {
		d[i] = start + uint32(i)
	}
	return d
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, at)
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

func editManifest(t *testing.T, dir, old, new string) {
	t.Helper()
	path := filepath.Join(dir, ManifestName)
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), old) {
		t.Fatalf("manifest lacks %q:\n%s", old, raw)
	}
	os.WriteFile(path, []byte(strings.Replace(string(raw), old, new, 1)), 0o644)
}

func TestDecodeSequenceRejectsIdsOutsideVocabularyAndStrayMaskBits(t *testing.T) {
	le := binary.LittleEndian
	b := le.AppendUint16(le.AppendUint16(nil, 7), 300)
	dst := make([]uint32, 2)
	if err := DecodeSequence(dst, b, 256, 1); err == nil {
		t.Fatal("token 300 accepted with a vocabulary of 256")
	}
	if err := DecodeSequence(dst, b, 301, 1); err != nil || dst[1] != 300 {
		t.Fatalf("DecodeSequence = %v, %v", dst, err)
	}
	// seq_len 3: 4 tokens and one mask word whose bits 0..2 are the targets.
	masked := make([]uint32, SequenceWords(3, true))
	for _, c := range []struct {
		mask uint16
		ok   bool
	}{{0b101, true}, {0b111, true}, {0b1000, false}, {0x8000, false}} {
		rec := le.AppendUint16(le.AppendUint16(le.AppendUint16(le.AppendUint16(nil, 1), 2), 3), 4)
		rec = le.AppendUint16(rec, c.mask)
		if err := DecodeSequence(masked, rec, 256, 3); (err == nil) != c.ok {
			t.Errorf("mask %#x: err = %v, want ok %v", c.mask, err, c.ok)
		}
	}
}

func TestMaskedDatasetRoundTripsAndPinsItsTemplate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ft")
	tmpl := hex.EncodeToString(make([]byte, 31)) + "ab"
	p := Params{Tokenizer: "byte", VocabSize: 256, EOT: 0, SeqLen: 20, SeqsPerChunk: 2, SeqsPerShard: 4, LossMask: true, ChatTemplate: tmpl}
	w, err := NewWriter(out, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddDocument([]uint32{1, 2}); err == nil {
		t.Error("AddDocument accepted on a masked dataset")
	}
	examples := []struct {
		n       int
		trained []int
	}{{5, []int{3, 4}}, {21, []int{1, 20}}, {30, []int{2, 29}}, {8, []int{7}}, {3, []int{1}}}
	for _, ex := range examples {
		toks, train := make([]uint32, ex.n), make([]bool, ex.n)
		for i := range toks {
			toks[i] = uint32(1 + i%200)
		}
		for _, j := range ex.trained {
			train[j] = true
		}
		if err := w.AddExample(toks, train); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddExample([]uint32{1, 2, 3}, []bool{true, false, false}); err == nil {
		t.Error("an example with no trained target (the first token is never a target) accepted")
	}
	long, longTrain := make([]uint32, 40), make([]bool, 40)
	longTrain[30] = true
	if err := w.AddExample(long, longTrain); err == nil || !strings.Contains(err.Error(), "no trained token") {
		t.Errorf("an example trained only past the cut: %v", err)
	}
	m, _, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m.NumSequences != 5 || w.Truncated != 1 || !m.LossMask || m.ChatTemplate != tmpl {
		t.Fatalf("manifest %+v, truncated %d", m, w.Truncated)
	}
	d, err := Open(out, m.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, ex := range examples {
		seq := readSequence(t, d, uint64(i))
		if len(seq) != 21+2 {
			t.Fatalf("sequence %d has %d words, want 23", i, len(seq))
		}
		for k := range 21 {
			want := uint32(0) // padding: the separator
			if k < ex.n {
				want = uint32(1 + k%200)
			}
			if seq[k] != want {
				t.Fatalf("sequence %d token %d = %d, want %d", i, k, seq[k], want)
			}
		}
		var mask uint32
		for _, j := range ex.trained {
			if j <= 20 {
				mask |= 1 << (j - 1)
			}
		}
		if got := uint32(seq[21]) | uint32(seq[22])<<16; got != mask {
			t.Errorf("sequence %d mask %b, want %b", i, got, mask)
		}
	}
	// The mask and the template are part of the root: a manifest that drops
	// either no longer matches it.
	for _, edit := range [][2]string{{`"loss_mask": true,`, ``}, {tmpl, strings.Repeat("0", 64)}} {
		raw, _ := os.ReadFile(filepath.Join(out, ManifestName))
		if _, err := ParseManifest([]byte(strings.Replace(string(raw), edit[0], edit[1], 1)), ""); err == nil {
			t.Errorf("manifest edited (%q → %q) still parses", edit[0], edit[1])
		}
	}
}

func TestTokenWidthFollowsTheVocabulary(t *testing.T) {
	for _, c := range []struct {
		vocab uint32
		want  int
	}{{256, 2}, {50257, 2}, {1 << 16, 2}, {1<<16 + 1, 4}, {200000, 4}, {MaxVocab, 4}} {
		if got := TokenBytes(c.vocab); got != c.want {
			t.Errorf("TokenBytes(%d) = %d, want %d", c.vocab, got, c.want)
		}
	}
	// seq_len 20: 21 tokens, then 2 mask words of 2 bytes whatever the width.
	for _, c := range []struct {
		vocab  uint32
		masked bool
		want   int64
	}{{256, false, 42}, {256, true, 46}, {200000, false, 84}, {200000, true, 88}} {
		if got := SequenceBytes(c.vocab, 20, c.masked); got != c.want {
			t.Errorf("SequenceBytes(%d, 20, %v) = %d, want %d", c.vocab, c.masked, got, c.want)
		}
	}
}

// TestWideVocabularyRoundTrips writes and reads datasets whose vocabulary
// needs 4-byte tokens, plain and masked, and checks their bytes on disk.
func TestWideVocabularyRoundTrips(t *testing.T) {
	const vocab, eot = 200000, 199999
	token := func(i int) uint32 { return uint32(65530 + i*1009%(vocab-65531)) } // spans 65535
	for _, masked := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "wide")
		w, err := NewWriter(out, Params{Tokenizer: "json:ab", VocabSize: vocab, EOT: eot, SeqLen: 20, SeqsPerChunk: 2, SeqsPerShard: 4, LossMask: masked})
		if err != nil {
			t.Fatal(err)
		}
		var want [][]uint32
		for s := range 5 {
			toks := make([]uint32, 21)
			for i := range toks {
				toks[i] = token(s*21 + i)
			}
			var err error
			if masked {
				train := make([]bool, 21)
				train[1], train[20] = true, true
				err = w.AddExample(toks, train)
				toks = append(toks, 1, 1<<3) // targets 0 and 19
			} else {
				err = w.AddDocument(toks[:20])
				toks[20] = eot
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, toks)
		}
		m, _, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if m.NumSequences != 5 || m.SequenceBytes() != SequenceBytes(vocab, 20, masked) || m.Shards[0].Size != HeaderSize+4*m.SequenceBytes() {
			t.Fatalf("masked %v: manifest %+v", masked, m)
		}
		d, err := Open(out, m.Root)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Verify(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if got := readSequence(t, d, uint64(i)); !slices.Equal(got, w) {
				t.Errorf("masked %v: sequence %d = %v, want %v", masked, i, got, w)
			}
		}
		d.Close()
		raw, err := os.ReadFile(filepath.Join(out, "shard-00000.tok"))
		if err != nil {
			t.Fatal(err)
		}
		var disk []byte
		for _, tok := range want[0][:21] {
			disk = binary.LittleEndian.AppendUint32(disk, tok)
		}
		for _, word := range want[0][21:] {
			disk = binary.LittleEndian.AppendUint16(disk, uint16(word))
		}
		if !slices.Equal(raw[HeaderSize:HeaderSize+len(disk)], disk) {
			t.Errorf("masked %v: the first sequence on disk is %x, want %x", masked, raw[HeaderSize:HeaderSize+len(disk)], disk)
		}
	}
}

// TestWideVocabularyLimitsAndTampering: the width is no field of its own, so
// a manifest sized for 2-byte tokens does not describe 4-byte shards, and a
// flipped high byte of a token is caught like any other.
func TestWideVocabularyLimitsAndTampering(t *testing.T) {
	p := Params{Tokenizer: "json:ab", VocabSize: MaxVocab + 1, EOT: 0, SeqLen: 4, SeqsPerChunk: 2, SeqsPerShard: 4}
	if _, err := NewWriter(filepath.Join(t.TempDir(), "x"), p); err == nil || !strings.Contains(err.Error(), "datasets take 1 to 262144") {
		t.Errorf("a vocabulary of %d: %v", p.VocabSize, err)
	}
	p.VocabSize = MaxVocab
	out := filepath.Join(t.TempDir(), "wide")
	w, err := NewWriter(out, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddDocument([]uint32{MaxVocab - 1, 1 << 16, 3, 4, 5, 6, 7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	m, _, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(out, ManifestName))
	for _, edit := range []struct{ old, new, wantErr string }{
		{`"vocab_size": 262144`, `"vocab_size": 262145`, "vocab_size 262145 must be between 1 and 262144"},
		{`"size": 104`, `"size": 84`, "size 84, but 2 sequences take 104 bytes"},
	} {
		if !strings.Contains(string(raw), edit.old) {
			t.Fatalf("manifest lacks %q:\n%s", edit.old, raw)
		}
		edited := strings.Replace(string(raw), edit.old, edit.new, 1)
		if _, err := ParseManifest([]byte(edited), ""); err == nil || !strings.Contains(err.Error(), edit.wantErr) {
			t.Errorf("manifest with %s: %v, want %q", edit.new, err, edit.wantErr)
		}
	}
	// Byte 2 of the first token (MaxVocab-1 = 0x3ffff) is its high half.
	flip(t, filepath.Join(out, "shard-00000.tok"), HeaderSize+2)
	d, err := Open(out, m.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ReadChunk(0, 0, nil); err == nil || !strings.Contains(err.Error(), "chunk 0: content does not match") {
		t.Errorf("a flipped high token byte: %v", err)
	}
	rec := binary.LittleEndian.AppendUint32(nil, MaxVocab)
	for range 4 {
		rec = binary.LittleEndian.AppendUint32(rec, 1)
	}
	if err := DecodeSequence(make([]uint32, 5), rec, MaxVocab, 4); err == nil || !strings.Contains(err.Error(), "token 262144 at position 0") {
		t.Errorf("token %d with a vocabulary of %d: %v", MaxVocab, MaxVocab, err)
	}
}

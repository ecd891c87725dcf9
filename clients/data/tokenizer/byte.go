package tokenizer

import (
	"fmt"
	"strings"
)

// ByteName names the byte-level tokenizer.
const ByteName = "byte"

// Byte maps every byte to the token of the same value. Byte 0 doubles as the
// document separator, which is why documents may not contain NUL bytes: plain
// text never does, and a separator inside a document would corrupt packing.
type Byte struct{}

func (Byte) Name() string   { return ByteName }
func (Byte) VocabSize() int { return 256 }
func (Byte) EOT() uint32    { return 0 }

func (Byte) Encode(text string) ([]uint32, error) {
	if i := strings.IndexByte(text, 0); i >= 0 {
		return nil, fmt.Errorf("byte tokenizer: NUL byte at offset %d (byte 0 is reserved as the document separator)", i)
	}
	ids := make([]uint32, len(text))
	for i := range len(text) {
		ids[i] = uint32(text[i])
	}
	return ids, nil
}

func (Byte) Decode(ids []uint32) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		if id > 255 {
			return "", fmt.Errorf("byte tokenizer: token %d at position %d is outside the vocabulary of 256", id, i)
		}
		b[i] = byte(id)
	}
	return string(b), nil
}

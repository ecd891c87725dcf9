package coordinator

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/psyche-go/psyche/clients/bindings/coordinator"
)

// randomAccount is an account of random bytes (mostly small numbers, as
// real ones, and some of every value) behind the right discriminator.
func randomAccount(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	data := make([]byte, AccountSize)
	copy(data, coordinator.Account_CoordinatorAccount[:])
	for i := 8; i < len(data); i++ {
		switch r.IntN(3) {
		case 0:
			data[i] = byte(r.IntN(256))
		case 1:
			data[i] = byte(r.IntN(3))
		}
	}
	return data
}

// DecodeState's copy and the generated Borsh decoder read every byte the
// same: both decodings encode back (with the generated encoder) to the
// account. A field added, removed, reordered or retyped in the program and
// the bindings but laid out differently in memory fails here.
func TestDecodeStateMatchesBindings(t *testing.T) {
	for seed := range uint64(8) {
		data := randomAccount(seed)
		fast, err := DecodeState(data)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := coordinator.ParseAccount_CoordinatorAccount(data)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*State{"DecodeState": fast, "the bindings": slow} {
			enc, err := s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data[8:]) {
				i := 0
				for i < len(enc) && i < len(data)-8 && enc[i] == data[8+i] {
					i++
				}
				t.Fatalf("seed %d: %s's decoding encodes back differently from byte %d of the account body", seed, name, i)
			}
		}
	}
}

func TestDecodeStateRejects(t *testing.T) {
	data := randomAccount(1)
	bad := bytes.Clone(data)
	bad[0] ^= 1
	for name, d := range map[string][]byte{"short": data[:AccountSize-1], "long": append(bytes.Clone(data), 0), "discriminator": bad, "empty": nil} {
		if _, err := DecodeState(d); !errors.Is(err, ErrNotCoordinator) {
			t.Errorf("%s: %v, want ErrNotCoordinator", name, err)
		}
	}
}

// go test -run XXX -bench DecodeState ./clients/coordinator/
func BenchmarkDecodeState(b *testing.B) {
	data := randomAccount(2)
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeState(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bindings", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := coordinator.ParseAccount_CoordinatorAccount(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

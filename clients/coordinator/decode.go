package coordinator

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/psyche-go/psyche/clients/bindings/coordinator"
)

// The account is the program's zero-copy (bytemuck) struct: fixed-size
// fields, no implicit padding, little-endian. The generated Go struct has
// the same fields in the same order, and its size equals the packed size,
// so Go inserts no padding either and its memory is the account's bytes.
// DecodeState copies them in: 23 µs, against 2.2 ms and 34,000 allocations
// for the generated (reflective) Borsh decoder (BenchmarkDecodeState), which
// a client of a large run would spend on dozens of notifications a round.
// TestDecodeStateMatchesBindings holds the two together on random bytes;
// these declarations fail to compile if the sizes drift apart.
var (
	_ [AccountSize - 8 - unsafe.Sizeof(State{})]byte
	_ [unsafe.Sizeof(State{}) - (AccountSize - 8)]byte
)

// nativeLittleEndian is whether State's memory layout can be the account's.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// DecodeState decodes coordinator account data, checking size and discriminator.
func DecodeState(data []byte) (*State, error) {
	if len(data) != AccountSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrNotCoordinator, len(data), AccountSize)
	}
	if !bytes.Equal(data[:8], coordinator.Account_CoordinatorAccount[:]) {
		return nil, fmt.Errorf("%w: discriminator %x", ErrNotCoordinator, data[:8])
	}
	if !nativeLittleEndian {
		s, err := coordinator.ParseAccount_CoordinatorAccount(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotCoordinator, err)
		}
		return s, nil
	}
	s := new(State)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s)), data[8:])
	return s, nil
}

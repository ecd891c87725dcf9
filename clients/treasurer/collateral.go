package treasurer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrMintNotAllowed is returned for a mint that run_create refuses as a
// run's collateral (MintNotAllowed): it could freeze, move, hook, tax, pause
// or hide the run's tokens.
var ErrMintNotAllowed = errors.New("the mint cannot be a run's collateral")

// mintExtensions names Token-2022's mint extension types; allowed marks the
// ones run_create accepts (ALLOWED_MINT_EXTENSIONS in programs/sdk's token
// module; a test keeps the two lists equal), why says what each
// refused one could do to the run's tokens.
var mintExtensions = map[uint16]struct {
	name    string
	allowed bool
	why     string
}{
	1:  {"TransferFeeConfig", false, "its fee shrinks every claim"},
	3:  {"MintCloseAuthority", true, ""},
	4:  {"ConfidentialTransferMint", false, "confidential transfers hide balances from the run's accounting"},
	6:  {"DefaultAccountState", false, "new token accounts may start frozen"},
	9:  {"NonTransferable", false, "claims cannot transfer the tokens"},
	10: {"InterestBearingConfig", true, ""},
	12: {"PermanentDelegate", false, "its delegate can move the whole reward pool out of the run's account"},
	14: {"TransferHook", false, "its hook program can refuse claims"},
	16: {"ConfidentialTransferFeeConfig", false, "confidential fees shrink claims"},
	18: {"MetadataPointer", true, ""},
	19: {"TokenMetadata", true, ""},
	20: {"GroupPointer", true, ""},
	21: {"TokenGroup", true, ""},
	22: {"GroupMemberPointer", true, ""},
	23: {"TokenGroupMember", true, ""},
	24: {"ConfidentialMintBurn", false, "confidential minting and burning hide the supply"},
	25: {"ScaledUiAmount", true, ""},
	26: {"Pausable", false, "its authority can pause every transfer, claims included"},
}

// CheckCollateralMint applies run_create's rule to a mint account's data
// (SPL Token or Token-2022) and says why a mint is refused: a freeze
// authority, or a Token-2022 extension outside the allowed list.
func CheckCollateralMint(data []byte) error {
	if len(data) < MintSize || data[45] != 1 {
		return fmt.Errorf("%w: not an initialized mint", ErrNotTokenAccount)
	}
	if binary.LittleEndian.Uint32(data[46:50]) != 0 {
		return fmt.Errorf("%w: it has a freeze authority (%x...), which could freeze the run's token account and block every claim",
			ErrMintNotAllowed, data[50:54])
	}
	if len(data) == MintSize {
		return nil
	}
	// Token-2022: zero padding to a token account's size, the account type
	// (1: mint), then TLV entries (u16 type, u16 length, value).
	if len(data) <= TokenAccountSize || slices.ContainsFunc(data[MintSize:TokenAccountSize], func(b byte) bool { return b != 0 }) || data[TokenAccountSize] != 1 {
		return fmt.Errorf("%w: malformed Token-2022 mint extensions", ErrNotTokenAccount)
	}
	for tlv := data[TokenAccountSize+1:]; len(tlv) >= 4; {
		kind, n := binary.LittleEndian.Uint16(tlv), int(binary.LittleEndian.Uint16(tlv[2:]))
		if kind == 0 {
			break
		}
		if len(tlv)-4 < n {
			return fmt.Errorf("%w: malformed Token-2022 mint extensions", ErrNotTokenAccount)
		}
		ext, known := mintExtensions[kind]
		switch {
		case !known:
			return fmt.Errorf("%w: it has Token-2022 extension %d, which this rule does not know to be harmless", ErrMintNotAllowed, kind)
		case !ext.allowed:
			return fmt.Errorf("%w: it has the Token-2022 extension %s: %s", ErrMintNotAllowed, ext.name, ext.why)
		}
		tlv = tlv[4+n:]
	}
	return nil
}

// AllowedMintExtensions lists the Token-2022 mint extension types a run's
// collateral may have, in increasing order.
func AllowedMintExtensions() []uint16 {
	var out []uint16
	for k, x := range mintExtensions {
		if x.allowed {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

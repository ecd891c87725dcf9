package treasurer_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/treasurer"
)

// extension is a Token-2022 mint extension: its type, its length in the
// mint, and the instruction data that initializes it (before InitializeMint2).
type extension struct {
	kind uint16
	len  int
	init []byte
}

func key(b byte) []byte { return slices.Repeat([]byte{b}, 32) }

var (
	permanentDelegate = extension{12, 32, append([]byte{35}, key(7)...)}
	nonTransferable   = extension{9, 0, []byte{32}}
	defaultFrozen     = extension{6, 1, []byte{28, 0, 2}}
	transferHook      = extension{14, 64, append(append([]byte{36, 0}, key(7)...), key(8)...)}
	metadataPointer   = extension{18, 64, append(append([]byte{39, 0}, key(7)...), key(9)...)}
	mintClose         = extension{3, 32, append([]byte{25, 1}, key(7)...)}
)

// createMint creates a mint of tokenProgram with the extensions and an
// optional freeze authority, and returns its address.
func (e *env) createMint(tokenProgram solana.PublicKey, freeze bool, exts ...extension) solana.PublicKey {
	e.t.Helper()
	size := uint64(treasurer.MintSize)
	if len(exts) > 0 {
		size = treasurer.TokenAccountSize + 1
		for _, x := range exts {
			size += 4 + uint64(x.len)
		}
	}
	rent, err := e.c.RPC.GetMinimumBalanceForRentExemption(e.ctx(), size, rpc.CommitmentConfirmed)
	if err != nil {
		e.t.Fatal(err)
	}
	mint, a := solana.NewWallet().PrivateKey, e.authority.PublicKey()
	alloc, err := system.NewCreateAccountInstruction(rent, size, tokenProgram, a, mint.PublicKey()).ValidateAndBuild()
	if err != nil {
		e.t.Fatal(err)
	}
	ixs := []solana.Instruction{alloc}
	meta := solana.AccountMetaSlice{solana.Meta(mint.PublicKey()).WRITE()}
	for _, x := range exts {
		ixs = append(ixs, solana.NewInstruction(tokenProgram, meta, x.init))
	}
	init := append([]byte{20, 6}, a[:]...) // InitializeMint2, 6 decimals
	if freeze {
		init = append(append(init, 1), a[:]...)
	} else {
		init = append(init, 0)
	}
	e.mustSend(e.authority, append(ixs, solana.NewInstruction(tokenProgram, meta, init)), mint)
	return mint.PublicKey()
}

// run_create takes as collateral only mints that cannot freeze, move, hook,
// tax, pause or hide the run's tokens; the CLI's rule (CheckCollateralMint)
// says the same of the same mints, naming why.
func TestCollateralMintRule(t *testing.T) {
	e := setup(t, "mints", treasurer.TokenProgramID, 6)
	a := e.authority.PublicKey()
	for i, tc := range []struct {
		name         string
		tokenProgram solana.PublicKey
		freeze       bool
		exts         []extension
		refusal      string // "" when accepted
	}{
		{"SPL Token", treasurer.TokenProgramID, false, nil, ""},
		{"Token-2022", treasurer.Token2022ProgramID, false, nil, ""},
		{"SPL Token with a freeze authority", treasurer.TokenProgramID, true, nil, "freeze authority"},
		{"Token-2022 with a freeze authority", treasurer.Token2022ProgramID, true, nil, "freeze authority"},
		{"PermanentDelegate", treasurer.Token2022ProgramID, false, []extension{permanentDelegate}, "PermanentDelegate"},
		{"NonTransferable", treasurer.Token2022ProgramID, false, []extension{nonTransferable}, "NonTransferable"},
		{"DefaultAccountState frozen", treasurer.Token2022ProgramID, true, []extension{defaultFrozen}, "freeze authority"},
		{"TransferHook", treasurer.Token2022ProgramID, false, []extension{transferHook}, "TransferHook"},
		{"MetadataPointer and MintCloseAuthority", treasurer.Token2022ProgramID, false, []extension{metadataPointer, mintClose}, ""},
		{"PermanentDelegate after allowed ones", treasurer.Token2022ProgramID, false, []extension{metadataPointer, mintClose, permanentDelegate}, "PermanentDelegate"},
	} {
		mint := e.createMint(tc.tokenProgram, tc.freeze, tc.exts...)
		info, err := treasurer.FetchMint(e.ctx(), e.c, mint)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = info.CheckCollateral()
		if tc.refusal == "" && err != nil || tc.refusal != "" && (!errors.Is(err, treasurer.ErrMintNotAllowed) || !strings.Contains(err.Error(), tc.refusal)) {
			t.Errorf("%s: CheckCollateral: %v, want refusal %q", tc.name, err, tc.refusal)
		}
		account := solana.NewWallet().PrivateKey
		ixs, _, err := e.p.CreateRun(e.ctx(), e.c, a, account.PublicKey(), treasurer.CreateParams{
			RunID: "mint-" + strconv.Itoa(i), MainAuthority: a, JoinAuthority: a, ClientVersion: "v1", Mint: mint, TokenProgram: tc.tokenProgram,
		})
		if err != nil {
			t.Fatal(err)
		}
		if tc.refusal != "" {
			e.expectError("MintNotAllowed", e.authority, ixs, account)
		} else if _, err := e.send(e.authority, ixs, account); err != nil {
			t.Errorf("%s: run_create: %v", tc.name, err)
		}
	}
}

// The Go rule and the programs' allow the same extensions: Go's list is
// checked against ALLOWED_MINT_EXTENSIONS in the SDK's source (the rule the
// Treasurer and the Competition share).
func TestAllowedMintExtensionsMatchProgram(t *testing.T) {
	src, err := os.ReadFile("../../programs/sdk/src/token.rs")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)ALLOWED_MINT_EXTENSIONS: \[u16; \d+\] = \[(.*?)\];`).FindSubmatch(src)
	if m == nil {
		t.Fatal("ALLOWED_MINT_EXTENSIONS not found in programs/sdk/src/token.rs")
	}
	var rust []uint16
	for _, v := range regexp.MustCompile(`(?m)^\s*(\d+),`).FindAllSubmatch(m[1], -1) {
		n, _ := strconv.Atoi(string(v[1]))
		rust = append(rust, uint16(n))
	}
	goList := treasurer.AllowedMintExtensions()
	if !slices.Equal(rust, goList) {
		t.Fatalf("allowed mint extensions: program %v, Go %v", rust, goList)
	}
}

// mintData is a mint's data as the program's host test builds it: decimals
// 6, initialized, an optional freeze authority, and for Token-2022 the
// (type, length) extensions.
func mintData(freeze bool, exts ...[2]uint16) []byte {
	d := make([]byte, treasurer.MintSize)
	d[44], d[45] = 6, 1
	if freeze {
		d[46] = 1
	}
	if len(exts) > 0 {
		d = append(append(d, make([]byte, treasurer.TokenAccountSize-treasurer.MintSize)...), 1) // padding, account type: mint
		for _, x := range exts {
			d = append(d, byte(x[0]), byte(x[0]>>8), byte(x[1]), byte(x[1]>>8))
			d = append(d, slices.Repeat([]byte{7}, int(x[1]))...)
		}
	}
	return d
}

// The rule on data the chain would not produce: what is not a mint is
// ErrNotTokenAccount, an unknown extension is refused.
func TestCheckCollateralMintData(t *testing.T) {
	ok := [][]byte{mintData(false), mintData(false, [2]uint16{18, 64}, [2]uint16{3, 32}), append(mintData(false, [2]uint16{19, 10}), make([]byte, 12)...)}
	for i, d := range ok {
		if err := treasurer.CheckCollateralMint(d); err != nil {
			t.Errorf("accepted case %d: %v", i, err)
		}
	}
	uninit := mintData(false)
	uninit[45] = 0
	overlong := mintData(false, [2]uint16{18, 64})
	overlong = overlong[:len(overlong)-1]
	wrongType := mintData(false, [2]uint16{18, 64})
	wrongType[treasurer.TokenAccountSize] = 2
	padding := mintData(false, [2]uint16{18, 64})
	padding[100] = 1
	for i, d := range [][]byte{mintData(false)[:81], uninit, overlong, wrongType, padding, append(mintData(false), make([]byte, 50)...)} {
		if err := treasurer.CheckCollateralMint(d); !errors.Is(err, treasurer.ErrNotTokenAccount) {
			t.Errorf("malformed case %d: %v, want ErrNotTokenAccount", i, err)
		}
	}
	for _, kind := range []uint16{1, 4, 6, 9, 12, 14, 16, 24, 26, 999} {
		for _, d := range [][]byte{mintData(false, [2]uint16{kind, 32}), mintData(false, [2]uint16{18, 64}, [2]uint16{kind, 0})} {
			if err := treasurer.CheckCollateralMint(d); !errors.Is(err, treasurer.ErrMintNotAllowed) {
				t.Errorf("extension %d: %v, want ErrMintNotAllowed", kind, err)
			}
		}
	}
	if err := treasurer.CheckCollateralMint(mintData(true)); !errors.Is(err, treasurer.ErrMintNotAllowed) || !strings.Contains(err.Error(), "freeze authority") {
		t.Errorf("freeze authority: %v", err)
	}
}

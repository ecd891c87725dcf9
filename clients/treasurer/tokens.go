package treasurer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/chain"
)

// The token programs the Treasurer accepts (their instructions and base
// account layouts are the same), and the Associated Token Account program.
var (
	TokenProgramID           = solana.TokenProgramID
	Token2022ProgramID       = solana.Token2022ProgramID
	AssociatedTokenProgramID = solana.SPLAssociatedTokenAccountProgramID
)

// Base account sizes (Token-2022 extensions follow them).
const (
	MintSize         = 82
	TokenAccountSize = 165
)

// SPL Token instruction tags.
const (
	tagMintTo          = 7
	tagTransferChecked = 12
	tagInitializeMint2 = 20
	// Associated Token Account: CreateIdempotent.
	tagCreateIdempotent = 1
)

// CheckTokenProgram refuses anything but SPL Token and Token-2022.
func CheckTokenProgram(p solana.PublicKey) error {
	if !p.Equals(TokenProgramID) && !p.Equals(Token2022ProgramID) {
		return fmt.Errorf("token program %s is neither SPL Token (%s) nor Token-2022 (%s)", p, TokenProgramID, Token2022ProgramID)
	}
	return nil
}

// AssociatedTokenAddress derives wallet's associated token account for mint
// under tokenProgram (the address differs between Token and Token-2022).
func AssociatedTokenAddress(wallet, mint, tokenProgram solana.PublicKey) (solana.PublicKey, error) {
	addr, _, err := solana.FindProgramAddress([][]byte{wallet[:], tokenProgram[:], mint[:]}, AssociatedTokenProgramID)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("derive the token account of %s for mint %s: %w", wallet, mint, err)
	}
	return addr, nil
}

// CreateMint returns the instructions that allocate mint (which must sign)
// and initialise it with decimals and authority as the mint authority.
func CreateMint(ctx context.Context, c *chain.Client, payer, mint, authority solana.PublicKey, decimals uint8, tokenProgram solana.PublicKey) ([]solana.Instruction, error) {
	if err := CheckTokenProgram(tokenProgram); err != nil {
		return nil, err
	}
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, MintSize, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, fmt.Errorf("reading the rent of a mint: %w", err)
	}
	alloc, err := system.NewCreateAccountInstruction(rent, MintSize, tokenProgram, payer, mint).ValidateAndBuild()
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, 1+1+32+1)
	data = append(data, tagInitializeMint2, decimals)
	data = append(data, authority[:]...)
	data = append(data, 0) // no freeze authority
	init := solana.NewInstruction(tokenProgram, solana.AccountMetaSlice{solana.Meta(mint).WRITE()}, data)
	return []solana.Instruction{alloc, init}, nil
}

// CreateTokenAccount creates wallet's associated token account for mint
// unless it exists, and returns its address.
func CreateTokenAccount(payer, wallet, mint, tokenProgram solana.PublicKey) (solana.Instruction, solana.PublicKey, error) {
	if err := CheckTokenProgram(tokenProgram); err != nil {
		return nil, solana.PublicKey{}, err
	}
	addr, err := AssociatedTokenAddress(wallet, mint, tokenProgram)
	if err != nil {
		return nil, solana.PublicKey{}, err
	}
	return solana.NewInstruction(AssociatedTokenProgramID, solana.AccountMetaSlice{
		solana.Meta(payer).WRITE().SIGNER(),
		solana.Meta(addr).WRITE(),
		solana.Meta(wallet),
		solana.Meta(mint),
		solana.Meta(solana.SystemProgramID),
		solana.Meta(tokenProgram),
	}, []byte{tagCreateIdempotent}), addr, nil
}

// MintTo mints amount base units of mint into the token account to.
func MintTo(tokenProgram, mint, to, authority solana.PublicKey, amount uint64) solana.Instruction {
	data := binary.LittleEndian.AppendUint64([]byte{tagMintTo}, amount)
	return solana.NewInstruction(tokenProgram, solana.AccountMetaSlice{
		solana.Meta(mint).WRITE(), solana.Meta(to).WRITE(), solana.Meta(authority).SIGNER(),
	}, data)
}

// TransferChecked moves amount base units of mint from one token account to
// another, signed by the source's owner. A top-up of a run is this transfer
// into the run's token account.
func TransferChecked(tokenProgram, from, mint, to, owner solana.PublicKey, amount uint64, decimals uint8) solana.Instruction {
	data := binary.LittleEndian.AppendUint64([]byte{tagTransferChecked}, amount)
	data = append(data, decimals)
	return solana.NewInstruction(tokenProgram, solana.AccountMetaSlice{
		solana.Meta(from).WRITE(), solana.Meta(mint), solana.Meta(to).WRITE(), solana.Meta(owner).SIGNER(),
	}, data)
}

// MintInfo is what clients need to know about a mint.
type MintInfo struct {
	TokenProgram solana.PublicKey
	Decimals     uint8
	Supply       uint64
	// SupplyFixed: the mint has no mint authority, so nobody can ever mint
	// more (burns can only lower the supply).
	SupplyFixed bool
	data        []byte
}

// CheckCollateral applies run_create's rule (CheckCollateralMint) to the mint.
func (m MintInfo) CheckCollateral() error { return CheckCollateralMint(m.data) }

// ErrNotTokenAccount is returned for accounts that are not the expected
// SPL Token / Token-2022 mint or token account.
var ErrNotTokenAccount = errors.New("not an SPL Token or Token-2022 account of the expected kind")

// FetchMint reads a mint of either token program.
func FetchMint(ctx context.Context, c *chain.Client, mint solana.PublicKey) (MintInfo, error) {
	data, owner, err := c.AccountData(ctx, mint)
	if err != nil {
		return MintInfo{}, err
	}
	// The mint authority is a COption: a u32 tag (0 none, 1 some), then the key.
	if CheckTokenProgram(owner) != nil || len(data) < MintSize || data[45] != 1 || binary.LittleEndian.Uint32(data[0:4]) > 1 {
		return MintInfo{}, fmt.Errorf("mint %s (owner %s): %w", mint, owner, ErrNotTokenAccount)
	}
	tag := binary.LittleEndian.Uint32(data[0:4])
	return MintInfo{TokenProgram: owner, Decimals: data[44], Supply: binary.LittleEndian.Uint64(data[36:44]), SupplyFixed: tag == 0, data: data}, nil
}

// TokenAccount is the base part of a token account.
type TokenAccount struct {
	Mint   solana.PublicKey
	Owner  solana.PublicKey
	Amount uint64
}

// FetchTokenAccount reads a token account of either token program.
func FetchTokenAccount(ctx context.Context, c *chain.Client, addr solana.PublicKey) (TokenAccount, error) {
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return TokenAccount{}, err
	}
	if CheckTokenProgram(owner) != nil || len(data) < TokenAccountSize {
		return TokenAccount{}, fmt.Errorf("token account %s (owner %s): %w", addr, owner, ErrNotTokenAccount)
	}
	return TokenAccount{
		Mint:   solana.PublicKeyFromBytes(data[0:32]),
		Owner:  solana.PublicKeyFromBytes(data[32:64]),
		Amount: binary.LittleEndian.Uint64(data[64:72]),
	}, nil
}

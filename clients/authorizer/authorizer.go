// Package authorizer is the client side of the Authorizer program: who may do
// what. It derives authorization addresses, builds instructions for a program
// deployed at any id (localnet and devnet ids differ), fetches and checks
// authorizations, and applies the same validity rule as the program.
package authorizer

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/bindings/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
)

// Limits enforced by the program.
const (
	MaxScopeLen  = 32
	MaxDelegates = 32
)

// JoinRunScope is the scope of the authorizations the Coordinator checks on join_run.
var JoinRunScope = []byte("CoordinatorJoinRun")

// Everyone is the grantee of a permissionless authorization: the all-zero key
// (printed as 11111111111111111111111111111111, the system program's id).
var Everyone = solana.PublicKey{}

// Authorization is the decoded on-chain account.
type Authorization = authorizer.Authorization

// Program addresses one deployment of the Authorizer.
type Program struct {
	ID solana.PublicKey
}

// Default is the deployment named by the IDL the bindings were generated from.
func Default() Program { return Program{ID: authorizer.ProgramID} }

// Address derives the authorization PDA for (grantor, grantee, scope).
func (p Program) Address(grantor, grantee solana.PublicKey, scope []byte) (solana.PublicKey, uint8, error) {
	if len(scope) > MaxScopeLen {
		return solana.PublicKey{}, 0, fmt.Errorf("scope is %d bytes; at most %d", len(scope), MaxScopeLen)
	}
	return solana.FindProgramAddress([][]byte{[]byte("Authorization"), grantor[:], grantee[:], scope}, p.ID)
}

// rebind points an instruction built by the bindings at this deployment.
func (p Program) rebind(ix solana.Instruction, err error) (solana.Instruction, error) {
	return chain.Rebind(p.ID, ix, err)
}

// Create makes an inactive authorization from grantor to grantee for scope.
func (p Program) Create(payer, grantor, grantee solana.PublicKey, scope []byte) (solana.Instruction, solana.PublicKey, error) {
	addr, _, err := p.Address(grantor, grantee, scope)
	if err != nil {
		return nil, solana.PublicKey{}, err
	}
	ix, err := p.rebind(authorizer.NewAuthorizationCreateInstruction(
		authorizer.AuthorizationCreateParams{Grantee: grantee, Scope: scope},
		payer, grantor, addr, solana.SystemProgramID))
	return ix, addr, err
}

// SetActive is the grantor switching an authorization on or off.
func (p Program) SetActive(grantor, addr solana.PublicKey, active bool) (solana.Instruction, error) {
	return p.rebind(authorizer.NewAuthorizationGrantorUpdateInstruction(
		authorizer.AuthorizationGrantorUpdateParams{Active: active}, grantor, addr))
}

// UpdateDelegates is the grantee clearing and/or adding delegate keys.
func (p Program) UpdateDelegates(payer, grantee, addr solana.PublicKey, clear bool, added []solana.PublicKey) (solana.Instruction, error) {
	if added == nil {
		added = []solana.PublicKey{}
	}
	return p.rebind(authorizer.NewAuthorizationGranteeUpdateInstruction(
		authorizer.AuthorizationGranteeUpdateParams{DelegatesClear: clear, DelegatesAdded: added},
		payer, grantee, addr, solana.SystemProgramID))
}

// Close deletes an inactive authorization, sending its rent to spill.
func (p Program) Close(grantor, spill, addr solana.PublicKey) (solana.Instruction, error) {
	return p.rebind(authorizer.NewAuthorizationCloseInstruction(
		authorizer.AuthorizationCloseParams{}, grantor, spill, addr))
}

// ErrNotAuthorization is returned for an account that exists but is not an
// authorization of this program.
var ErrNotAuthorization = errors.New("not an authorization of this Authorizer program")

// Fetch reads and decodes an authorization, checking its owner.
func (p Program) Fetch(ctx context.Context, c *chain.Client, addr solana.PublicKey) (*Authorization, error) {
	data, owner, err := c.AccountData(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !owner.Equals(p.ID) {
		return nil, fmt.Errorf("account %s is owned by %s: %w", addr, owner, ErrNotAuthorization)
	}
	a, err := authorizer.ParseAccount_Authorization(data)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w: %v", addr, ErrNotAuthorization, err)
	}
	return a, nil
}

// IsValidFor is the program's rule: the authorization is active, was granted by
// grantor for scope, and its grantee is everyone, the user, or lists the user
// as a delegate.
func IsValidFor(a *Authorization, grantor, user solana.PublicKey, scope []byte) bool {
	if !a.Active || !a.Grantor.Equals(grantor) || !bytes.Equal(a.Scope, scope) {
		return false
	}
	if a.Grantee.Equals(Everyone) || a.Grantee.Equals(user) {
		return true
	}
	for _, d := range a.Delegates {
		if d.Equals(user) {
			return true
		}
	}
	return false
}

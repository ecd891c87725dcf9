package main

import (
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/idl"
)

// authorizerCommands manage join authorizations: the Authorizer's grants of
// the right to join runs.
func authorizerCommands() []*cli.Command {
	return []*cli.Command{
		joinAuthorizationCreateCommand(),
		joinAuthorizationDelegateCommand(),
		joinAuthorizationDeleteCommand(),
		joinAuthorizationReadCommand(),
	}
}

func joinAuthorizationCreateCommand() *cli.Command {
	return &cli.Command{
		Name:  "join-authorization-create",
		Usage: "grant a user (or everyone) the right to join runs; the wallet is the grantor (the run's join authority)",
		Flags: append([]cli.Flag{granteeFlag,
			&cli.BoolFlag{Name: "inactive", Usage: "create it switched off"},
		}, authorizationFlags()...),
		Action: joinAuthorizationCreate,
	}
}

func joinAuthorizationCreate(c *cli.Context) error {
	if err := requireFlags(c, granteeFlag.Name); err != nil {
		return err
	}
	a, err := newAuthorizerCtx(c)
	if err != nil {
		return err
	}
	grantee, err := parsePubkey("--authorizer", c.String(granteeFlag.Name))
	if err != nil {
		return err
	}
	grantor := a.wallet.PublicKey()
	create, addr, err := a.program.Create(grantor, grantor, grantee, a.scope)
	if err != nil {
		return badInput(err)
	}
	ixs := []solana.Instruction{create}
	if !c.Bool("inactive") {
		activate, err := a.program.SetActive(grantor, addr, true)
		if err != nil {
			return err
		}
		ixs = append(ixs, activate)
	}
	return a.send(c, ixs, "authorization", addr)
}

func joinAuthorizationDelegateCommand() *cli.Command {
	return &cli.Command{
		Name:  "join-authorization-delegate",
		Usage: "as the grantee, set the delegate keys that may use your authorization",
		Flags: append([]cli.Flag{grantorFlag,
			&cli.BoolFlag{Name: "delegates-clear", Usage: "remove every existing delegate first"},
			&cli.StringSliceFlag{Name: "delegates-added", Usage: "delegate pubkeys to add (repeat or comma-separate)"},
		}, authorizationFlags()...),
		Action: joinAuthorizationDelegate,
	}
}

func joinAuthorizationDelegate(c *cli.Context) error {
	if err := requireFlags(c, grantorFlag.Name); err != nil {
		return err
	}
	a, err := newAuthorizerCtx(c)
	if err != nil {
		return err
	}
	grantor, err := parsePubkey("--join-authority", c.String(grantorFlag.Name))
	if err != nil {
		return err
	}
	var added []solana.PublicKey
	for _, s := range c.StringSlice("delegates-added") {
		k, err := parsePubkey("--delegates-added", s)
		if err != nil {
			return err
		}
		added = append(added, k)
	}
	if len(added) > authorizer.MaxDelegates {
		return badInputf("%d delegates given; an authorization holds at most %d", len(added), authorizer.MaxDelegates)
	}
	grantee := a.wallet.PublicKey()
	addr, _, err := a.program.Address(grantor, grantee, a.scope)
	if err != nil {
		return badInput(err)
	}
	ix, err := a.program.UpdateDelegates(grantee, grantee, addr, c.Bool("delegates-clear"), added)
	if err != nil {
		return err
	}
	return a.send(c, []solana.Instruction{ix}, "authorization", addr)
}

func joinAuthorizationDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:   "join-authorization-delete",
		Usage:  "as the grantor, revoke an authorization and reclaim its rent",
		Flags:  append([]cli.Flag{granteeFlag, spillFlag}, authorizationFlags()...),
		Action: joinAuthorizationDelete,
	}
}

func joinAuthorizationDelete(c *cli.Context) error {
	if err := requireFlags(c, granteeFlag.Name); err != nil {
		return err
	}
	a, err := newAuthorizerCtx(c)
	if err != nil {
		return err
	}
	grantee, err := parsePubkey("--authorizer", c.String(granteeFlag.Name))
	if err != nil {
		return err
	}
	grantor := a.wallet.PublicKey()
	spill, err := pubkeyOrWallet(c, spillFlag.Name, a.wallet)
	if err != nil {
		return err
	}
	addr, _, err := a.program.Address(grantor, grantee, a.scope)
	if err != nil {
		return badInput(err)
	}
	deactivate, err := a.program.SetActive(grantor, addr, false)
	if err != nil {
		return err
	}
	closeIx, err := a.program.Close(grantor, spill, addr)
	if err != nil {
		return err
	}
	return a.send(c, []solana.Instruction{deactivate, closeIx}, "closed authorization", addr)
}

func joinAuthorizationReadCommand() *cli.Command {
	return &cli.Command{
		Name:   "join-authorization-read",
		Usage:  "print an authorization as JSON",
		Flags:  []cli.Flag{grantorFlag, granteeFlag, rpcFlag, wsRPCFlag, authorizerProgramFlag, scopeFlag},
		Action: joinAuthorizationRead,
	}
}

func joinAuthorizationRead(c *cli.Context) error {
	if err := requireFlags(c, grantorFlag.Name, granteeFlag.Name); err != nil {
		return err
	}
	program, err := authorizerProgram(c)
	if err != nil {
		return err
	}
	grantor, err := parsePubkey("--join-authority", c.String(grantorFlag.Name))
	if err != nil {
		return err
	}
	grantee, err := parsePubkey("--authorizer", c.String(granteeFlag.Name))
	if err != nil {
		return err
	}
	addr, _, err := program.Address(grantor, grantee, []byte(c.String(scopeFlag.Name)))
	if err != nil {
		return badInput(err)
	}
	client, err := newChainClient(c)
	if err != nil {
		return err
	}
	auth, err := program.Fetch(c.Context, client, addr)
	if err != nil {
		return err
	}
	return printJSON(c, authorizationJSON(addr, auth))
}

// authorizerCtx is what every authorization-changing command needs.
type authorizerCtx struct {
	program authorizer.Program
	client  *chain.Client
	wallet  solana.PrivateKey
	scope   []byte
}

func newAuthorizerCtx(c *cli.Context) (*authorizerCtx, error) {
	program, err := authorizerProgram(c)
	if err != nil {
		return nil, err
	}
	scope := []byte(c.String(scopeFlag.Name))
	if len(scope) > authorizer.MaxScopeLen {
		return nil, badInputf("--scope is %d bytes; at most %d", len(scope), authorizer.MaxScopeLen)
	}
	key, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	client, err := newChainClient(c)
	if err != nil {
		return nil, err
	}
	if tables, ok := client.Errors.(chain.ErrorTables); ok {
		d, err := idl.Load("psyche_authorizer")
		if err != nil {
			return nil, err
		}
		d.AddErrors(tables, program.ID)
	}
	return &authorizerCtx{program: program, client: client, wallet: key, scope: scope}, nil
}

func authorizerProgram(c *cli.Context) (authorizer.Program, error) {
	p := authorizer.Default()
	if s := c.String(authorizerProgramFlag.Name); s != "" {
		id, err := parsePubkey("--authorizer-program-id", s)
		if err != nil {
			return p, err
		}
		p.ID = id
	}
	return p, nil
}

func (a *authorizerCtx) send(c *cli.Context, ixs []solana.Instruction, what string, addr solana.PublicKey) error {
	sig, err := a.client.Send(c.Context, a.wallet, ixs)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s: %s\nsignature: %s\n", what, addr, sig)
	return nil
}

func authorizationJSON(addr solana.PublicKey, a *authorizer.Authorization) map[string]any {
	scope := map[string]string{"hex": hex.EncodeToString(a.Scope)}
	if utf8.Valid(a.Scope) {
		scope["text"] = string(a.Scope)
	}
	delegates := make([]string, len(a.Delegates))
	for i, d := range a.Delegates {
		delegates[i] = d.String()
	}
	return map[string]any{
		"address":                       addr.String(),
		"grantor":                       a.Grantor.String(),
		"grantee":                       a.Grantee.String(),
		"permissionless":                a.Grantee.Equals(authorizer.Everyone),
		"scope":                         scope,
		"active":                        a.Active,
		"delegates":                     delegates,
		"grantor_update_unix_timestamp": a.GrantorUpdateUnixTimestamp,
		"bump":                          a.Bump,
	}
}

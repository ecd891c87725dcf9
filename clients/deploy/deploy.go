// Package deploy deploys, upgrades, re-assigns and closes Solana programs
// through the BPF upgradeable loader, so no Solana CLI is needed: it works the
// same against the embedded localnet, solana-test-validator, devnet and
// mainnet.
//
// A deployment writes the program into a buffer account in chunks (sent
// concurrently, each re-sent until confirmed), then deploys or upgrades from the
// buffer in one transaction. Transactions go through clients/chain
// (chain.Client.SendResending).
//
// Repo finds this repository's built programs and their keypairs, and keeps
// every file that names a program id in step with the keypairs.
package deploy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"
	"golang.org/x/sync/errgroup"

	"github.com/psyche-go/psyche/clients/chain"
)

// Loader account layouts (bincode of UpgradeableLoaderState).
const (
	BufferMetadataSize      = 37 // u32 tag + Option<Pubkey> authority
	ProgramAccountSize      = 36 // u32 tag + programdata address
	ProgramDataMetadataSize = 45 // u32 tag + u64 slot + Option<Pubkey> authority

	stateProgram     = 2
	stateProgramData = 3
)

// Loader instruction tags (bincode u32).
const (
	ixInitializeBuffer     = 0
	ixWrite                = 1
	ixDeployWithMaxDataLen = 2
	ixUpgrade              = 3
	ixSetAuthority         = 4
	ixClose                = 5
)

// maxTxSize is the largest serialized transaction the cluster accepts.
const maxTxSize = 1232

// Client sends loader transactions. Payer signs every transaction and pays fees
// and rent.
type Client struct {
	// Chain sends and confirms the transactions and reads the accounts.
	Chain *chain.Client
	// RPC is Chain.RPC, for callers' own reads.
	RPC   *rpc.Client
	Payer solana.PrivateKey
	// Parallel bounds concurrent buffer writes; default 8.
	Parallel int
	// Attempts per transaction before giving up; default 5. A transaction is
	// re-sent with a fresh blockhash when it is not confirmed in time.
	Attempts int
	// ConfirmTimeout is how long one attempt waits for confirmation; default
	// 30 s (a blockhash lives ~60-90 s).
	ConfirmTimeout time.Duration
	Log            *slog.Logger
}

func (c *Client) parallel() int { return max(c.Parallel, 1) }
func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// New returns a client with the defaults for the JSON-RPC endpoint rpcURL,
// which must be an http(s) URL: New panics on any other (NewClient takes a
// client from chain.New, which returns that error).
func New(rpcURL string, payer solana.PrivateKey) *Client {
	c, err := chain.New(rpcURL, "")
	if err != nil {
		panic(fmt.Sprintf("deploy: %v", err))
	}
	c.PollInterval = 100 * time.Millisecond
	return NewClient(c, payer)
}

// NewClient returns a client with the defaults that sends through c.
func NewClient(c *chain.Client, payer solana.PrivateKey) *Client {
	return &Client{Chain: c, RPC: c.RPC, Payer: payer, Parallel: 8, Attempts: 5, ConfirmTimeout: 30 * time.Second}
}

// ProgramDataAddress is where the loader keeps a program's code and authority.
func ProgramDataAddress(program solana.PublicKey) solana.PublicKey {
	addr, _, err := solana.FindProgramAddress([][]byte{program[:]}, solana.BPFLoaderUpgradeableProgramID)
	if err != nil {
		// A single 32-byte seed always has a valid bump.
		panic(fmt.Sprintf("deploy: derive programdata address: %v", err))
	}
	return addr
}

func loaderIx(tag uint32, args []byte, accounts ...*solana.AccountMeta) solana.Instruction {
	data := binary.LittleEndian.AppendUint32(nil, tag)
	return solana.NewInstruction(solana.BPFLoaderUpgradeableProgramID, accounts, append(data, args...))
}

func writeIx(buffer, authority solana.PublicKey, offset uint32, chunk []byte) solana.Instruction {
	args := binary.LittleEndian.AppendUint32(nil, offset)
	args = binary.LittleEndian.AppendUint64(args, uint64(len(chunk)))
	args = append(args, chunk...)
	return loaderIx(ixWrite, args,
		solana.Meta(buffer).WRITE(), solana.Meta(authority).SIGNER())
}

// send sends a transaction paid by the payer and signed by signers too, and
// waits for its confirmation, re-sending it with a fresh blockhash when it does
// not land in time and waiting for the next slot when the loader refuses to
// touch a program twice in one. Every loader transaction may safely land
// twice: writes are idempotent, and the rest fail once done, after which an
// earlier copy that landed counts. Failed transactions are not re-sent: the
// error carries the program logs.
func (c *Client) send(ctx context.Context, op string, ixs []solana.Instruction, signers ...solana.PrivateKey) (solana.Signature, error) {
	timeout := c.ConfirmTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sig, err := c.Chain.SendResending(ctx, chain.Resend{
		Attempts: c.Attempts,
		After:    timeout,
		NextSlot: touchedThisSlot,
		Log:      c.log().With("op", op),
	}, c.Payer, ixs, signers...)
	if err != nil {
		return sig, opError(op, err)
	}
	return sig, nil
}

// touchedThisSlot is the loader's refusal to deploy, upgrade or extend a
// program twice in one slot.
func touchedThisSlot(e *chain.TxError) bool {
	for _, l := range e.Logs {
		if strings.Contains(l, "in this block already") {
			return true
		}
	}
	return false
}

// opError names the operation that failed and, for a failed transaction,
// lists the program logs, where the loader says why.
func opError(op string, err error) error {
	var te *chain.TxError
	if errors.As(err, &te) && len(te.Logs) > 0 {
		return fmt.Errorf("%s: %w\n  %s", op, err, strings.Join(te.Logs, "\n  "))
	}
	return fmt.Errorf("%s: %w", op, err)
}

// chunkSize is the largest write payload that keeps a write transaction
// (payer + authority signatures) within the packet size.
func (c *Client) chunkSize(buffer, authority solana.PublicKey) (int, error) {
	probe := func(n int) (int, error) {
		tx, err := solana.NewTransaction([]solana.Instruction{writeIx(buffer, authority, 0, make([]byte, n))},
			solana.Hash{}, solana.TransactionPayer(c.Payer.PublicKey()))
		if err != nil {
			return 0, err
		}
		tx.Signatures = make([]solana.Signature, tx.Message.Header.NumRequiredSignatures)
		raw, err := tx.MarshalBinary()
		return len(raw), err
	}
	base, err := probe(0)
	if err != nil {
		return 0, fmt.Errorf("size a write transaction: %w", err)
	}
	n := maxTxSize - base
	for n > 0 {
		size, err := probe(n)
		if err != nil {
			return 0, err
		}
		if size <= maxTxSize {
			return n, nil
		}
		n -= size - maxTxSize
	}
	return 0, errors.New("no room for data in a write transaction")
}

// WriteBuffer creates a buffer account owned by the loader, with authority
// allowed to deploy from it, and writes elf into it. On failure after the
// buffer was created, the error names the buffer so its rent can be
// reclaimed with CloseBuffer.
func (c *Client) WriteBuffer(ctx context.Context, authority solana.PrivateKey, elf []byte) (solana.PublicKey, error) {
	if len(elf) < 4 || string(elf[:4]) != "\x7fELF" {
		return solana.PublicKey{}, errors.New("not an ELF program")
	}
	buffer, err := solana.NewRandomPrivateKey()
	if err != nil {
		return solana.PublicKey{}, err
	}
	size := uint64(BufferMetadataSize + len(elf))
	rent, err := c.Chain.RPC.GetMinimumBalanceForRentExemption(ctx, size, rpc.CommitmentConfirmed)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("get rent for %d bytes: %w", size, err)
	}
	create := system.NewCreateAccountInstruction(rent, size, solana.BPFLoaderUpgradeableProgramID,
		c.Payer.PublicKey(), buffer.PublicKey()).Build()
	init := loaderIx(ixInitializeBuffer, nil, solana.Meta(buffer.PublicKey()).WRITE(), solana.Meta(authority.PublicKey()))
	if _, err := c.send(ctx, "create buffer", []solana.Instruction{create, init}, buffer); err != nil {
		return solana.PublicKey{}, err
	}
	bufKey := buffer.PublicKey()
	chunk, err := c.chunkSize(bufKey, authority.PublicKey())
	if err != nil {
		return bufKey, err
	}
	start := time.Now()
	if err := c.writeChunks(ctx, bufKey, authority, elf, chunk); err != nil {
		return bufKey, fmt.Errorf("write buffer %s (close it with CloseBuffer to reclaim its rent): %w", bufKey, err)
	}
	c.log().Info("buffer written", "buffer", bufKey, "bytes", len(elf), "chunk", chunk,
		"transactions", (len(elf)+chunk-1)/chunk, "seconds", time.Since(start).Seconds())
	return bufKey, nil
}

func (c *Client) writeChunks(ctx context.Context, buffer solana.PublicKey, authority solana.PrivateKey, elf []byte, chunk int) error {
	// The first failure cancels the writes in flight and stops new ones.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.parallel())
	for off := 0; off < len(elf) && gctx.Err() == nil; off += chunk {
		end := min(off+chunk, len(elf))
		ix := writeIx(buffer, authority.PublicKey(), uint32(off), elf[off:end])
		g.Go(func() error {
			_, err := c.send(gctx, fmt.Sprintf("write bytes %d-%d", off, end), []solana.Instruction{ix}, authority)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// DeployOptions tunes Deploy.
type DeployOptions struct {
	// MaxDataLen is the largest program later upgrades may install; default
	// twice the ELF size.
	MaxDataLen int
}

// Deploy deploys elf as the program whose keypair is program, upgradeable by
// authority.
func (c *Client) Deploy(ctx context.Context, program, authority solana.PrivateKey, elf []byte, opts DeployOptions) error {
	maxLen := opts.MaxDataLen
	if maxLen == 0 {
		maxLen = 2 * len(elf)
	}
	if maxLen < len(elf) {
		return fmt.Errorf("max data length %d is smaller than the program (%d bytes)", maxLen, len(elf))
	}
	buffer, err := c.WriteBuffer(ctx, authority, elf)
	if err != nil {
		return err
	}
	rent, err := c.Chain.RPC.GetMinimumBalanceForRentExemption(ctx, ProgramAccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		return fmt.Errorf("get rent for the program account: %w", err)
	}
	programKey := program.PublicKey()
	create := system.NewCreateAccountInstruction(rent, ProgramAccountSize, solana.BPFLoaderUpgradeableProgramID,
		c.Payer.PublicKey(), programKey).Build()
	deployIx := loaderIx(ixDeployWithMaxDataLen, binary.LittleEndian.AppendUint64(nil, uint64(maxLen)),
		solana.Meta(c.Payer.PublicKey()).WRITE().SIGNER(),
		solana.Meta(ProgramDataAddress(programKey)).WRITE(),
		solana.Meta(programKey).WRITE(),
		solana.Meta(buffer).WRITE(),
		solana.Meta(solana.SysVarRentPubkey),
		solana.Meta(solana.SysVarClockPubkey),
		solana.Meta(solana.SystemProgramID),
		solana.Meta(authority.PublicKey()).SIGNER())
	if _, err := c.send(ctx, "deploy "+programKey.String(), []solana.Instruction{create, deployIx}, program, authority); err != nil {
		return fmt.Errorf("%w (buffer %s keeps the program until closed)", err, buffer)
	}
	c.log().Info("deployed", "program", programKey, "bytes", len(elf), "max_data_len", maxLen)
	return nil
}

// Upgrade replaces the code of program with elf; the buffer's rent goes back
// to the payer.
func (c *Client) Upgrade(ctx context.Context, program solana.PublicKey, authority solana.PrivateKey, elf []byte) error {
	buffer, err := c.WriteBuffer(ctx, authority, elf)
	if err != nil {
		return err
	}
	ix := loaderIx(ixUpgrade, nil,
		solana.Meta(ProgramDataAddress(program)).WRITE(),
		solana.Meta(program).WRITE(),
		solana.Meta(buffer).WRITE(),
		solana.Meta(c.Payer.PublicKey()).WRITE(),
		solana.Meta(solana.SysVarRentPubkey),
		solana.Meta(solana.SysVarClockPubkey),
		solana.Meta(authority.PublicKey()).SIGNER())
	if _, err := c.send(ctx, "upgrade "+program.String(), []solana.Instruction{ix}, authority); err != nil {
		return fmt.Errorf("%w (buffer %s keeps the new code until closed)", err, buffer)
	}
	c.log().Info("upgraded", "program", program, "bytes", len(elf))
	return nil
}

// SetAuthority changes who may upgrade program; a nil newAuthority makes it
// immutable for good.
func (c *Client) SetAuthority(ctx context.Context, program solana.PublicKey, current solana.PrivateKey, newAuthority *solana.PublicKey) error {
	accounts := []*solana.AccountMeta{
		solana.Meta(ProgramDataAddress(program)).WRITE(),
		solana.Meta(current.PublicKey()).SIGNER(),
	}
	if newAuthority != nil {
		accounts = append(accounts, solana.Meta(*newAuthority))
	}
	_, err := c.send(ctx, "set authority of "+program.String(), []solana.Instruction{loaderIx(ixSetAuthority, nil, accounts...)}, current)
	return err
}

// Close closes program (it can never be deployed again at that address) and
// sends the lamports of its code account to recipient. It returns the lamports
// moved.
func (c *Client) Close(ctx context.Context, program solana.PublicKey, authority solana.PrivateKey, recipient solana.PublicKey) (uint64, error) {
	data := ProgramDataAddress(program)
	bal, err := c.Chain.Balance(ctx, data)
	if err != nil {
		return 0, err
	}
	ix := loaderIx(ixClose, nil,
		solana.Meta(data).WRITE(),
		solana.Meta(recipient).WRITE(),
		solana.Meta(authority.PublicKey()).SIGNER(),
		solana.Meta(program).WRITE())
	if _, err := c.send(ctx, "close "+program.String(), []solana.Instruction{ix}, authority); err != nil {
		return 0, err
	}
	return bal, nil
}

// CloseBuffer closes a buffer left by a failed deployment and returns its
// lamports to recipient.
func (c *Client) CloseBuffer(ctx context.Context, buffer solana.PublicKey, authority solana.PrivateKey, recipient solana.PublicKey) error {
	ix := loaderIx(ixClose, nil,
		solana.Meta(buffer).WRITE(),
		solana.Meta(recipient).WRITE(),
		solana.Meta(authority.PublicKey()).SIGNER())
	_, err := c.send(ctx, "close buffer "+buffer.String(), []solana.Instruction{ix}, authority)
	return err
}

// ProgramInfo describes a deployed upgradeable program.
type ProgramInfo struct {
	ProgramData solana.PublicKey
	Slot        uint64            // last deployment
	Authority   *solana.PublicKey // nil when immutable
	Code        []byte            // the ELF, with the loader's zero padding up to max data length
}

// Info reads program's loader accounts.
func (c *Client) Info(ctx context.Context, program solana.PublicKey) (*ProgramInfo, error) {
	raw, owner, err := c.Chain.AccountData(ctx, program)
	if err != nil {
		return nil, fmt.Errorf("read program account: %w", err)
	}
	if !owner.Equals(solana.BPFLoaderUpgradeableProgramID) || len(raw) < ProgramAccountSize ||
		binary.LittleEndian.Uint32(raw) != stateProgram {
		return nil, fmt.Errorf("%s is not an upgradeable program", program)
	}
	dataAddr := solana.PublicKeyFromBytes(raw[4:36])
	d, _, err := c.Chain.AccountData(ctx, dataAddr)
	if err != nil {
		return nil, fmt.Errorf("read program data: %w", err)
	}
	if len(d) < ProgramDataMetadataSize || binary.LittleEndian.Uint32(d) != stateProgramData {
		return nil, fmt.Errorf("%s is not program data", dataAddr)
	}
	info := &ProgramInfo{ProgramData: dataAddr, Slot: binary.LittleEndian.Uint64(d[4:12]), Code: d[ProgramDataMetadataSize:]}
	if d[12] == 1 {
		a := solana.PublicKeyFromBytes(d[13:45])
		info.Authority = &a
	}
	return info, nil
}

// Action says what Ensure did.
type Action string

const (
	Deployed  Action = "deployed"
	Upgraded  Action = "upgraded"
	Unchanged Action = "unchanged"
)

const ixExtendProgram = 6

// Ensure makes the program at program's address run elf: it deploys when there
// is no program yet, upgrades (extending the program data first when elf is
// larger than it) when the code differs, and does nothing when it matches.
func (c *Client) Ensure(ctx context.Context, program, authority solana.PrivateKey, elf []byte, opts DeployOptions) (Action, error) {
	id := program.PublicKey()
	if _, _, err := c.Chain.AccountData(ctx, id); errors.Is(err, chain.ErrAccountNotFound) {
		return Deployed, c.Deploy(ctx, program, authority, elf, opts)
	} else if err != nil {
		return "", fmt.Errorf("read program account: %w", err)
	}
	info, err := c.Info(ctx, id)
	if err != nil {
		return "", err
	}
	if len(info.Code) >= len(elf) && bytes.Equal(info.Code[:len(elf)], elf) && allZero(info.Code[len(elf):]) {
		return Unchanged, nil
	}
	if info.Authority == nil || !info.Authority.Equals(authority.PublicKey()) {
		return "", fmt.Errorf("program %s differs from the ELF but %s may not upgrade it (authority: %v)", id, authority.PublicKey(), info.Authority)
	}
	if extra := len(elf) - len(info.Code); extra > 0 {
		if err := c.extend(ctx, id, uint32(extra)); err != nil {
			return "", err
		}
	}
	return Upgraded, c.Upgrade(ctx, id, authority, elf)
}

// extend grows a program's data account by extra bytes, paid by the payer.
func (c *Client) extend(ctx context.Context, program solana.PublicKey, extra uint32) error {
	ix := loaderIx(ixExtendProgram, binary.LittleEndian.AppendUint32(nil, extra),
		solana.Meta(ProgramDataAddress(program)).WRITE(),
		solana.Meta(program).WRITE(),
		solana.Meta(solana.SystemProgramID),
		solana.Meta(c.Payer.PublicKey()).WRITE().SIGNER())
	_, err := c.send(ctx, fmt.Sprintf("extend %s by %d bytes", program, extra), []solana.Instruction{ix})
	return err
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

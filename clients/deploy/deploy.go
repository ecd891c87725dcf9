// Package deploy deploys, upgrades, re-assigns and closes Solana programs
// through the BPF upgradeable loader, so no Solana CLI is needed: it works the
// same against the embedded localnet, solana-test-validator, devnet and
// mainnet.
//
// A deployment writes the program into a buffer account in chunks (sent
// concurrently, each retried until confirmed), then deploys or upgrades from the
// buffer in one transaction.
package deploy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"
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
	RPC   *rpc.Client
	Payer solana.PrivateKey
	// Parallel bounds concurrent buffer writes; default 8.
	Parallel int
	// Attempts per transaction before giving up; default 5. A write is
	// re-sent with a fresh blockhash when it is not confirmed in time.
	Attempts int
	// ConfirmTimeout is how long one attempt waits for confirmation; default
	// 30 s (a blockhash lives ~60-90 s).
	ConfirmTimeout time.Duration
	Log            *slog.Logger
}

func (c *Client) parallel() int { return max(c.Parallel, 1) }
func (c *Client) attempts() int { return max(c.Attempts, 1) }
func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// New returns a client with the defaults.
func New(rpcURL string, payer solana.PrivateKey) *Client {
	return &Client{RPC: rpc.New(rpcURL), Payer: payer, Parallel: 8, Attempts: 5, ConfirmTimeout: 30 * time.Second}
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

// signers maps public keys to the keys that sign a transaction.
type signers map[solana.PublicKey]solana.PrivateKey

func (c *Client) signerSet(keys ...solana.PrivateKey) signers {
	s := signers{c.Payer.PublicKey(): c.Payer}
	for _, k := range keys {
		s[k.PublicKey()] = k
	}
	return s
}

// TxError is a transaction the cluster rejected, with its program logs.
type TxError struct {
	Op   string
	Err  error
	Logs []string
}

func (e *TxError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Op, e.Err)
	if len(e.Logs) > 0 {
		msg += "\n  " + strings.Join(e.Logs, "\n  ")
	}
	return msg
}

func (e *TxError) Unwrap() error { return e.Err }

func (e *TxError) sameSlot() bool {
	for _, l := range e.Logs {
		if strings.Contains(l, "in this block already") {
			return true
		}
	}
	return false
}

// waitNextSlot returns once the cluster's confirmed slot has advanced.
func (c *Client) waitNextSlot(ctx context.Context) error {
	start, err := c.RPC.GetSlot(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		slot, err := c.RPC.GetSlot(ctx, rpc.CommitmentConfirmed)
		if err != nil {
			return err
		}
		if slot > start {
			return nil
		}
	}
}

// errPermanent marks failures that re-sending cannot fix.
var errPermanent = errors.New("rejected")

// send signs and sends a transaction, waits for confirmation, and retries
// with a fresh blockhash when it does not land. Simulation and execution
// failures are returned at once (wrapping errPermanent), unless an earlier
// attempt that seemed lost turns out to have landed.
func (c *Client) send(ctx context.Context, op string, ixs []solana.Instruction, keys signers) (solana.Signature, error) {
	var (
		last  error
		tried []solana.Signature
	)
	for attempt := 0; attempt < c.attempts(); attempt++ {
		if err := ctx.Err(); err != nil {
			return solana.Signature{}, err
		}
		if sig, ok := c.landed(ctx, tried); ok {
			return sig, nil
		}
		earlier := tried
		sig, err := c.sendOnce(ctx, op, ixs, keys)
		if !sig.IsZero() {
			tried = append(tried, sig)
		}
		var txErr *TxError
		if errors.As(err, &txErr) && txErr.sameSlot() {
			// The loader refuses to touch a program twice in one slot.
			if werr := c.waitNextSlot(ctx); werr != nil {
				return sig, fmt.Errorf("%w (waiting for the next slot: %w)", err, werr)
			}
			last = err
			continue
		}
		if err != nil && errors.Is(err, errPermanent) {
			// "Already in use" and the like: a late copy may have done the work.
			if sig, ok := c.landed(ctx, earlier); ok {
				return sig, nil
			}
		}
		if err == nil || errors.Is(err, errPermanent) || ctx.Err() != nil {
			return sig, err
		}
		last = err
		c.log().Warn("transaction not confirmed, retrying", "op", op, "attempt", attempt+1, "err", err)
	}
	return solana.Signature{}, fmt.Errorf("%s: gave up after %d attempts: %w", op, c.attempts(), last)
}

// landed reports an earlier attempt that was confirmed without error.
func (c *Client) landed(ctx context.Context, sigs []solana.Signature) (solana.Signature, bool) {
	if len(sigs) == 0 {
		return solana.Signature{}, false
	}
	out, err := c.RPC.GetSignatureStatuses(ctx, true, sigs...)
	if err != nil {
		return solana.Signature{}, false
	}
	for i, st := range out.Value {
		if st != nil && st.Err == nil && i < len(sigs) &&
			(st.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || st.ConfirmationStatus == rpc.ConfirmationStatusFinalized) {
			return sigs[i], true
		}
	}
	return solana.Signature{}, false
}

func (c *Client) sendOnce(ctx context.Context, op string, ixs []solana.Instruction, keys signers) (solana.Signature, error) {
	bh, err := c.RPC.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return solana.Signature{}, fmt.Errorf("%s: get blockhash: %w", op, err)
	}
	tx, err := solana.NewTransaction(ixs, bh.Value.Blockhash, solana.TransactionPayer(c.Payer.PublicKey()))
	if err != nil {
		return solana.Signature{}, fmt.Errorf("%s: build transaction: %w: %w", op, errPermanent, err)
	}
	if _, err := tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		if k, ok := keys[pk]; ok {
			return &k
		}
		return nil
	}); err != nil {
		return solana.Signature{}, fmt.Errorf("%s: sign: %w: %w", op, errPermanent, err)
	}
	sig, err := c.RPC.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: rpc.CommitmentConfirmed})
	if err != nil {
		var rpcErr *jsonrpc.RPCError
		if errors.As(err, &rpcErr) {
			// A preflight failure: the transaction itself is wrong.
			return solana.Signature{}, &TxError{Op: op, Err: fmt.Errorf("%w: %s", errPermanent, rpcErr.Message), Logs: rpcLogs(rpcErr)}
		}
		return solana.Signature{}, fmt.Errorf("%s: send: %w", op, err)
	}
	return sig, c.confirm(ctx, op, sig)
}

func rpcLogs(e *jsonrpc.RPCError) []string {
	m, ok := e.Data.(map[string]any)
	if !ok {
		return nil
	}
	raw, _ := m["logs"].([]any)
	var logs []string
	for _, l := range raw {
		if s, ok := l.(string); ok {
			logs = append(logs, s)
		}
	}
	return logs
}

func (c *Client) confirm(ctx context.Context, op string, sig solana.Signature) error {
	timeout := c.ConfirmTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		out, err := c.RPC.GetSignatureStatuses(ctx, false, sig)
		if err == nil && len(out.Value) == 1 && out.Value[0] != nil {
			st := out.Value[0]
			if st.Err != nil {
				return &TxError{Op: op, Err: fmt.Errorf("%w: transaction %s failed: %v", errPermanent, sig, st.Err)}
			}
			if st.ConfirmationStatus == rpc.ConfirmationStatusConfirmed || st.ConfirmationStatus == rpc.ConfirmationStatusFinalized {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: transaction %s not confirmed within %s", op, sig, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, size, rpc.CommitmentConfirmed)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("get rent for %d bytes: %w", size, err)
	}
	create := system.NewCreateAccountInstruction(rent, size, solana.BPFLoaderUpgradeableProgramID,
		c.Payer.PublicKey(), buffer.PublicKey()).Build()
	init := loaderIx(ixInitializeBuffer, nil, solana.Meta(buffer.PublicKey()).WRITE(), solana.Meta(authority.PublicKey()))
	if _, err := c.send(ctx, "create buffer", []solana.Instruction{create, init}, c.signerSet(buffer)); err != nil {
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	offsets := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	keys := c.signerSet(authority)
	for range c.parallel() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range offsets {
				end := min(off+chunk, len(elf))
				ix := writeIx(buffer, authority.PublicKey(), uint32(off), elf[off:end])
				if _, err := c.send(ctx, fmt.Sprintf("write bytes %d-%d", off, end), []solana.Instruction{ix}, keys); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for off := 0; off < len(elf); off += chunk {
		select {
		case offsets <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(offsets)
	wg.Wait()
	if firstErr != nil {
		return firstErr
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
	rent, err := c.RPC.GetMinimumBalanceForRentExemption(ctx, ProgramAccountSize, rpc.CommitmentConfirmed)
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
	if _, err := c.send(ctx, "deploy "+programKey.String(), []solana.Instruction{create, deployIx}, c.signerSet(program, authority)); err != nil {
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
	if _, err := c.send(ctx, "upgrade "+program.String(), []solana.Instruction{ix}, c.signerSet(authority)); err != nil {
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
	_, err := c.send(ctx, "set authority of "+program.String(), []solana.Instruction{loaderIx(ixSetAuthority, nil, accounts...)}, c.signerSet(current))
	return err
}

// Close closes program (it can never be deployed again at that address) and
// sends the lamports of its code account to recipient. It returns the lamports
// moved.
func (c *Client) Close(ctx context.Context, program solana.PublicKey, authority solana.PrivateKey, recipient solana.PublicKey) (uint64, error) {
	data := ProgramDataAddress(program)
	bal, err := c.RPC.GetBalance(ctx, data, rpc.CommitmentConfirmed)
	if err != nil {
		return 0, fmt.Errorf("read balance of %s: %w", data, err)
	}
	ix := loaderIx(ixClose, nil,
		solana.Meta(data).WRITE(),
		solana.Meta(recipient).WRITE(),
		solana.Meta(authority.PublicKey()).SIGNER(),
		solana.Meta(program).WRITE())
	if _, err := c.send(ctx, "close "+program.String(), []solana.Instruction{ix}, c.signerSet(authority)); err != nil {
		return 0, err
	}
	return bal.Value, nil
}

// CloseBuffer closes a buffer left by a failed deployment and returns its
// lamports to recipient.
func (c *Client) CloseBuffer(ctx context.Context, buffer solana.PublicKey, authority solana.PrivateKey, recipient solana.PublicKey) error {
	ix := loaderIx(ixClose, nil,
		solana.Meta(buffer).WRITE(),
		solana.Meta(recipient).WRITE(),
		solana.Meta(authority.PublicKey()).SIGNER())
	_, err := c.send(ctx, "close buffer "+buffer.String(), []solana.Instruction{ix}, c.signerSet(authority))
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
	acc, err := c.RPC.GetAccountInfoWithOpts(ctx, program, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed})
	if err != nil {
		return nil, fmt.Errorf("read program account %s: %w", program, err)
	}
	raw := acc.Value.Data.GetBinary()
	if !acc.Value.Owner.Equals(solana.BPFLoaderUpgradeableProgramID) || len(raw) < ProgramAccountSize ||
		binary.LittleEndian.Uint32(raw) != stateProgram {
		return nil, fmt.Errorf("%s is not an upgradeable program", program)
	}
	dataAddr := solana.PublicKeyFromBytes(raw[4:36])
	dacc, err := c.RPC.GetAccountInfoWithOpts(ctx, dataAddr, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed})
	if err != nil {
		return nil, fmt.Errorf("read program data %s: %w", dataAddr, err)
	}
	d := dacc.Value.Data.GetBinary()
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
	acc, err := c.RPC.GetAccountInfoWithOpts(ctx, id, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed})
	if errors.Is(err, rpc.ErrNotFound) {
		return Deployed, c.Deploy(ctx, program, authority, elf, opts)
	}
	if err != nil {
		return "", fmt.Errorf("read program account %s: %w", id, err)
	}
	if acc.Value == nil {
		return Deployed, c.Deploy(ctx, program, authority, elf, opts)
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
	_, err := c.send(ctx, fmt.Sprintf("extend %s by %d bytes", program, extra), []solana.Instruction{ix}, c.signerSet())
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

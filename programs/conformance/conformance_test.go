// The conformance suite: builds the conformance program with our toolchain,
// deploys it through the BPF upgradeable loader on the embedded localnet and
// checks each SDK and toolchain feature from the outside, logging the compute
// units every instruction used (go test -v prints them).
package conformance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
	"github.com/psyche-go/psyche/programs/toolchain/buildtest"
)

const sol = 1_000_000_000

func disc(namespace, name string) []byte {
	h := sha256.Sum256([]byte(namespace + ":" + name))
	return h[:8]
}

func ixData(name string, args ...[]byte) []byte {
	return bytes.Join(append([][]byte{disc("global", name)}, args...), nil)
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

type env struct {
	t       *testing.T
	ctx     context.Context
	client  *rpc.Client
	payer   solana.PrivateKey
	program solana.PublicKey
}

// result is what one executed transaction left on chain.
type result struct {
	err    any // the transaction error, nil on success
	logs   []string
	cu     uint64
	ret    []byte
	signed solana.Signature
}

// exec sends the instructions (without preflight, so failures land with their
// logs) and reads the executed transaction back.
func (e *env) exec(name string, ixs []solana.Instruction, extra ...solana.PrivateKey) result {
	e.t.Helper()
	keys := map[solana.PublicKey]solana.PrivateKey{e.payer.PublicKey(): e.payer}
	for _, k := range extra {
		keys[k.PublicKey()] = k
	}
	bh, err := e.client.GetLatestBlockhash(e.ctx, rpc.CommitmentConfirmed)
	if err != nil {
		e.t.Fatal(err)
	}
	tx, err := solana.NewTransaction(ixs, bh.Value.Blockhash, solana.TransactionPayer(e.payer.PublicKey()))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		if k, ok := keys[pk]; ok {
			return &k
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	sig, err := e.client.SendTransactionWithOpts(e.ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
	if err != nil {
		e.t.Fatalf("%s: send: %v", name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := e.client.GetTransaction(e.ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed})
		if err == nil && got != nil && got.Meta != nil {
			r := result{err: got.Meta.Err, logs: got.Meta.LogMessages, ret: got.Meta.ReturnData.Data.Content, signed: sig}
			if got.Meta.ComputeUnitsConsumed != nil {
				r.cu = *got.Meta.ComputeUnitsConsumed
			}
			e.t.Logf("%-28s %6d CU", name, r.cu)
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%s: transaction %s did not land", name, sig)
	return result{}
}

func (e *env) call(name string, data []byte, accounts ...*solana.AccountMeta) result {
	e.t.Helper()
	return e.exec(name, []solana.Instruction{solana.NewInstruction(e.program, accounts, data)})
}

func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.err != nil {
		t.Fatalf("transaction failed: %v\n%s", r.err, strings.Join(r.logs, "\n"))
	}
	return r
}

// customCode extracts N from {"InstructionError":[0,{"Custom":N}]}.
func (r result) customCode(t *testing.T) uint32 {
	t.Helper()
	m, _ := r.err.(map[string]any)
	ie, _ := m["InstructionError"].([]any)
	if len(ie) == 2 {
		if c, ok := ie[1].(map[string]any); ok {
			if n, ok := c["Custom"].(float64); ok {
				return uint32(n)
			}
		}
	}
	t.Fatalf("error %v is not a custom program error\n%s", r.err, strings.Join(r.logs, "\n"))
	return 0
}

func (r result) hasLog(substr string) bool {
	for _, l := range r.logs {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

func (e *env) account(addr solana.PublicKey) *rpc.Account {
	e.t.Helper()
	acc, err := e.client.GetAccountInfoWithOpts(e.ctx, addr, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed})
	if err != nil {
		e.t.Fatalf("read %s: %v", addr, err)
	}
	return acc.Value
}

// createAccount makes a fresh account of space bytes owned by owner.
func (e *env) createAccount(space uint64, owner solana.PublicKey) solana.PrivateKey {
	e.t.Helper()
	return e.createAccountFunded(space, space, owner)
}

// createAccountFunded makes an account of space bytes holding the rent of
// rentFor bytes, so that it may grow.
func (e *env) createAccountFunded(space, rentFor uint64, owner solana.PublicKey) solana.PrivateKey {
	e.t.Helper()
	key, _ := solana.NewRandomPrivateKey()
	rent, err := e.client.GetMinimumBalanceForRentExemption(e.ctx, rentFor, rpc.CommitmentConfirmed)
	if err != nil {
		e.t.Fatal(err)
	}
	ix := system.NewCreateAccountInstruction(rent, space, owner, e.payer.PublicKey(), key.PublicKey()).Build()
	e.exec("system create_account", []solana.Instruction{ix}, key).ok(e.t)
	return key
}

// fundedKey returns a new keypair holding 1 SOL.
func fundedKey(t *testing.T, e *env) solana.PrivateKey {
	t.Helper()
	key, _ := solana.NewRandomPrivateKey()
	ix := system.NewTransferInstruction(sol, e.payer.PublicKey(), key.PublicKey()).Build()
	e.exec("system transfer", []solana.Instruction{ix}).ok(t)
	return key
}

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a validator and builds a program")
	}
	elf := buildtest.Program(t, "psyche-conformance")
	v := localnettest.Start(t, localnet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	payer := localnettest.NewFundedKeypair(t, v, 100*sol)
	program, _ := solana.NewRandomPrivateKey()
	if err := deploy.New(v.RPCURL, payer).Deploy(ctx, program, payer, elf, deploy.DeployOptions{}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	t.Logf("conformance.so: %d bytes", len(elf))
	e := &env{t: t, ctx: ctx, client: localnettest.Client(v), payer: payer, program: program.PublicKey()}
	// The program is usable from the slot after its deployment.
	for i := 0; ; i++ {
		if e.call("echo_return (warm-up)", ixData("echo_return")).err == nil {
			break
		}
		if i == 20 {
			t.Fatal("the deployed program never became invocable")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("logs and events", func(t *testing.T) {
		e.t = t
		r := e.call("log_and_emit", ixData("log_and_emit", u64le(42), u64le(uint64(0xffff_ffff_ffff_fff9)))).ok(t)
		for _, want := range []string{"Program log: conformance: hello", "Program log: value=42 delta=-7"} {
			if !r.hasLog(want) {
				t.Errorf("no log %q in\n%s", want, strings.Join(r.logs, "\n"))
			}
		}
		want := append(disc("event", "Ping"), u64le(42)...)
		var found bool
		for _, l := range r.logs {
			if rest, ok := strings.CutPrefix(l, "Program data: "); ok {
				got, err := base64.StdEncoding.DecodeString(rest)
				found = err == nil && bytes.Equal(got, want)
			}
		}
		if !found {
			t.Errorf("no Ping event (%x) in\n%s", want, strings.Join(r.logs, "\n"))
		}
	})

	t.Run("account writes", func(t *testing.T) {
		e.t = t
		acc := e.createAccount(64, e.program)
		args := binary.LittleEndian.AppendUint32(nil, 10)
		args = binary.LittleEndian.AppendUint32(args, 5)
		args = append(args, "hello"...)
		e.call("write_account", ixData("write_account", args), solana.Meta(acc.PublicKey()).WRITE()).ok(t)
		data := e.account(acc.PublicKey()).Data.GetBinary()
		if want := append(make([]byte, 10), "hello"...); !bytes.Equal(data[:15], want) || !bytes.Equal(data[15:], make([]byte, 49)) {
			t.Fatalf("account data %x", data)
		}
		// Out of bounds: Anchor's AccountDidNotSerialize, nothing written.
		bad := binary.LittleEndian.AppendUint32(nil, 62)
		bad = binary.LittleEndian.AppendUint32(bad, 5)
		bad = append(bad, "world"...)
		if code := e.call("write_account (past end)", ixData("write_account", bad), solana.Meta(acc.PublicKey()).WRITE()).customCode(t); code != 3004 {
			t.Errorf("past the end: code %d, want 3004", code)
		}
		// Not writable: ConstraintMut; owned by someone else: AccountOwnedByWrongProgram.
		if code := e.call("write_account (readonly)", ixData("write_account", args), solana.Meta(acc.PublicKey())).customCode(t); code != 2000 {
			t.Errorf("readonly: code %d, want 2000", code)
		}
		foreign := e.createAccount(64, solana.SystemProgramID)
		r := e.exec("write_account (foreign)", []solana.Instruction{solana.NewInstruction(e.program,
			solana.AccountMetaSlice{solana.Meta(foreign.PublicKey()).WRITE()}, ixData("write_account", args))})
		if code := r.customCode(t); code != 3007 || !r.hasLog("AnchorError occurred. Error Code: AccountOwnedByWrongProgram. Error Number: 3007.") {
			t.Errorf("foreign: code %d, logs\n%s", code, strings.Join(r.logs, "\n"))
		}
		if data2 := e.account(acc.PublicKey()).Data.GetBinary(); !bytes.Equal(data, data2) {
			t.Error("a failed write changed the account")
		}
		// Realloc: up to 10 KiB of growth per instruction, new bytes zeroed.
		big := e.createAccountFunded(64, 64+2*10240, e.program)
		resize := func(name string, n uint32) result {
			return e.call(name, ixData("resize_account", binary.LittleEndian.AppendUint32(nil, n)), solana.Meta(big.PublicKey()).WRITE())
		}
		resize("resize_account (+10 KiB)", 64+10240).ok(t)
		if data := e.account(big.PublicKey()).Data.GetBinary(); len(data) != 64+10240 || !bytes.Equal(data, make([]byte, len(data))) {
			t.Fatalf("after resize: %d bytes", len(data))
		}
		if r := resize("resize_account (+10 KiB + 1)", 64+2*10240+1); r.err == nil || !strings.Contains(fmt.Sprint(r.err), "InvalidRealloc") {
			t.Fatalf("growing past the limit: err %v", r.err)
		}
		resize("resize_account (shrink)", 8).ok(t)
		if n := len(e.account(big.PublicKey()).Data.GetBinary()); n != 8 {
			t.Fatalf("after shrinking: %d bytes", n)
		}

		// Truncated Borsh arguments: InstructionDidNotDeserialize.
		if code := e.call("write_account (short args)", ixData("write_account", args[:6]), solana.Meta(acc.PublicKey()).WRITE()).customCode(t); code != 102 {
			t.Errorf("short args: code %d, want 102", code)
		}
	})

	t.Run("input parsing: duplicates and odd data lengths", func(t *testing.T) {
		e.t = t
		odd := e.createAccount(13, e.program)
		mid := e.createAccount(64, e.program)
		metas := []*solana.AccountMeta{
			solana.Meta(e.payer.PublicKey()).WRITE().SIGNER(), solana.Meta(odd.PublicKey()), solana.Meta(e.payer.PublicKey()).WRITE().SIGNER(),
			solana.Meta(mid.PublicKey()).WRITE(), solana.Meta(odd.PublicKey()), solana.Meta(solana.SystemProgramID),
		}
		r := e.call("account_keys", ixData("account_keys"), metas...).ok(t)
		type entry struct {
			key   solana.PublicKey
			len   uint64
			flags byte
		}
		payerLen := uint64(0)
		want := []entry{{e.payer.PublicKey(), payerLen, 3}, {odd.PublicKey(), 13, 0}, {e.payer.PublicKey(), payerLen, 3},
			{mid.PublicKey(), 64, 2}, {odd.PublicKey(), 13, 0},
			{solana.SystemProgramID, uint64(len(e.account(solana.SystemProgramID).Data.GetBinary())), 0}}
		if len(r.ret) != len(want)*41 {
			t.Fatalf("return data %d bytes, want %d entries", len(r.ret), len(want))
		}
		for i, w := range want {
			got := r.ret[i*41 : (i+1)*41]
			if !bytes.Equal(got[:32], w.key[:]) || binary.LittleEndian.Uint64(got[32:40]) != w.len || got[40] != w.flags {
				t.Errorf("account %d: key %s len %d flags %d, want %s %d %d", i,
					solana.PublicKeyFromBytes(got[:32]), binary.LittleEndian.Uint64(got[32:40]), got[40], w.key, w.len, w.flags)
			}
		}
	})

	t.Run("custom errors", func(t *testing.T) {
		e.t = t
		r := e.call("fail_custom", ixData("fail_custom"))
		if code := r.customCode(t); code != 6001 {
			t.Errorf("code %d, want 6001", code)
		}
		if !r.hasLog("AnchorError occurred. Error Code: Deliberate. Error Number: 6001. Error Message: The caller asked for this error.") {
			t.Errorf("no Anchor-style error log in\n%s", strings.Join(r.logs, "\n"))
		}
		if code := e.call("unknown instruction", ixData("no_such_instruction")).customCode(t); code != 101 {
			t.Errorf("unknown instruction: code %d, want 101", code)
		}
		if code := e.call("short data", []byte{1, 2, 3}).customCode(t); code != 100 {
			t.Errorf("short data: code %d, want 100", code)
		}
		if code := e.call("require_signer", ixData("require_signer"), solana.Meta(solana.NewWallet().PublicKey())).customCode(t); code != 3010 {
			t.Errorf("unsigned account: code %d, want 3010", code)
		}
	})

	t.Run("PDA and system CPI", func(t *testing.T) {
		e.t = t
		vault, bump, err := solana.FindProgramAddress([][]byte{[]byte("vault"), e.payer.PublicKey().Bytes()}, e.program)
		if err != nil {
			t.Fatal(err)
		}
		accounts := []*solana.AccountMeta{solana.Meta(e.payer.PublicKey()).WRITE().SIGNER(), solana.Meta(vault).WRITE(), solana.Meta(solana.SystemProgramID)}
		e.call("create_pda", ixData("create_pda"), accounts...).ok(t)
		acc := e.account(vault)
		data := acc.Data.GetBinary()
		rent, _ := e.client.GetMinimumBalanceForRentExemption(e.ctx, 48, rpc.CommitmentConfirmed)
		if !acc.Owner.Equals(e.program) || len(data) != 48 || acc.Lamports != rent {
			t.Fatalf("vault: owner %s, %d bytes, %d lamports (rent-exempt minimum %d)", acc.Owner, len(data), acc.Lamports, rent)
		}
		if !bytes.Equal(data[:8], disc("account", "Vault")) || data[8] != bump || !bytes.Equal(data[16:], e.payer.PublicKey().Bytes()) {
			t.Fatalf("vault data %x (bump %d)", data, bump)
		}
		// A second instruction makes the retry a different transaction.
		again := e.exec("create_pda (again)", []solana.Instruction{
			solana.NewInstruction(e.program, accounts, ixData("create_pda")),
			solana.NewInstruction(e.program, nil, ixData("echo_return", []byte("again"))),
		})
		if r := again; r.err == nil {
			t.Fatal("created the same PDA twice")
		}
		wrong := []*solana.AccountMeta{accounts[0], solana.Meta(solana.NewWallet().PublicKey()).WRITE(), accounts[2]}
		if code := e.call("create_pda (wrong address)", ixData("create_pda"), wrong...).customCode(t); code != 2006 {
			t.Errorf("wrong PDA: code %d, want 2006", code)
		}

		// Closing: only the recorded owner, then the account is gone and its
		// lamports are back with the payer.
		other := fundedKey(t, e)
		r := e.exec("close_vault (not the owner)", []solana.Instruction{solana.NewInstruction(e.program,
			solana.AccountMetaSlice{solana.Meta(other.PublicKey()).WRITE().SIGNER(), solana.Meta(vault).WRITE()}, ixData("close_vault"))}, other)
		if code := r.customCode(t); code != 2001 {
			t.Errorf("close by another wallet: code %d, want 2001", code)
		}
		closeAccounts := []*solana.AccountMeta{solana.Meta(e.payer.PublicKey()).WRITE().SIGNER(), solana.Meta(vault).WRITE()}
		before, _ := e.client.GetBalance(e.ctx, e.payer.PublicKey(), rpc.CommitmentConfirmed)
		e.call("close_vault", ixData("close_vault"), closeAccounts...).ok(t)
		after, _ := e.client.GetBalance(e.ctx, e.payer.PublicKey(), rpc.CommitmentConfirmed)
		if after.Value+5000 != before.Value+rent {
			t.Errorf("payer balance %d -> %d, want +%d rent -5000 fee", before.Value, after.Value, rent)
		}
		if _, err := e.client.GetAccountInfoWithOpts(e.ctx, vault, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed}); err == nil {
			t.Error("the closed vault still exists")
		}
		again = e.exec("close_vault (again)", []solana.Instruction{
			solana.NewInstruction(e.program, closeAccounts, ixData("close_vault")),
			solana.NewInstruction(e.program, nil, ixData("echo_return", []byte("again"))),
		})
		if code := again.customCode(t); code != 3012 {
			t.Errorf("closing twice: code %d, want 3012", code)
		}
	})

	t.Run("SPL token CPI", func(t *testing.T) {
		e.t = t
		mint := e.createAccount(token.MINT_SIZE, solana.TokenProgramID)
		e.exec("token initialize_mint2", []solana.Instruction{
			token.NewInitializeMint2Instruction(6, e.payer.PublicKey(), e.payer.PublicKey(), mint.PublicKey()).Build()}).ok(t)
		owner := solana.NewWallet().PrivateKey
		src, dst := e.createAccount(165, solana.TokenProgramID), e.createAccount(165, solana.TokenProgramID)
		e.exec("token initialize_account3 x2", []solana.Instruction{
			token.NewInitializeAccount3Instruction(e.payer.PublicKey(), src.PublicKey(), mint.PublicKey()).Build(),
			token.NewInitializeAccount3Instruction(owner.PublicKey(), dst.PublicKey(), mint.PublicKey()).Build()}).ok(t)
		e.exec("token mint_to", []solana.Instruction{
			token.NewMintToInstruction(1000, mint.PublicKey(), src.PublicKey(), e.payer.PublicKey(), nil).Build()}).ok(t)
		accounts := []*solana.AccountMeta{solana.Meta(src.PublicKey()).WRITE(), solana.Meta(mint.PublicKey()),
			solana.Meta(dst.PublicKey()).WRITE(), solana.Meta(e.payer.PublicKey()).SIGNER(), solana.Meta(solana.TokenProgramID)}
		e.call("token_transfer", ixData("token_transfer", u64le(250), []byte{6}), accounts...).ok(t)
		amount := func(k solana.PrivateKey) uint64 {
			return binary.LittleEndian.Uint64(e.account(k.PublicKey()).Data.GetBinary()[64:72])
		}
		if a, b := amount(src), amount(dst); a != 750 || b != 250 {
			t.Fatalf("balances %d/%d, want 750/250", a, b)
		}
		if r := e.call("token_transfer (wrong decimals)", ixData("token_transfer", u64le(1), []byte{9}), accounts...); r.err == nil {
			t.Fatal("transfer with wrong decimals succeeded")
		}

		// Associated token account through the ATA program, twice (idempotent).
		wallet := solana.NewWallet().PublicKey()
		ata, _, err := solana.FindAssociatedTokenAddress(wallet, mint.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		ataAccounts := []*solana.AccountMeta{solana.Meta(e.payer.PublicKey()).WRITE().SIGNER(), solana.Meta(ata).WRITE(),
			solana.Meta(wallet), solana.Meta(mint.PublicKey()), solana.Meta(solana.SystemProgramID), solana.Meta(solana.TokenProgramID),
			solana.Meta(solana.SPLAssociatedTokenAccountProgramID)}
		e.call("create_ata", ixData("create_ata"), ataAccounts...).ok(t)
		e.exec("create_ata (again)", []solana.Instruction{
			solana.NewInstruction(e.program, ataAccounts, ixData("create_ata")),
			solana.NewInstruction(e.program, nil, ixData("echo_return", []byte("again"))),
		}).ok(t)
		acc := e.account(ata)
		data := acc.Data.GetBinary()
		if !acc.Owner.Equals(solana.TokenProgramID) || len(data) != 165 || !bytes.Equal(data[:32], mint.PublicKey().Bytes()) || !bytes.Equal(data[32:64], wallet.Bytes()) {
			t.Fatalf("associated token account: owner %s, %d bytes", acc.Owner, len(data))
		}
	})

	t.Run("five-argument call", func(t *testing.T) {
		e.t = t
		a, b, c, d, f := uint64(123456789), uint64(987654321), uint64(17), uint64(5), uint64(1<<40)
		r := e.call("five_args", ixData("five_args", u64le(a), u64le(b), u64le(c), u64le(d), u64le(f))).ok(t)
		want := bits.RotateLeft64(a*31+b, int(c&63)) ^ (d - f)
		if len(r.ret) != 8 || binary.LittleEndian.Uint64(r.ret) != want {
			t.Fatalf("return %x, want %d", r.ret, want)
		}
	})

	t.Run("u128 arithmetic", func(t *testing.T) {
		e.t = t
		le128 := func(x *big.Int) []byte {
			b := x.FillBytes(make([]byte, 16))
			for i, j := 0, 15; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
			return b
		}
		a, _ := new(big.Int).SetString("200000000000000000000000000000000000", 10)
		b, _ := new(big.Int).SetString("18446744073709551617", 10)
		for _, tc := range []struct {
			x, y *big.Int
			ord  byte
		}{{a, b, 2}, {b, b, 1}} {
			r := e.call("u128_math", ixData("u128_math", le128(tc.x), le128(tc.y))).ok(t)
			sum, diff := new(big.Int).Add(tc.x, tc.y), new(big.Int).Sub(tc.x, tc.y)
			want := append(append(le128(sum), le128(diff)...), tc.ord)
			if !bytes.Equal(r.ret, want) {
				t.Fatalf("u128_math(%s, %s) = %x, want %x", tc.x, tc.y, r.ret, want)
			}
		}
		if r := e.call("u128_math (underflow)", ixData("u128_math", le128(b), le128(a))); r.err == nil {
			t.Fatal("checked_sub underflow succeeded")
		}
	})

	t.Run("panics fail the transaction", func(t *testing.T) {
		e.t = t
		r := e.call("panic", ixData("panic", []byte{1, 2}))
		if r.err == nil || !r.hasLog("Panicked in conformance/src/lib.rs") {
			t.Fatalf("err %v, logs\n%s", r.err, strings.Join(r.logs, "\n"))
		}
	})

	t.Run("return data and clock", func(t *testing.T) {
		e.t = t
		payload := []byte(fmt.Sprintf("echo %d", time.Now().UnixNano()))
		if r := e.call("echo_return", ixData("echo_return", payload)).ok(t); !bytes.Equal(r.ret, payload) {
			t.Fatalf("return %q, want %q", r.ret, payload)
		}
		r := e.call("clock", ixData("clock")).ok(t)
		ts := int64(binary.LittleEndian.Uint64(r.ret))
		if d := time.Since(time.Unix(ts, 0)); d < -time.Minute || d > time.Minute {
			t.Fatalf("clock unix_timestamp %d is %s from now", ts, d)
		}
	})
}

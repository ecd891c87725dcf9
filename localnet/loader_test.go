package localnet_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// The SPL Memo program that litesvm bundles: a small real SBPF program to
// deploy, upgrade and close through the BPF upgradeable loader.
var memoProgramID = solana.MustPublicKeyFromBase58("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")

// BPF upgradeable loader instructions (bincode: u32 tag, then fields).
const (
	loaderInitializeBuffer     = 0
	loaderWrite                = 1
	loaderDeployWithMaxDataLen = 2
	loaderUpgrade              = 3
	loaderSetAuthority         = 4
	loaderClose                = 5
	bufferMetadataSize         = 37 // tag + Option<Pubkey>
	programAccountSize         = 36 // tag + programdata address
	programDataMetadataSize    = 45 // tag + slot + Option<Pubkey>
	writeChunk                 = 900
)

func loaderIx(tag uint32, args []byte, accounts ...*solana.AccountMeta) solana.Instruction {
	data := binary.LittleEndian.AppendUint32(nil, tag)
	return solana.NewInstruction(solana.BPFLoaderUpgradeableProgramID, accounts, append(data, args...))
}

func memoELF(t *testing.T, ctx context.Context, client *rpc.Client) []byte {
	t.Helper()
	info, err := client.GetAccountInfo(ctx, memoProgramID)
	if err != nil {
		t.Fatalf("read memo program: %v", err)
	}
	elf := info.Value.Data.GetBinary()
	if len(elf) < 4 || string(elf[:4]) != "\x7fELF" {
		t.Fatalf("memo program account is not an ELF (%d bytes)", len(elf))
	}
	return elf
}

// writeBuffer creates a buffer account holding elf, owned by authority.
func writeBuffer(t *testing.T, ctx context.Context, v *localnet.Validator, payer, authority solana.PrivateKey, elf []byte) solana.PublicKey {
	t.Helper()
	client := localnettest.Client(v)
	buffer := solana.NewWallet().PrivateKey
	size := uint64(bufferMetadataSize + len(elf))
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, size, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, v, payer, []solana.PrivateKey{buffer},
		system.NewCreateAccountInstruction(rent, size, solana.BPFLoaderUpgradeableProgramID, payer.PublicKey(), buffer.PublicKey()).Build(),
		loaderIx(loaderInitializeBuffer, nil,
			solana.Meta(buffer.PublicKey()).WRITE(), solana.Meta(authority.PublicKey())),
	)
	for off := 0; off < len(elf); off += writeChunk {
		chunk := elf[off:min(off+writeChunk, len(elf))]
		args := binary.LittleEndian.AppendUint32(nil, uint32(off))
		args = binary.LittleEndian.AppendUint64(args, uint64(len(chunk)))
		send(t, ctx, v, payer, []solana.PrivateKey{authority}, loaderIx(loaderWrite, append(args, chunk...),
			solana.Meta(buffer.PublicKey()).WRITE(), solana.Meta(authority.PublicKey()).SIGNER()))
	}
	return buffer.PublicKey()
}

// invokeMemo runs the program at id with a memo and returns the logs; the
// loader makes a deployment visible from the next slot, so it retries briefly.
func invokeMemo(t *testing.T, ctx context.Context, v *localnet.Validator, payer solana.PrivateKey, id solana.PublicKey, memo string) ([]string, error) {
	t.Helper()
	client := localnettest.Client(v)
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		tx := buildTx(t, ctx, client, payer, nil, solana.NewInstruction(id, nil, []byte(memo)))
		sim, err := client.SimulateTransaction(ctx, tx)
		if err != nil {
			return nil, err
		}
		if sim.Value.Err == nil {
			sig, err := client.SendTransaction(ctx, tx)
			if err != nil {
				return nil, err
			}
			localnettest.WaitConfirmed(t, v, sig)
			return sim.Value.Logs, nil
		}
		lastErr = fmt.Errorf("simulation failed: %v %q", sim.Value.Err, sim.Value.Logs)
	}
	return nil, lastErr
}

func TestUpgradeableLoaderLifecycle(t *testing.T) {
	v := localnettest.Start(t, localnet.Options{SlotDuration: 50 * time.Millisecond})
	ctx := testContext(t)
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 100*solana.LAMPORTS_PER_SOL)
	authority := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	elf := memoELF(t, ctx, client)

	// Deploy: buffer, then create the program account and deploy in one transaction.
	buffer := writeBuffer(t, ctx, v, payer, authority, elf)
	program := solana.NewWallet().PrivateKey
	programData, _, err := solana.FindProgramAddress([][]byte{program.PublicKey().Bytes()}, solana.BPFLoaderUpgradeableProgramID)
	if err != nil {
		t.Fatal(err)
	}
	rent, err := client.GetMinimumBalanceForRentExemption(ctx, programAccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, v, payer, []solana.PrivateKey{program, authority},
		system.NewCreateAccountInstruction(rent, programAccountSize, solana.BPFLoaderUpgradeableProgramID, payer.PublicKey(), program.PublicKey()).Build(),
		loaderIx(loaderDeployWithMaxDataLen, binary.LittleEndian.AppendUint64(nil, uint64(2*len(elf))),
			solana.Meta(payer.PublicKey()).WRITE().SIGNER(), solana.Meta(programData).WRITE(),
			solana.Meta(program.PublicKey()).WRITE(), solana.Meta(buffer).WRITE(),
			solana.Meta(solana.SysVarRentPubkey), solana.Meta(solana.SysVarClockPubkey),
			solana.Meta(solana.SystemProgramID), solana.Meta(authority.PublicKey()).SIGNER()),
	)
	logs, err := invokeMemo(t, ctx, v, payer, program.PublicKey(), "deployed")
	if err != nil || !containsLog(logs, "Program log: deployed") {
		t.Fatalf("invoke deployed program: %q, %v", logs, err)
	}

	// Upgrade from a second buffer; the spill account receives the buffer's lamports.
	buffer2 := writeBuffer(t, ctx, v, payer, authority, elf)
	// As on a real cluster, a program cannot be upgraded or closed in the
	// slot it was deployed or upgraded in.
	nextSlot(t, ctx, client)
	spill := solana.NewWallet().PublicKey()
	send(t, ctx, v, payer, []solana.PrivateKey{authority},
		loaderIx(loaderUpgrade, nil,
			solana.Meta(programData).WRITE(), solana.Meta(program.PublicKey()).WRITE(), solana.Meta(buffer2).WRITE(),
			solana.Meta(spill).WRITE(), solana.Meta(solana.SysVarRentPubkey), solana.Meta(solana.SysVarClockPubkey),
			solana.Meta(authority.PublicKey()).SIGNER()),
	)
	if balance(t, v, spill) == 0 {
		t.Fatal("upgrade did not refund the buffer to the spill account")
	}
	if logs, err := invokeMemo(t, ctx, v, payer, program.PublicKey(), "upgraded"); err != nil || !containsLog(logs, "Program log: upgraded") {
		t.Fatalf("invoke upgraded program: %q, %v", logs, err)
	}

	// Hand the upgrade authority over, then close the program with it.
	newAuthority := localnettest.NewFundedKeypair(t, v, solana.LAMPORTS_PER_SOL)
	send(t, ctx, v, payer, []solana.PrivateKey{authority},
		loaderIx(loaderSetAuthority, nil, solana.Meta(programData).WRITE(),
			solana.Meta(authority.PublicKey()).SIGNER(), solana.Meta(newAuthority.PublicKey())),
	)
	info, err := client.GetAccountInfo(ctx, programData)
	if err != nil {
		t.Fatal(err)
	}
	if meta := info.Value.Data.GetBinary(); len(meta) < programDataMetadataSize || meta[12] != 1 ||
		!solana.PublicKeyFromBytes(meta[13:45]).Equals(newAuthority.PublicKey()) {
		t.Fatalf("programdata authority not updated")
	}
	recipient := solana.NewWallet().PublicKey()
	nextSlot(t, ctx, client)
	send(t, ctx, v, payer, []solana.PrivateKey{newAuthority},
		loaderIx(loaderClose, nil, solana.Meta(programData).WRITE(), solana.Meta(recipient).WRITE(),
			solana.Meta(newAuthority.PublicKey()).SIGNER(), solana.Meta(program.PublicKey()).WRITE()),
	)
	if balance(t, v, recipient) == 0 {
		t.Fatal("close did not pay out the programdata lamports")
	}
	tx := buildTx(t, ctx, client, payer, nil, solana.NewInstruction(program.PublicKey(), nil, []byte("closed")))
	if sim, err := client.SimulateTransaction(ctx, tx); err != nil || sim.Value.Err == nil {
		t.Fatalf("closed program still runs: %+v, %v", sim, err)
	}
}

func TestGenesisPrograms(t *testing.T) {
	// Read the memo ELF from a throwaway server, as a genesis program file.
	probe := localnettest.Start(t, localnet.Options{})
	ctx := testContext(t)
	elf := memoELF(t, ctx, localnettest.Client(probe))
	if err := probe.Stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "memo.so")
	if err := os.WriteFile(path, elf, 0o644); err != nil {
		t.Fatal(err)
	}
	fixed := solana.NewWallet().PublicKey()
	upgradeable := solana.NewWallet().PublicKey()
	authority := solana.NewWallet().PrivateKey

	v := localnettest.Start(t, localnet.Options{
		SlotDuration:        50 * time.Millisecond,
		Programs:            []localnet.Program{{ID: fixed, Path: path}},
		UpgradeablePrograms: []localnet.UpgradeableProgram{{ID: upgradeable, Path: path, Authority: authority.PublicKey()}},
	})
	client := localnettest.Client(v)
	payer := localnettest.NewFundedKeypair(t, v, 10*solana.LAMPORTS_PER_SOL)
	localnettest.Fund(t, v, authority.PublicKey(), solana.LAMPORTS_PER_SOL)
	for _, id := range []solana.PublicKey{fixed, upgradeable} {
		if logs, err := invokeMemo(t, ctx, v, payer, id, "genesis"); err != nil || !containsLog(logs, "Program log: genesis") {
			t.Fatalf("invoke genesis program %s: %q, %v", id, logs, err)
		}
	}
	authorityOf := func(id solana.PublicKey) []byte {
		pd, _, _ := solana.FindProgramAddress([][]byte{id.Bytes()}, solana.BPFLoaderUpgradeableProgramID)
		info, err := client.GetAccountInfo(ctx, pd)
		if err != nil {
			t.Fatalf("programdata of %s: %v", id, err)
		}
		return info.Value.Data.GetBinary()[12:45]
	}
	if a := authorityOf(fixed); a[0] != 0 {
		t.Errorf("--bpf-program has an upgrade authority")
	}
	if a := authorityOf(upgradeable); a[0] != 1 || !solana.PublicKeyFromBytes(a[1:]).Equals(authority.PublicKey()) {
		t.Errorf("--upgradeable-program authority = %x", a)
	}
	// The genesis authority can upgrade its program through the loader.
	buffer := writeBuffer(t, ctx, v, payer, authority, elf)
	pd, _, _ := solana.FindProgramAddress([][]byte{upgradeable.Bytes()}, solana.BPFLoaderUpgradeableProgramID)
	nextSlot(t, ctx, client)
	send(t, ctx, v, payer, []solana.PrivateKey{authority},
		loaderIx(loaderUpgrade, nil,
			solana.Meta(pd).WRITE(), solana.Meta(upgradeable).WRITE(), solana.Meta(buffer).WRITE(),
			solana.Meta(payer.PublicKey()).WRITE(), solana.Meta(solana.SysVarRentPubkey), solana.Meta(solana.SysVarClockPubkey),
			solana.Meta(authority.PublicKey()).SIGNER()),
	)
	if logs, err := invokeMemo(t, ctx, v, payer, upgradeable, "after upgrade"); err != nil || !containsLog(logs, "Program log: after upgrade") {
		t.Fatalf("invoke upgraded genesis program: %q, %v", logs, err)
	}
}

func nextSlot(t *testing.T, ctx context.Context, client *rpc.Client) {
	t.Helper()
	s, err := client.GetSlot(ctx, rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	waitSlot(t, ctx, client, s+1)
}

func containsLog(logs []string, s string) bool {
	for _, l := range logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func TestStartRejectsBadGenesisPrograms(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "text.so")
	badELF := filepath.Join(dir, "bad.so")
	if err := os.WriteFile(notELF, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badELF, append([]byte("\x7fELF"), make([]byte, 200)...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, wantLog string
	}{
		{"missing file", filepath.Join(dir, "missing.so"), "cannot read"},
		{"not an ELF", notELF, "is not an ELF file"},
		{"broken ELF", badELF, "does not load"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log logBuffer
			v, err := localnet.Start(testContext(t), localnet.Options{
				Programs: []localnet.Program{{ID: solana.NewWallet().PublicKey(), Path: tc.path}}, Stderr: &log,
			})
			if err == nil {
				v.Stop()
				t.Fatal("started with a bad genesis program")
			}
			if !log.contains(tc.wantLog) {
				t.Fatalf("log does not say %q:\n%s", tc.wantLog, log.String())
			}
		})
	}
}

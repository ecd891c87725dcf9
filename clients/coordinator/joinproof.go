package coordinator

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"

	"github.com/gagliardetto/solana-go"
)

// join_run must prove that its signer holds the p2p key it registers (the
// program's join_proof.rs): an Ed25519 signature-verify instruction before
// it in the transaction, by the p2p key over JoinMessage. Without the proof
// anyone could register a member's p2p identity first and lock it out.

// Ed25519Program is the runtime's Ed25519 signature-verify precompile.
var Ed25519Program = solana.MustPublicKeyFromBase58("Ed25519SigVerify111111111111111111111111111")

// joinProofDomain starts every join message (the program's JOIN_PROOF_DOMAIN).
const joinProofDomain = "psyche:join_run:v1"

// JoinMessage is what the p2p key signs for user joining the run whose
// account is account, in program.
func JoinMessage(program, account, user solana.PublicKey) []byte {
	m := make([]byte, 0, len(joinProofDomain)+3*32)
	m = append(m, joinProofDomain...)
	m = append(m, program[:]...)
	m = append(m, account[:]...)
	return append(m, user[:]...)
}

// Ed25519Instruction has the runtime verify signature, by key, over
// message, with the key, signature and message inside the instruction's own
// data (as solana-sdk's new_ed25519_instruction lays them out).
func Ed25519Instruction(key [32]byte, signature, message []byte) solana.Instruction {
	const keyAt, sigAt, msgAt, this = 16, 48, 112, 0xffff
	d := make([]byte, 2, msgAt+len(message))
	d[0] = 1 // one signature
	for _, v := range []uint16{sigAt, this, keyAt, this, msgAt, uint16(len(message)), this} {
		d = binary.LittleEndian.AppendUint16(d, v)
	}
	d = append(d, key[:]...)
	d = append(d, signature...)
	d = append(d, message...)
	return solana.NewInstruction(Ed25519Program, solana.AccountMetaSlice{}, d)
}

// JoinRunSigned is join_run with its proof: the Ed25519 instruction the
// program looks for, then the join, to send in one transaction. sign signs
// with the p2p key whose public key is p2pIdentity (an ed25519 signature).
func (r Run) JoinRunSigned(user, authorization solana.PublicKey, p2pIdentity [32]byte, sign func([]byte) ([]byte, error)) ([]solana.Instruction, error) {
	join, err := r.JoinRun(user, authorization, p2pIdentity)
	if err != nil {
		return nil, err
	}
	msg := JoinMessage(r.Program.ID, r.Account, user)
	sig, err := sign(msg)
	if err != nil {
		return nil, fmt.Errorf("signing the join with the p2p key: %w", err)
	}
	if len(sig) != ed25519.SignatureSize || !ed25519.Verify(p2pIdentity[:], msg, sig) {
		return nil, fmt.Errorf("the p2p key's signature does not verify under the p2p identity %x", p2pIdentity)
	}
	return []solana.Instruction{Ed25519Instruction(p2pIdentity, sig, msg), join}, nil
}

// JoinRunProven is JoinRunSigned with an ed25519 private key.
func (r Run) JoinRunProven(user, authorization solana.PublicKey, p2pKey ed25519.PrivateKey) ([]solana.Instruction, error) {
	if len(p2pKey) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("p2p key: %d bytes, want an ed25519 private key of %d", len(p2pKey), ed25519.PrivateKeySize)
	}
	sign := func(m []byte) ([]byte, error) { return ed25519.Sign(p2pKey, m), nil }
	return r.JoinRunSigned(user, authorization, [32]byte(p2pKey.Public().(ed25519.PublicKey)), sign)
}

// instructionsSysvar is passed to join_run, which reads the proof from it.
var instructionsSysvar = solana.SysVarInstructionsPubkey

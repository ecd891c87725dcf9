package chain

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gagliardetto/solana-go"
)

// ProgramError is a named program error, as listed in an IDL.
type ProgramError struct {
	Code    uint32
	Name    string
	Message string
}

// ErrorTable names custom error codes per program.
type ErrorTable interface {
	Lookup(program solana.PublicKey, code uint32) (ProgramError, bool)
}

// ErrorTables is an ErrorTable built from per-program code lists (one per IDL).
type ErrorTables map[solana.PublicKey]map[uint32]ProgramError

// Add registers a program's errors.
func (t ErrorTables) Add(program solana.PublicKey, errs ...ProgramError) {
	m := t[program]
	if m == nil {
		m = make(map[uint32]ProgramError, len(errs))
		t[program] = m
	}
	for _, e := range errs {
		m[e.Code] = e
	}
}

// Lookup finds a program's own error first, then Anchor's framework errors,
// which our programs reuse for common account-check failures.
func (t ErrorTables) Lookup(program solana.PublicKey, code uint32) (ProgramError, bool) {
	if e, ok := t[program][code]; ok {
		return e, true
	}
	e, ok := anchorErrors[code]
	return e, ok
}

// TxError is a transaction that failed in preflight or on chain.
type TxError struct {
	Signature   solana.Signature // zero when preflight rejected it
	Instruction int              // index of the failing instruction, -1 if none
	Program     solana.PublicKey // program that raised the error, zero if unknown
	Kind        string           // the runtime's error kind, e.g. "Custom", "InvalidAccountData", "BlockhashNotFound"
	Code        *uint32          // the custom error code, for Kind == "Custom"
	Name        string           // the program error's name, when known
	Message     string           // its message, when known
	Logs        []string
	Raw         any // the error as the RPC returned it
}

func (e *TxError) Error() string {
	var b strings.Builder
	b.WriteString("transaction failed")
	if e.Instruction >= 0 {
		fmt.Fprintf(&b, " at instruction %d", e.Instruction)
	}
	switch {
	case e.Name != "":
		fmt.Fprintf(&b, ": %s (%d): %s", e.Name, *e.Code, e.Message)
	case e.Code != nil:
		fmt.Fprintf(&b, ": custom program error %d (0x%x)", *e.Code, *e.Code)
	case e.Kind != "":
		fmt.Fprintf(&b, ": %s", e.Kind)
	default:
		raw, _ := json.Marshal(e.Raw)
		fmt.Fprintf(&b, ": %s", raw)
	}
	if !e.Program.IsZero() {
		fmt.Fprintf(&b, " [program %s]", e.Program)
	}
	return b.String()
}

// IsCode reports whether err is a custom program error with the given code.
func IsCode(err error, code uint32) bool {
	te, ok := err.(*TxError)
	return ok && te.Code != nil && *te.Code == code
}

// decode parses the runtime's JSON transaction error. Shapes seen:
// "BlockhashNotFound"; {"InstructionError":[0,"InvalidAccountData"]};
// {"InstructionError":[0,{"Custom":6000}]}; {"InsufficientFundsForRent":{"account_index":0}}.
func (c *Client) decode(raw any, sig solana.Signature, logs []string, tx *solana.Transaction) *TxError {
	te := &TxError{Signature: sig, Instruction: -1, Logs: logs, Raw: raw}
	switch v := raw.(type) {
	case string:
		te.Kind = v
	case map[string]any:
		if ie, ok := v["InstructionError"].([]any); ok && len(ie) == 2 {
			if idx, ok := number(ie[0]); ok {
				te.Instruction = int(idx)
			}
			switch kind := ie[1].(type) {
			case string:
				te.Kind = kind
			case map[string]any:
				for k, val := range kind {
					te.Kind = k
					if n, ok := number(val); ok && k == "Custom" {
						code := uint32(n)
						te.Code = &code
					}
				}
			}
		} else {
			for k := range v {
				te.Kind = k
			}
		}
	}
	te.Program = failingProgram(logs)
	if te.Program.IsZero() && tx != nil && te.Instruction >= 0 && te.Instruction < len(tx.Message.Instructions) {
		if p, err := tx.Message.Program(tx.Message.Instructions[te.Instruction].ProgramIDIndex); err == nil {
			te.Program = p
		}
	}
	if te.Code != nil {
		var table ErrorTable = ErrorTables{}
		if c.Errors != nil {
			table = c.Errors
		}
		if pe, ok := table.Lookup(te.Program, *te.Code); ok {
			te.Name, te.Message = pe.Name, pe.Message
		}
	}
	return te
}

// number reads a JSON number decoded either as float64 or as json.Number
// (solana-go's RPC client decodes with UseNumber).
func number(v any) (uint32, bool) {
	switch n := v.(type) {
	case float64:
		if n >= 0 && n <= math.MaxUint32 && n == float64(uint32(n)) {
			return uint32(n), true
		}
	case json.Number:
		if u, err := strconv.ParseUint(string(n), 10, 32); err == nil {
			return uint32(u), true
		}
	}
	return 0, false
}

// failingProgram returns the program named in the first "Program X failed"
// log line: for an error raised inside a CPI that is the innermost program,
// whose IDL defines the code.
func failingProgram(logs []string) solana.PublicKey {
	for _, l := range logs {
		rest, ok := strings.CutPrefix(l, "Program ")
		if !ok {
			continue
		}
		id, tail, ok := strings.Cut(rest, " ")
		if !ok || !strings.HasPrefix(tail, "failed") {
			continue
		}
		if pk, err := solana.PublicKeyFromBase58(id); err == nil {
			return pk
		}
	}
	return solana.PublicKey{}
}

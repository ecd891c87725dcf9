package chain

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"
)

func TestDecodeTransactionErrors(t *testing.T) {
	prog := solana.MustPublicKeyFromBase58("PsyAUmhpmiUouWsnJdNGFSX8vZ6rWjXjgDPHsgqPGyw")
	inner := solana.MustPublicKeyFromBase58("4SHugWqSXwKE5fqDchkJcPEqnoZE22VYKtSTVm7axbT7")
	tables := ErrorTables{}
	tables.Add(prog, ProgramError{6000, "AuthorizationInactive", "The authorization is not active"})
	c := &Client{Errors: tables}
	cases := []struct {
		name     string
		raw      string
		logs     []string
		wantKind string
		wantCode int64 // -1: none
		wantName string
		wantProg solana.PublicKey
		wantText string
	}{
		{"runtime string", `"BlockhashNotFound"`, nil, "BlockhashNotFound", -1, "", solana.PublicKey{}, "BlockhashNotFound"},
		{"builtin instruction error", `{"InstructionError":[1,"InvalidAccountData"]}`, nil, "InvalidAccountData", -1, "", solana.PublicKey{}, "instruction 1: InvalidAccountData"},
		{"program error named from IDL", `{"InstructionError":[0,{"Custom":6000}]}`,
			[]string{"Program " + prog.String() + " invoke [1]", "Program " + prog.String() + " failed: custom program error: 0x1770"},
			"Custom", 6000, "AuthorizationInactive", prog, "AuthorizationInactive (6000): The authorization is not active"},
		{"anchor framework code", `{"InstructionError":[0,{"Custom":2006}]}`,
			[]string{"Program " + inner.String() + " failed: custom program error: 0x7d6"},
			"Custom", 2006, "ConstraintSeeds", inner, "ConstraintSeeds (2006)"},
		{"innermost failing program wins", `{"InstructionError":[0,{"Custom":6000}]}`,
			[]string{"Program " + inner.String() + " failed: custom program error: 0x1770", "Program " + prog.String() + " failed: custom program error: 0x1770"},
			"Custom", 6000, "", inner, "custom program error 6000 (0x1770)"},
		{"json.Number code", "NUMBER", nil, "Custom", 6000, "", solana.PublicKey{}, "custom program error 6000"},
		{"struct error", `{"InsufficientFundsForRent":{"account_index":0}}`, nil, "InsufficientFundsForRent", -1, "", solana.PublicKey{}, "InsufficientFundsForRent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var raw any
			if tc.raw == "NUMBER" {
				raw = map[string]any{"InstructionError": []any{json.Number("0"), map[string]any{"Custom": json.Number("6000")}}}
			} else if err := json.Unmarshal([]byte(tc.raw), &raw); err != nil {
				t.Fatal(err)
			}
			te := c.decode(raw, solana.Signature{}, tc.logs, nil)
			if te.Kind != tc.wantKind {
				t.Errorf("kind = %q, want %q", te.Kind, tc.wantKind)
			}
			if tc.wantCode < 0 && te.Code != nil || tc.wantCode >= 0 && (te.Code == nil || int64(*te.Code) != tc.wantCode) {
				t.Errorf("code = %v, want %d", te.Code, tc.wantCode)
			}
			if te.Name != tc.wantName {
				t.Errorf("name = %q, want %q", te.Name, tc.wantName)
			}
			if !te.Program.Equals(tc.wantProg) {
				t.Errorf("program = %s, want %s", te.Program, tc.wantProg)
			}
			if !strings.Contains(te.Error(), tc.wantText) {
				t.Errorf("Error() = %q, want it to contain %q", te.Error(), tc.wantText)
			}
			if tc.wantCode >= 0 && !IsCode(te, uint32(tc.wantCode)) {
				t.Errorf("IsCode(%d) = false", tc.wantCode)
			}
		})
	}
}

func TestDefaultWSURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8899":           "ws://127.0.0.1:8900",
		"https://api.devnet.solana.com":   "wss://api.devnet.solana.com",
		"http://localhost:18899/path?x=1": "ws://localhost:18900/path?x=1",
	} {
		u, _ := url.Parse(in)
		if got := DefaultWSURL(u); got != want {
			t.Errorf("DefaultWSURL(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, bad := range [][2]string{{"127.0.0.1:8899", ""}, {"ftp://x", ""}, {"http://x:1", "http://x:2"}} {
		if _, err := New(bad[0], bad[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

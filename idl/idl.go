// Package idl embeds the programs' Anchor IDLs (0.30+ format), the contract
// between the on-chain programs and the Go clients, so that clients name
// program errors from the same file the bindings are generated from.
package idl

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
)

//go:embed psyche_*.json
var files embed.FS

// IDL is the part of an Anchor IDL that the clients read at run time.
type IDL struct {
	Address  string `json:"address"`
	Metadata struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Spec    string `json:"spec"`
	} `json:"metadata"`
	Instructions []Item  `json:"instructions"`
	Accounts     []Item  `json:"accounts"`
	Events       []Item  `json:"events"`
	Errors       []Error `json:"errors"`
}

// Item is a named entry with an 8-byte discriminator.
type Item struct {
	Name          string `json:"name"`
	Discriminator []byte `json:"discriminator"`
}

// UnmarshalJSON reads the discriminator as the JSON number array Anchor writes.
func (it *Item) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name          string `json:"name"`
		Discriminator []int  `json:"discriminator"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	it.Name = raw.Name
	it.Discriminator = make([]byte, len(raw.Discriminator))
	for i, v := range raw.Discriminator {
		if v < 0 || v > 255 {
			return fmt.Errorf("%s: discriminator byte %d out of range", raw.Name, v)
		}
		it.Discriminator[i] = byte(v)
	}
	return nil
}

// Error is a custom program error.
type Error struct {
	Code uint32 `json:"code"`
	Name string `json:"name"`
	Msg  string `json:"msg"`
}

// Names lists the embedded IDLs by program name (e.g. "psyche_authorizer").
func Names() []string {
	paths, _ := fs.Glob(files, "psyche_*.json") // the pattern is valid
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(p, ".json")
	}
	sort.Strings(names)
	return names
}

// Load parses the embedded IDL of a program.
func Load(name string) (*IDL, error) {
	raw, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("no IDL named %q", name)
	}
	var out IDL
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("parse IDL %s: %w", name, err)
	}
	return &out, nil
}

// ProgramID is the program address the IDL declares.
func (d *IDL) ProgramID() (solana.PublicKey, error) {
	pk, err := solana.PublicKeyFromBase58(d.Address)
	if err != nil {
		return solana.PublicKey{}, fmt.Errorf("IDL %s: address %q: %w", d.Metadata.Name, d.Address, err)
	}
	return pk, nil
}

// ErrorTables names the custom errors of every embedded program, keyed by the
// program ids in the IDLs. Programs deployed elsewhere (fresh devnet ids) are
// added with AddProgram.
func ErrorTables() (chain.ErrorTables, error) {
	t := chain.ErrorTables{}
	for _, name := range Names() {
		d, err := Load(name)
		if err != nil {
			return nil, err
		}
		id, err := d.ProgramID()
		if err != nil {
			return nil, err
		}
		d.AddErrors(t, id)
	}
	return t, nil
}

// AddErrors registers this IDL's errors for a program deployed at id.
func (d *IDL) AddErrors(t chain.ErrorTables, id solana.PublicKey) {
	errs := make([]chain.ProgramError, len(d.Errors))
	for i, e := range d.Errors {
		errs[i] = chain.ProgramError{Code: e.Code, Name: e.Name, Message: e.Msg}
	}
	t.Add(id, errs...)
}

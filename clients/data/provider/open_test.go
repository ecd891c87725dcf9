package provider

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParseSources(t *testing.T) {
	tests := []struct {
		json, wantErr string
		want          []Source
	}{
		{`[{"location": "/d", "weight": 2}, {"location": "http://h/", "root": "ab", "weight": 1}]`, "",
			[]Source{{"/d", "", 2}, {"http://h/", "ab", 1}}},
		{`[{"location": "/only"}]`, "", []Source{{"/only", "", 0}}},
		{`[]`, "empty", nil},
		{`[{"location": "/d", "weight": 1}, {"location": "/e"}]`, "needs a positive weight", nil},
		{`[{"weight": 1}]`, "no location", nil},
		{`[{"location": "/d", "wieght": 1}]`, "unknown field", nil},
		{`[{"location": "/d"}] []`, "trailing data", nil},
		{`{"location": "/d"}`, "cannot unmarshal", nil},
	}
	for _, tt := range tests {
		got, err := ParseSources([]byte(tt.json))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSources(%s) error %v, want %q", tt.json, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseSources(%s) = %v, %v; want %v", tt.json, got, err, tt.want)
		}
	}
}

// TestOpenMixesLocalAndHTTPSources opens the same datasets as a local
// directory and through a server, in one mix, and checks it against a mix
// built by hand.
func TestOpenMixesLocalAndHTTPSources(t *testing.T) {
	dirA, dirB := prepared(t, "byte", 32), prepared(t, "byte", 32)
	a, err := OpenLocal(dirA, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := smallDataset(t, 7, 40, 32)
	ts := serve(t, b.d.Dir, nil)
	p, err := Open(context.Background(), []Source{{dirA, a.Info().Root, 2}, {ts.URL, b.Info().Root, 1}}, fastOptions("", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	byHand, _ := NewMix([]Weighted{{a, 2}, {b, 1}})
	if p.Info() != byHand.Info() {
		t.Fatalf("Open gave %+v, by hand %+v", p.Info(), byHand.Info())
	}
	indices := []uint64{0, 1, 2, 3, 4, 5, 200, 31}
	got, err := p.Sequences(context.Background(), indices)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := byHand.Sequences(context.Background(), indices)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatal("opened mix and hand-built mix disagree")
	}
	if _, err := Open(context.Background(), []Source{{dirB, "", 1}, {ts.URL, "", 1}}, fastOptions("", "")); err == nil || !strings.Contains(err.Error(), ts.URL) {
		t.Fatalf("a server source without a root: %v", err)
	}
	if _, err := Open(context.Background(), nil, HTTPOptions{}); err == nil {
		t.Fatal("Open with no sources succeeded")
	}
}

package chain

import (
	"os"
	"regexp"
	"testing"
)

// The SDK's ErrorCode (programs/sdk/src/error.rs) is what our programs return
// for framework failures; this table must name every one of them the same way.
func TestAnchorErrorsMatchSDK(t *testing.T) {
	src, err := os.ReadFile("../../programs/sdk/src/error.rs")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\s+([A-Z][A-Za-z]+) = (\d+),$`).FindAllStringSubmatch(string(src), -1)
	msgs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+([A-Z][A-Za-z]+) => "([^"]*)",$`).FindAllStringSubmatch(string(src), -1) {
		msgs[m[1]] = m[2] // the message() arms come after the name() arms
	}
	if len(codes) < 30 {
		t.Fatalf("found only %d error codes in error.rs; did its format change?", len(codes))
	}
	for _, m := range codes {
		name, code := m[1], m[2]
		var n uint32
		for _, c := range code {
			n = n*10 + uint32(c-'0')
		}
		e, ok := anchorErrors[n]
		if !ok {
			t.Errorf("SDK error %s (%d) is missing from anchorErrors", name, n)
			continue
		}
		if e.Name != name || e.Message != msgs[name] {
			t.Errorf("code %d: Go has %q %q, the SDK %q %q", n, e.Name, e.Message, name, msgs[name])
		}
	}
}

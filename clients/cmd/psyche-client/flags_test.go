package main

import (
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Required flags are checked one way, requireFlags: none is marked with
// urfave/cli's Required, whose error exits 1 and prints the whole help.
func TestNoFlagUsesCLIRequired(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			for _, f := range c.Flags {
				if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
					t.Errorf("%s --%s is marked Required; name it in requireFlags in the command's action instead", name, f.Names()[0])
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", newApp().Commands)
}

// A missing required flag is bad input: exit 2 and one line that names the
// command and every flag missing. Each command checks before anything else,
// so none of these needs a cluster.
func TestMissingRequiredFlags(t *testing.T) {
	for _, env := range []string{"RUN_ID", "AUTHORIZER"} {
		t.Setenv(env, "")
		os.Unsetenv(env)
	}
	for _, tc := range []struct {
		args    []string
		missing []string
	}{
		{[]string{"create-run"}, []string{"run-id"}},
		{[]string{"update-config"}, []string{"config-path", "run-id"}},
		{[]string{"update-config", "--run-id", "r"}, []string{"config-path"}},
		{[]string{"set-paused"}, []string{"run-id"}},
		{[]string{"tick"}, []string{"run-id"}},
		{[]string{"set-future-epoch-rates"}, []string{"run-id"}},
		{[]string{"update-client-version"}, []string{"new-version", "run-id"}},
		{[]string{"checkpoint"}, []string{"repo", "run-id"}},
		{[]string{"close-run"}, []string{"run-id"}},
		{[]string{"json-dump-run"}, []string{"run-id"}},
		{[]string{"json-dump-user"}, []string{"run-id", "address"}},
		{[]string{"can-join"}, []string{"run-id", "authorizer", "address"}},
		{[]string{"mint-to"}, []string{"mint", "amount"}},
		{[]string{"treasurer-create-run"}, []string{"mint", "run-id"}},
		{[]string{"treasurer-update-run"}, []string{"run-id"}},
		{[]string{"treasurer-top-up-rewards"}, []string{"collateral-amount", "run-id"}},
		{[]string{"treasurer-claim-rewards"}, []string{"run-id"}},
		{[]string{"treasurer-withdraw"}, []string{"run-id"}},
		{[]string{"treasurer-json-dump-run"}, []string{"run-id"}},
		{[]string{"treasurer-close-run"}, []string{"run-id"}},
		{[]string{"join-authorization-create"}, []string{"authorizer"}},
		{[]string{"join-authorization-delegate"}, []string{"join-authority"}},
		{[]string{"join-authorization-delete"}, []string{"authorizer"}},
		{[]string{"join-authorization-read"}, []string{"join-authority", "authorizer"}},
		{[]string{"train"}, []string{"run-id"}},
		{[]string{"predownload"}, []string{"run-id"}},
		{[]string{"data", "prepare"}, []string{"out"}},
		{[]string{"data", "serve"}, []string{"dir", "port"}},
		{[]string{"data", "verify"}, []string{"dir"}},
		{[]string{"data", "fetch"}, []string{"indices"}},
		{[]string{"hub", "serve"}, []string{"dir"}},
		{[]string{"hub", "upload", "ckpt.safetensors"}, []string{"repo"}},
		{[]string{"hub", "fetch"}, []string{"repo", "revision", "dir"}},
		{[]string{"program", "upgrade"}, []string{"program-id", "so"}},
		{[]string{"program", "set-authority"}, []string{"program-id"}},
		{[]string{"program", "show"}, []string{"program-id"}},
		{[]string{"program", "close"}, []string{"program-id"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			name := strings.Join(tc.args, " ")
			if i := strings.Index(name, " --"); i >= 0 {
				name = name[:i]
			}
			name = strings.TrimSuffix(name, " ckpt.safetensors")
			verb := " is required"
			if len(tc.missing) > 1 {
				verb = " are required"
			}
			want := "psyche-client: " + name + ": --" + strings.Join(tc.missing, ", --") + verb + "\n"
			if code != exitBadInput || errOut != want {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", code, errOut, exitBadInput, want)
			}
		})
	}
}

// A required flag's environment variable stands for the flag.
func TestRequiredFlagsFromEnvironment(t *testing.T) {
	_, errOut, code := runCLI(t, []string{"RUN_ID=r", "AUTHORIZER=11111111111111111111111111111111"},
		"can-join", "--address", "11111111111111111111111111111111", "--rpc", "http://127.0.0.1:1")
	if code != exitBadInput || strings.Contains(errOut, "required") || !strings.Contains(errOut, "cannot reach the RPC endpoint") {
		t.Errorf("exit %d, stderr %q; want the required flags taken from RUN_ID and AUTHORIZER, then an unreachable endpoint", code, errOut)
	}
}

// Flag mistakes name the flag as it is typed (Go's flag package writes
// -run-idd) and suggest the command's nearest flag when one is close.
func TestFlagMistakesSpelledAsTyped(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"json-dump-run", "--run-idd", "x"}, "unknown flag --run-idd; did you mean --run-id?"},
		{[]string{"data", "prepare", "--outt", "x"}, "unknown flag --outt; did you mean --out?"},
		{[]string{"json-dump-run", "--zzzz"}, "unknown flag --zzzz"},
		{[]string{"balance", "-x"}, "unknown flag -x"},
		{[]string{"json-dump-run", "--rpc"}, "flag --rpc needs a value"},
		{[]string{"train", "--threads", "many"}, `invalid value "many" for flag --threads: parse error`},
	} {
		_, errOut, code := runCLI(t, nil, tc.args...)
		if want := "psyche-client: " + tc.want + "\n"; code != exitBadInput || errOut != want {
			t.Errorf("%v: exit %d, stderr %q; want exit %d, %q", tc.args, code, errOut, exitBadInput, want)
		}
	}
}

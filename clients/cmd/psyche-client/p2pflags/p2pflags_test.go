package p2pflags

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
)

// parse runs a throwaway app with the p2p flags and returns the Config.
func parse(t *testing.T, args ...string) (p2p.Config, error) {
	t.Helper()
	var (
		cfg    p2p.Config
		cfgErr error
	)
	app := &cli.App{
		Name:  "test",
		Flags: Flags(),
		Action: func(c *cli.Context) error {
			cfg, cfgErr = Config(c, "run-1", nil)
			return nil
		},
	}
	if err := app.Run(append([]string{"test"}, args...)); err != nil {
		t.Fatalf("parse flags: %v", err)
	}
	return cfg, cfgErr
}

func TestFlagsBuildConfig(t *testing.T) {
	t.Setenv(identity.EnvSecretKey, "")
	keyPath := filepath.Join(t.TempDir(), "id")
	key, err := identity.Create(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	boot := "/ip4/127.0.0.1/udp/4001/quic-v1/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"
	cfg, err := parse(t, "--"+IdentityPath, keyPath, "--"+BindPort, "4001", "--"+BindInterface, "127.0.0.1",
		"--"+MaxConcurrentDownloads, "2", "--"+MaxConcurrentRequests, "3", "--"+Bootstrap, boot, "--"+PublicDHT+"=false",
		"--"+MaxModelUploadRate, "1048576")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if !cfg.Identity.Equals(key) || cfg.ListenPort != 4001 || cfg.ListenInterface != "127.0.0.1" ||
		cfg.MaxConcurrentDownloads != 2 || cfg.MaxUploadsPerPeer != 3 || cfg.PublicDHT || !cfg.NATTraversal || cfg.RunID != "run-1" ||
		cfg.MaxModelUploadRate != 1<<20 {
		t.Errorf("unexpected config %+v", cfg)
	}
	want, _ := peer.AddrInfoFromString(boot)
	if len(cfg.BootstrapPeers) != 1 || cfg.BootstrapPeers[0].ID != want.ID {
		t.Errorf("bootstrap peers %v", cfg.BootstrapPeers)
	}
	// The default rendezvous directory is the user's own, and the client's
	// to remove; one given (empty: off) is the user's.
	if want := filepath.Join(os.TempDir(), "psyche-p2p-"+strconv.Itoa(os.Getuid())); cfg.RendezvousDir != want || !cfg.RemoveRendezvousDir {
		t.Errorf("rendezvous dir %q (remove %v), want %q", cfg.RendezvousDir, cfg.RemoveRendezvousDir, want)
	}
	for _, dir := range []string{"", "/srv/rendezvous"} {
		if cfg, err := parse(t, "--"+RendezvousDir, dir); err != nil || cfg.RendezvousDir != dir || cfg.RemoveRendezvousDir {
			t.Errorf("--%s %q: dir %q, remove %v, err %v", RendezvousDir, dir, cfg.RendezvousDir, cfg.RemoveRendezvousDir, err)
		}
	}
	// Without a path or the environment variable, the identity is random.
	a, err := parse(t)
	if err != nil || a.Identity == nil {
		t.Fatalf("default identity: %v", err)
	}
	if a.MaxModelUploadRate != 0 {
		t.Errorf("model upload rate %d by default, want 0 (unlimited)", a.MaxModelUploadRate)
	}
}

func TestBadFlagsAreRejected(t *testing.T) {
	t.Setenv(identity.EnvSecretKey, "")
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		{"identity file too short", []string{"--" + IdentityPath, short}},
		{"port out of range", []string{"--" + BindPort, "70000"}},
		{"zero downloads", []string{"--" + MaxConcurrentDownloads, "0"}},
		{"negative requests", []string{"--" + MaxConcurrentRequests, "-1"}},
		{"bootstrap without peer id", []string{"--" + Bootstrap, "/ip4/1.2.3.4/tcp/1"}},
		{"negative model upload rate", []string{"--" + MaxModelUploadRate, "-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse(t, tc.args...); !errors.Is(err, ErrBadFlag) {
				t.Errorf("error %v, want ErrBadFlag", err)
			}
		})
	}
}

// Package p2pflags holds the command-line flags of the p2p layer, so that
// every command that joins a run (train, and tools that act as a client)
// spells them the same way and turns them into a p2p.Config identically.
package p2pflags

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/p2p/identity"
)

// Flag names.
const (
	IdentityPath           = "identity-secret-key-path"
	BindPort               = "bind-p2p-port"
	BindInterface          = "bind-p2p-interface"
	MaxConcurrentDownloads = "max-concurrent-downloads"
	MaxConcurrentRequests  = "max-concurrent-parameter-requests"
	Bootstrap              = "p2p-bootstrap"
	RendezvousDir          = "p2p-rendezvous-dir"
	PublicDHT              = "p2p-public-dht"
	NATTraversal           = "p2p-nat-traversal"
	MDNS                   = "p2p-mdns"
	MaxModelUploadRate     = "p2p-max-model-upload-rate"
)

// ErrBadFlag marks a p2p flag value that cannot be used.
var ErrBadFlag = errors.New("bad p2p flag")

// Flags returns the p2p flags, with their defaults.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: IdentityPath, Usage: "p2p identity: a file of 32 raw bytes (create-static-p2p-identity); default: $" + identity.EnvSecretKey + " (hex), else a random identity"},
		&cli.IntFlag{Name: BindPort, Usage: "TCP and UDP (QUIC) port for p2p; 0 picks free ports"},
		&cli.StringFlag{Name: BindInterface, Usage: "IP address or network interface name to bind for p2p; default: all IPv4 interfaces"},
		&cli.IntFlag{Name: MaxConcurrentDownloads, Value: p2p.DefaultMaxConcurrentDownloads, Usage: "concurrent downloads from any one peer"},
		&cli.IntFlag{Name: MaxConcurrentRequests, Value: p2p.DefaultMaxUploadsPerPeer, Usage: "concurrent blob and model requests served to any one peer"},
		&cli.StringSliceFlag{Name: Bootstrap, Usage: "multiaddr with /p2p/ id of a peer to dial at start (repeatable)"},
		&cli.StringFlag{Name: RendezvousDir, DefaultText: "$TMPDIR/psyche-p2p-$UID, one per user, removed when its last client leaves",
			Usage: "directory where clients on this machine exchange signed address records; empty disables"},
		&cli.BoolFlag{Name: PublicDHT, Value: true, Usage: "find other participants through the public libp2p DHT"},
		&cli.BoolFlag{Name: NATTraversal, Value: true, Usage: "port mapping, relays through other participants and hole punching"},
		&cli.BoolFlag{Name: MDNS, Usage: "find participants on the local network by multicast DNS"},
		&cli.Int64Flag{Name: MaxModelUploadRate, Usage: "cap on the upload rate of model sharing to joiners, in bytes per second; 0 is unlimited"},
	}
}

// Config builds the p2p configuration of a run from the flags in c.
func Config(c *cli.Context, runID string, logger *slog.Logger) (p2p.Config, error) {
	key, err := loadIdentity(c.String(IdentityPath))
	if err != nil {
		return p2p.Config{}, err
	}
	port := c.Int(BindPort)
	if port < 0 || port > 65535 {
		return p2p.Config{}, fmt.Errorf("%w: --%s %d is outside 0..65535", ErrBadFlag, BindPort, port)
	}
	downloads := c.Int(MaxConcurrentDownloads)
	if downloads < 1 {
		return p2p.Config{}, fmt.Errorf("%w: --%s must be at least 1", ErrBadFlag, MaxConcurrentDownloads)
	}
	uploads := c.Int(MaxConcurrentRequests)
	if uploads < 1 {
		return p2p.Config{}, fmt.Errorf("%w: --%s must be at least 1", ErrBadFlag, MaxConcurrentRequests)
	}
	uploadRate := c.Int64(MaxModelUploadRate)
	if uploadRate < 0 {
		return p2p.Config{}, fmt.Errorf("%w: --%s cannot be negative", ErrBadFlag, MaxModelUploadRate)
	}
	var bootstrap []peer.AddrInfo
	for _, s := range c.StringSlice(Bootstrap) {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			return p2p.Config{}, fmt.Errorf("%w: --%s %q: %w", ErrBadFlag, Bootstrap, s, err)
		}
		bootstrap = append(bootstrap, *ai)
	}
	rendezvous, ownRendezvous := c.String(RendezvousDir), false
	if !c.IsSet(RendezvousDir) {
		rendezvous, ownRendezvous = DefaultRendezvousDir(), true
	}
	return p2p.Config{
		RunID:                  runID,
		Identity:               key,
		ListenInterface:        c.String(BindInterface),
		ListenPort:             port,
		BootstrapPeers:         bootstrap,
		RendezvousDir:          rendezvous,
		RemoveRendezvousDir:    ownRendezvous,
		PublicDHT:              c.Bool(PublicDHT),
		NATTraversal:           c.Bool(NATTraversal),
		MDNS:                   c.Bool(MDNS),
		MaxConcurrentDownloads: downloads,
		MaxUploadsPerPeer:      uploads,
		MaxModelUploadRate:     uploadRate,
		Logger:                 logger,
	}, nil
}

// DefaultRendezvousDir is the rendezvous directory when --p2p-rendezvous-dir
// is not given: one per user (a directory shared by all users was left
// behind, owned by whoever came first).
func DefaultRendezvousDir() string {
	return filepath.Join(os.TempDir(), "psyche-p2p-"+strconv.Itoa(os.Getuid()))
}

func loadIdentity(path string) (crypto.PrivKey, error) {
	if path != "" {
		key, err := identity.Load(path)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s: %w", ErrBadFlag, IdentityPath, err)
		}
		return key, nil
	}
	key, ok, err := identity.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadFlag, err)
	}
	if ok {
		return key, nil
	}
	return identity.Generate()
}

package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
)

// The flags that several commands take, defined once so that every command
// spells, defaults and documents them alike. A flag of a single command is
// defined with that command.
//
// No flag uses urfave/cli's Required (that check exits 1 and prints the whole
// help): a command names its required flags in requireFlags, first thing in
// its action, and says "(required)" in their usage.
var (
	// The cluster.
	rpcFlag = &cli.StringFlag{
		Name:    "rpc",
		Usage:   "JSON-RPC endpoint of the cluster",
		Value:   "http://127.0.0.1:8899",
		EnvVars: []string{"RPC"},
	}
	wsRPCFlag = &cli.StringFlag{
		Name:    "ws-rpc",
		Usage:   "PubSub (websocket) endpoint; default: derived from --rpc (port + 1)",
		EnvVars: []string{"WS_RPC"},
	}
	walletFlag = &cli.StringFlag{
		Name:    "wallet-private-key-path",
		Aliases: []string{"w"},
		Usage:   "keypair file (solana-keygen JSON); default: $WALLET_FILE, then ~/.config/solana/id.json",
	}
	insecureKeyfileFlag = &cli.BoolFlag{
		Name:  "allow-insecure-keyfile",
		Usage: "sign with a keypair file that group or others may access (refused otherwise, as ssh refuses such a key)",
	}

	// The programs.
	coordinatorProgramFlag = &cli.StringFlag{
		Name:    "coordinator-program-id",
		Usage:   "address of the Coordinator program (default: the id in idl/psyche_coordinator.json)",
		EnvVars: []string{"COORDINATOR_PROGRAM_ID"},
	}
	authorizerProgramFlag = &cli.StringFlag{
		Name:    "authorizer-program-id",
		Usage:   "address of the Authorizer program (default: the id in idl/psyche_authorizer.json)",
		EnvVars: []string{"AUTHORIZER_PROGRAM_ID"},
	}
	treasurerProgramFlag = &cli.StringFlag{
		Name:    "treasurer-program-id",
		Usage:   "address of the Treasurer program (default: the id in idl/psyche_treasurer.json)",
		EnvVars: []string{"TREASURER_PROGRAM_ID"},
	}
	programIDFlag = &cli.StringFlag{Name: "program-id", Usage: "the program's address (required)"}

	// A run.
	runIDFlag = &cli.StringFlag{
		Name:    "run-id",
		Usage:   "the run's id, 1 to 32 bytes (required)",
		EnvVars: []string{"RUN_ID"},
	}
	runIndexFlag = &cli.StringFlag{
		Name:  "run-index",
		Usage: "the Treasurer run's index (default: the first 8 bytes of sha256(run id), little-endian)",
	}
	mintFlag = &cli.StringFlag{Name: "mint", Usage: "the token mint, SPL Token or Token-2022 (required)"}
	// create-run and treasurer-create-run.
	joinAuthorityFlag  = &cli.StringFlag{Name: "join-authority", Usage: "who grants join authorizations (default: the wallet)"}
	clientVersionFlag  = &cli.StringFlag{Name: "client-version", Usage: "client version joiners must run", Value: "v1"}
	permissionlessFlag = &cli.BoolFlag{Name: "permissionless", Usage: "also let everyone join (an Authorizer grant to 11111111111111111111111111111111; the wallet must be the join authority)"}
	// set-future-epoch-rates and treasurer-update-run.
	earningRateFlag  = &cli.StringFlag{Name: "earning-rate-total-shared", Usage: "points the finishers of an epoch share (in a Treasurer run, 1 point = 1 token base unit)"}
	slashingRateFlag = &cli.StringFlag{Name: "slashing-rate-per-client", Usage: "points a client dropped by a health check loses"}
	spillFlag        = &cli.StringFlag{Name: "spill", Usage: "account that receives the rent (default: the wallet)"}

	// Join authorizations.
	granteeFlag = &cli.StringFlag{
		Name:    "authorizer",
		Usage:   "the grantee: the user's master pubkey, or 11111111111111111111111111111111 for everyone (required)",
		EnvVars: []string{"AUTHORIZER"},
	}
	grantorFlag = &cli.StringFlag{Name: "join-authority", Usage: "the grantor: the run's join authority pubkey (required)"}
	scopeFlag   = &cli.StringFlag{Name: "scope", Usage: "what the authorization allows", Value: string(authorizer.JoinRunScope)}

	// Training data.
	dataCacheDirFlag = &cli.StringFlag{Name: "data-cache-dir", Usage: "keep verified data chunks from a data server here (psyche-client predownload fills it)"}
)

// Groups of shared flags. Each call returns a new slice, which a command may
// append its own flags to.

// clusterFlags choose the cluster a command reads from.
func clusterFlags() []cli.Flag { return []cli.Flag{rpcFlag, wsRPCFlag} }

// signerFlags choose the cluster and the wallet that pays and signs.
func signerFlags() []cli.Flag { return []cli.Flag{rpcFlag, wsRPCFlag, walletFlag, insecureKeyfileFlag} }

// coordinatorReadFlags choose the cluster and the Coordinator program.
func coordinatorReadFlags() []cli.Flag { return []cli.Flag{rpcFlag, wsRPCFlag, coordinatorProgramFlag} }

// coordinatorRunFlags choose a run and the wallet that acts on it.
func coordinatorRunFlags() []cli.Flag {
	return append([]cli.Flag{runIDFlag, walletFlag, insecureKeyfileFlag}, coordinatorReadFlags()...)
}

// treasurerRunFlags choose a Treasurer run and the wallet that acts on it.
func treasurerRunFlags() []cli.Flag {
	return append(treasurerReadFlags(), walletFlag, insecureKeyfileFlag)
}

// treasurerReadFlags choose a Treasurer run and the cluster, for commands that only read.
func treasurerReadFlags() []cli.Flag {
	return []cli.Flag{runIDFlag, runIndexFlag, treasurerProgramFlag, coordinatorProgramFlag, rpcFlag, wsRPCFlag}
}

// createRunFlags are the own flags of create-run and treasurer-create-run.
func createRunFlags() []cli.Flag {
	return []cli.Flag{joinAuthorityFlag, clientVersionFlag, permissionlessFlag, authorizerProgramFlag}
}

// authorizationFlags choose the cluster, the wallet, the Authorizer program
// and the scope of the authorization a command acts on.
func authorizationFlags() []cli.Flag {
	return append(signerFlags(), authorizerProgramFlag, scopeFlag)
}

// requireFlags is the one check of required flags: it fails, as bad input
// (exit code 2), naming those of names that were neither given nor set
// through their environment variable.
func requireFlags(c *cli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, "--"+n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return badInputf("%s: %s is required", commandName(c), missing[0])
	}
	return badInputf("%s: %s are required", commandName(c), strings.Join(missing, ", "))
}

// commandName is the command's name as typed after psyche-client ("data prepare").
func commandName(c *cli.Context) string {
	return strings.TrimPrefix(c.Command.HelpName, c.App.HelpName+" ")
}

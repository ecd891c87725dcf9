package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/competition/miner"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/clients/treasurer"
	"github.com/psyche-go/psyche/idl"
)

// The Competition program's flags, shared by `competition` and `train --competition`.
var (
	competitionProgramFlag = &cli.StringFlag{
		Name:    "competition-program-id",
		Usage:   "address of the Competition program (default: the id in idl/psyche_competition.json)",
		EnvVars: []string{"COMPETITION_PROGRAM_ID"},
	}
	competitionIDFlag = &cli.StringFlag{Name: "id", Usage: "the competition's id, 1 to 32 bytes (required)"}
	// --data of the commands that read the competition's dataset.
	competitionDataFlag = &cli.StringFlag{Name: "data",
		Usage: "a copy of the competition's dataset to read instead of its data location: a directory or a data server URL (the competition's data root still applies)"}
	competitionModelDirFlag = &cli.StringFlag{Name: "model-dir",
		Usage: "directory the entries' model files are downloaded to and kept in (default: psyche/competition/<address> in the user's cache directory)"}
	competitionHubTokenFlag = &cli.StringFlag{Name: "hub-token-file", Usage: "file holding the hub's bearer token for uploads (default: $" + hubTokenEnv + ")"}
)

// competitionReadFlags choose a competition and the cluster, for commands that only read.
func competitionReadFlags() []cli.Flag {
	return []cli.Flag{competitionIDFlag, competitionProgramFlag, rpcFlag, wsRPCFlag}
}

// competitionSignerFlags choose a competition and the wallet that acts on it.
func competitionSignerFlags() []cli.Flag {
	return append(competitionReadFlags(), walletFlag, insecureKeyfileFlag)
}

func competitionCommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "competition",
		Usage: "model competitions (SN9's mechanism): create and administer one, validate it, submit models, claim rewards",
		Description: "A competition pays the miners whose models have the lowest loss on pages of its dataset drawn each round; a newer\n" +
			"model beats an older one only by more than epsilon. Validators evaluate every round and vote a digest of their loss\n" +
			"table; a validator whose vote is not the quorum's loses its stake (programs/competition/SPEC.md). Miners train with\n" +
			"psyche-client train --competition, or submit a model file of their own with competition submit.\n" +
			"Token amounts are base units, or decimal amounts (\"1.5\") converted with the reward mint's decimals.",
		Subcommands: []*cli.Command{
			competitionCreateCommand(),
			competitionUpdateCommand(),
			competitionListCommand(),
			competitionShowCommand(),
			competitionStandingsCommand(),
			competitionJoinCommand(),
			competitionLeaveCommand(),
			competitionSubmitCommand(),
			competitionValidateCommand(),
			competitionCheckCommand(),
			competitionClaimCommand(),
			competitionBurnStakesCommand(),
			competitionWithdrawCommand(),
			competitionCloseCommand(),
		},
	}}
}

// The flags of create and update.
var (
	epsilonFlag = &cli.StringFlag{Name: "epsilon",
		Usage: "the handicap of a newer model: it beats an older one on a page only when its loss is lower by more than this fraction " +
			"(a decimal of at most 6 places, 0 to 1; SN9's is 0.01)"}
	epsilonEndFlag   = &cli.StringFlag{Name: "epsilon-end", Usage: "the epsilon an older model's handicap decays to over --epsilon-decay-slots (at most --epsilon; default: --epsilon)"}
	epsilonDecayFlag = &cli.StringFlag{Name: "epsilon-decay-slots", Usage: "slots over which epsilon decays from --epsilon to --epsilon-end as the older model ages (0, the default: no decay)"}
	pagesFlag        = &cli.StringFlag{Name: "pages-per-round", Usage: "pages of the dataset each round evaluates every model on (1 to 257)"}
	temperatureFlag  = &cli.StringFlag{Name: "temperature", Usage: "the softmax temperature of the weights of the entries' win shares (a decimal of at most 6 places, 0.001 to 100)"}
	roundSlotsFlag   = &cli.StringFlag{Name: "round-slots", Usage: "slots validators have to vote once a round is seeded; then it expires unpaid"}
	quorumFlag       = &cli.StringFlag{Name: "quorum", Usage: "validators whose equal votes make a round final (1 to 32)"}
	rewardFlag       = &cli.StringFlag{Name: "reward-per-round", Usage: "tokens a final round pays the miners, by weight (at most what the pool holds beyond what it owes)"}
	stakeFlag        = &cli.StringFlag{Name: "validator-stake", Usage: "tokens a validator stakes to join; a validator whose vote differs from the quorum's loses it"}
)

func competitionCreateCommand() *cli.Command {
	return &cli.Command{
		Name: "create",
		Usage: "create a competition over a dataset: the wallet pays and is its authority; prints its address, board and reward pool " +
			"(fund the pool with mint-to --to <competition address>)",
		Flags: append([]cli.Flag{
			competitionDataFlagCreate,
			&cli.StringFlag{Name: "data-root", Usage: "the dataset's root in hex (required for a data server URL; checked for a directory)"},
			&cli.StringFlag{Name: "architecture", Usage: "the architecture of every model: gpt2 or llama (required)"},
			&cli.StringFlag{Name: "max-params", Usage: "the most parameters a model may have, padded vocabulary rows included (required)"},
			&cli.StringFlag{Name: "seq-len", Usage: "tokens of each evaluated sequence (default: the dataset's, the only one allowed)"},
			&cli.StringFlag{Name: "precision", Usage: "the numeric contract models are evaluated under: fp32 or mx8", Value: "fp32"},
			&cli.StringFlag{Name: "sequences-per-page", Usage: "sequences of a page of the dataset (required)"},
			withRequired(pagesFlag), withRequired(epsilonFlag), epsilonEndFlag, epsilonDecayFlag, withRequired(temperatureFlag),
			withRequired(roundSlotsFlag), withRequired(quorumFlag),
			&cli.BoolFlag{Name: "permissioned", Usage: "admit only validators the wallet authorizes (join-authorization-create --scope CompetitionValidate)"},
			&cli.StringFlag{Name: "mint", Usage: "the reward mint, SPL Token or Token-2022 (none: the competition pays nothing and takes no stakes)"},
			rewardFlag, stakeFlag, dataCacheDirFlag,
		}, competitionSignerFlags()...),
		Action: competitionCreate,
	}
}

// competitionDataFlagCreate is create's --data: the dataset itself.
var competitionDataFlagCreate = &cli.StringFlag{Name: "data",
	Usage: "the dataset: a directory (its absolute path is published) or a data server URL every validator can read (required)"}

// withRequired is a copy of a shared flag whose usage says it is required.
func withRequired(f *cli.StringFlag) cli.Flag {
	g := *f
	g.Usage += " (required)"
	return &g
}

// The program's bounds (programs/competition/SPEC.md, competition_create).
const (
	maxEpsilonPPM     = 1_000_000
	minTemperaturePPM = 1_000
	maxTemperaturePPM = 100_000_000
	maxPagesPerRound  = 257
	maxQuorum         = competition.MaxValidators
)

func competitionCreate(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name, "data", "architecture", "max-params", "sequences-per-page",
		pagesFlag.Name, epsilonFlag.Name, temperatureFlag.Name, roundSlotsFlag.Name, quorumFlag.Name); err != nil {
		return err
	}
	id, err := competitionID(c)
	if err != nil {
		return err
	}
	params := competition.CreateParams{Id: id, Permissioned: c.Bool("permissioned")}
	if params.EpsilonDecaySlots, err = uintFlag(c, epsilonDecayFlag.Name, 0, math.MaxUint64); err != nil {
		return err
	}
	switch a := c.String("architecture"); a {
	case trainer.ArchGPT2:
		params.Architecture = evaluate.ArchGPT2Tag
	case trainer.ArchLlama:
		params.Architecture = evaluate.ArchLlamaTag
	default:
		return badInputf("--architecture %q: gpt2 or llama", a)
	}
	switch p := c.String("precision"); p {
	case trainer.ArithFP32:
		params.Precision = evaluate.PrecisionFP32Tag
	case trainer.ArithMX8:
		params.Precision = evaluate.PrecisionMX8Tag
	default:
		return badInputf("--precision %q: fp32 or mx8", p)
	}
	if params.MaxParams, err = uintFlag(c, "max-params", 1, math.MaxUint64); err != nil {
		return err
	}
	spp, err := uintFlag(c, "sequences-per-page", 1, math.MaxUint32)
	if err != nil {
		return err
	}
	params.SequencesPerPage = uint32(spp)
	seqLen, err := uintFlag(c, "seq-len", 1, 65536)
	if err != nil {
		return err
	}
	if params.PagesPerRound, err = pagesPerRound(c); err != nil {
		return err
	}
	if params.EpsilonStartPpm, err = epsilonPPM(c, epsilonFlag.Name); err != nil {
		return err
	}
	params.EpsilonEndPpm = params.EpsilonStartPpm
	if c.IsSet(epsilonEndFlag.Name) {
		if params.EpsilonEndPpm, err = epsilonPPM(c, epsilonEndFlag.Name); err != nil {
			return err
		}
	}
	if err := checkEpsilons(params.EpsilonStartPpm, params.EpsilonEndPpm); err != nil {
		return err
	}
	if params.TemperaturePpm, err = temperaturePPM(c); err != nil {
		return err
	}
	if params.RoundSlots, err = roundSlots(c); err != nil {
		return err
	}
	if params.Quorum, err = quorum(c); err != nil {
		return err
	}
	var mint solana.PublicKey
	if s := c.String("mint"); s != "" {
		if mint, err = parsePubkey("--mint", s); err != nil {
			return err
		}
	} else if c.IsSet(rewardFlag.Name) || c.IsSet(stakeFlag.Name) {
		return badInputf("--%s and --%s need a reward pool: give --mint", rewardFlag.Name, stakeFlag.Name)
	}
	loc, root := c.String("data"), c.String("data-root")
	remote := strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://")
	if root != "" {
		if b, err := hex.DecodeString(root); err != nil || len(b) != 32 {
			return badInputf("--data-root %q is not 64 hex digits", root)
		}
	}
	if remote && root == "" {
		return badInputf("--data %s is a data server: give its root with --data-root (psyche-client data info prints it)", loc)
	}
	if !remote {
		if loc, err = filepath.Abs(loc); err != nil {
			return badInputf("--data: %w", err)
		}
	}
	if len(loc) > competition.MaxRepoLen {
		return badInputf("--data %s is %d bytes; a data location holds at most %d", loc, len(loc), competition.MaxRepoLen)
	}
	params.DataLocation = loc

	cc, err := newCompetitionCtx(c)
	if err != nil {
		return err
	}
	tokenProgram := solana.PublicKey{}
	if !mint.IsZero() {
		info, err := treasurer.FetchMint(c.Context, cc.client, mint)
		if err != nil {
			return badInputf("--mint %s: %w", mint, err)
		}
		if err := info.CheckCollateral(); err != nil {
			return badInputf("--mint %s: %v (a competition's pool takes what a Treasurer run takes: programs/treasurer/README.md)", mint, err)
		}
		tokenProgram = info.TokenProgram
		if c.IsSet(rewardFlag.Name) {
			if params.RewardPerRound, err = parseAmount("--"+rewardFlag.Name, c.String(rewardFlag.Name), info.Decimals); err != nil {
				return err
			}
		}
		if c.IsSet(stakeFlag.Name) {
			if params.ValidatorStake, err = parseAmount("--"+stakeFlag.Name, c.String(stakeFlag.Name), info.Decimals); err != nil {
				return err
			}
		}
	}

	// The dataset pins the competition's data root, tokenizer and sequences.
	data, err := provider.Open(c.Context, []provider.Source{{Location: loc, Root: root}}, provider.HTTPOptions{CacheDir: c.String(dataCacheDirFlag.Name)})
	if err != nil {
		return badInputf("--data: %w", err)
	}
	info := data.Info()
	data.Close()
	if root != "" && info.Root != root {
		return badInputf("--data %s has root %s, not --data-root %s", loc, info.Root, root)
	}
	if _, err := hex.Decode(params.DataRoot[:], []byte(info.Root)); err != nil || len(info.Root) != 64 {
		return fmt.Errorf("the dataset's root %q is not 64 hex digits", info.Root)
	}
	params.SeqLen = info.SeqLen
	if c.IsSet("seq-len") && seqLen != uint64(info.SeqLen) {
		return badInputf("--seq-len %d: the dataset's sequences are %d tokens, and a competition evaluates its dataset's sequences whole", seqLen, info.SeqLen)
	}
	params.TokenizerHash = competition.TokenizerHash(info.Tokenizer)
	if have := info.NumSequences / uint64(spp); have < uint64(params.PagesPerRound) {
		return badInputf("--%s %d: the dataset holds %d whole pages of %d sequences", pagesFlag.Name, params.PagesPerRound, have, spp)
	}

	me := cc.wallet.PublicKey()
	board := solana.NewWallet().PrivateKey
	ixs, k, err := cc.program.Create(c.Context, cc.client, me, me, board.PublicKey(), mint, tokenProgram, params)
	if err != nil {
		return err
	}
	sig, err := cc.client.Send(c.Context, cc.wallet, ixs, board)
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "competition %q: %s\nboard: %s\n", id, k.Address, k.Board)
	if k.HasPool() {
		fmt.Fprintf(w, "pool: %s (mint %s; fund it with psyche-client mint-to --mint %s --to %s)\n", k.Pool, k.Mint, k.Mint, k.Address)
	}
	fmt.Fprintf(w, "data: %s (root %s, tokenizer %s, %d sequences of %d tokens)\nsignature: %s\n", loc, info.Root, info.Tokenizer, info.NumSequences, info.SeqLen, sig)
	return nil
}

func competitionUpdateCommand() *cli.Command {
	return &cli.Command{
		Name:  "update",
		Usage: "as the competition's authority, change its rules (the dataset and the models' constraints never change), or pause and resume it",
		Flags: append([]cli.Flag{epsilonFlag, epsilonEndFlag, epsilonDecayFlag, pagesFlag, temperatureFlag, roundSlotsFlag, rewardFlag, stakeFlag, quorumFlag,
			&cli.BoolFlag{Name: "pause", Usage: "open no more rounds and take no submissions (a round being evaluated still finishes)"},
			&cli.BoolFlag{Name: "resume", Usage: "resume a paused competition"},
		}, competitionSignerFlags()...),
		Action: competitionUpdate,
	}
}

func competitionUpdate(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	if _, err := competitionID(c); err != nil {
		return err
	}
	if c.Bool("pause") && c.Bool("resume") {
		return badInputf("--pause and --resume exclude each other")
	}
	var u competition.UpdateParams
	if c.IsSet(epsilonFlag.Name) {
		v, err := epsilonPPM(c, epsilonFlag.Name)
		if err != nil {
			return err
		}
		u.EpsilonStartPpm = &v
	}
	if c.IsSet(epsilonEndFlag.Name) {
		v, err := epsilonPPM(c, epsilonEndFlag.Name)
		if err != nil {
			return err
		}
		u.EpsilonEndPpm = &v
	}
	if c.IsSet(epsilonDecayFlag.Name) {
		v, err := uintFlag(c, epsilonDecayFlag.Name, 0, math.MaxUint64)
		if err != nil {
			return err
		}
		u.EpsilonDecaySlots = &v
	}
	if c.IsSet(pagesFlag.Name) {
		v, err := pagesPerRound(c)
		if err != nil {
			return err
		}
		u.PagesPerRound = &v
	}
	if c.IsSet(temperatureFlag.Name) {
		v, err := temperaturePPM(c)
		if err != nil {
			return err
		}
		u.TemperaturePpm = &v
	}
	if c.IsSet(roundSlotsFlag.Name) {
		v, err := roundSlots(c)
		if err != nil {
			return err
		}
		u.RoundSlots = &v
	}
	if c.IsSet(quorumFlag.Name) {
		v, err := quorum(c)
		if err != nil {
			return err
		}
		u.Quorum = &v
	}
	if c.Bool("pause") || c.Bool("resume") {
		paused := c.Bool("pause")
		u.Paused = &paused
	}
	amounts := c.IsSet(rewardFlag.Name) || c.IsSet(stakeFlag.Name)
	if u == (competition.UpdateParams{}) && !amounts {
		return badInputf("nothing to change: give a rule (--epsilon, --pages-per-round, --temperature, ...), an amount, --pause or --resume")
	}
	cc, k, acc, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	// The program's rule (InvalidEpsilon) on the rules as they will stand.
	start, end := acc.EpsilonStartPpm, acc.EpsilonEndPpm
	if u.EpsilonStartPpm != nil {
		start = *u.EpsilonStartPpm
	}
	if u.EpsilonEndPpm != nil {
		end = *u.EpsilonEndPpm
	}
	if end > start {
		return badInputf("epsilon_end %s would exceed epsilon_start %s: give --%s and --%s together", ppmString(end), ppmString(start), epsilonFlag.Name, epsilonEndFlag.Name)
	}
	if amounts {
		if !k.HasPool() {
			return badInputf("competition %q has no reward pool: --%s and --%s do not apply", k.ID, rewardFlag.Name, stakeFlag.Name)
		}
		info, err := treasurer.FetchMint(c.Context, cc.client, k.Mint)
		if err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			dst  **uint64
		}{{rewardFlag.Name, &u.RewardPerRound}, {stakeFlag.Name, &u.ValidatorStake}} {
			if c.IsSet(f.name) {
				v, err := parseAmount("--"+f.name, c.String(f.name), info.Decimals)
				if err != nil {
					return err
				}
				*f.dst = &v
			}
		}
	}
	ix, err := k.Update(cc.wallet.PublicKey(), u)
	if err != nil {
		return err
	}
	return cc.send(c, []solana.Instruction{ix}, fmt.Sprintf("competition %q updated", k.ID))
}

func competitionListCommand() *cli.Command {
	return &cli.Command{
		Name:   "list",
		Usage:  "print every competition of the program as JSON: id, address, round, phase, entries, active validators",
		Flags:  []cli.Flag{competitionProgramFlag, rpcFlag, wsRPCFlag},
		Action: competitionList,
	}
}

type competitionListed struct {
	ID         string `json:"id"`
	Address    string `json:"address"`
	Round      uint64 `json:"round"`
	Phase      string `json:"phase"`
	Entries    int    `json:"entries"`
	Validators int    `json:"validators"`
	Paused     bool   `json:"paused"`
	Closed     bool   `json:"closed"`
}

func competitionList(c *cli.Context) error {
	if c.Args().Present() {
		return badInputf("%s takes no arguments, got %q", commandName(c), c.Args().Slice())
	}
	cc, err := newCompetitionReadCtx(c)
	if err != nil {
		return err
	}
	all, err := cc.program.List(c.Context, cc.client)
	if err != nil {
		return err
	}
	out := []competitionListed{}
	for _, k := range all {
		acc, err := k.Account(c.Context, cc.client)
		if err != nil {
			return err
		}
		l := competitionListed{ID: k.ID, Address: k.Address.String(), Paused: acc.Paused, Closed: acc.Closed, Phase: "closed"}
		if !acc.Closed {
			b, err := k.ReadBoard(c.Context, cc.client)
			if err != nil {
				return err
			}
			l.Round, l.Phase, l.Entries = b.Round.Number, competition.Phase(b.Round.State).String(), int(b.SubmissionCount)
			for i := range int(b.ValidatorCount) {
				if b.Validators[i].Status == competition.ValidatorActive {
					l.Validators++
				}
			}
		}
		out = append(out, l)
	}
	return printJSON(c, out)
}

func competitionShowCommand() *cli.Command {
	return &cli.Command{
		Name: "show",
		Usage: "print a competition as JSON: its rules, reward pool (what it owes and what is withdrawable), round and votes, " +
			"entries (wins, weight, earned, claimable, model) and validators",
		Flags:  competitionReadFlags(),
		Action: competitionShow,
	}
}

func competitionShow(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, acc, err := openCompetition(c, newCompetitionReadCtx)
	if err != nil {
		return err
	}
	if acc.Closed {
		// Its board is gone; what is left is the pool the authority withdraws.
		out := map[string]any{"id": acc.Id, "address": k.Address.String(), "authority": acc.Authority.String(), "closed": true,
			"total_paid": acc.TotalPaid, "total_burned": acc.TotalBurned}
		if k.HasPool() {
			balance, withdrawable, err := k.PoolBalance(c.Context, cc.client, acc)
			if err != nil {
				return err
			}
			out["pool"] = map[string]any{"mint": k.Mint.String(), "account": k.Pool.String(), "balance": balance, "withdrawable": withdrawable}
		}
		return printJSON(c, out)
	}
	s, err := k.Summarize(c.Context, cc.client)
	if err != nil {
		return err
	}
	return printJSON(c, s)
}

func competitionStandingsCommand() *cli.Command {
	return &cli.Command{
		Name: "standings",
		Usage: "print a competition's round and its entries as a table: wins and weight in the last final round, " +
			"earned and claimed (show has everything, as JSON)",
		Flags:  competitionReadFlags(),
		Action: competitionStandings,
	}
}

func competitionStandings(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, acc, err := openCompetition(c, newCompetitionReadCtx)
	if err != nil {
		return err
	}
	if acc.Closed {
		return badInputf("competition %q is closed: its board is gone (show prints what is left)", acc.Id)
	}
	s, err := k.Summarize(c.Context, cc.client)
	if err != nil {
		return err
	}
	w := c.App.Writer
	r := s.Round
	fmt.Fprintf(w, "competition %s: round %d %s (%d entries eligible, %d votes of a quorum of %d)", s.ID, r.Number, r.Phase, len(r.Eligible), len(r.Votes), r.Quorum)
	if s.Pool != nil {
		fmt.Fprintf(w, "; pool %d, owed %d, paid %d in all", s.Pool.Balance, s.Pool.Unclaimed, s.Pool.TotalPaid)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%5s  %-12s %10s %-9s %6s %8s %12s %12s\n", "entry", "miner", "slot", "status", "wins", "weight", "earned", "claimed")
	for _, e := range s.Entries {
		status := "active"
		if e.Excluded {
			status = "excluded"
		}
		fmt.Fprintf(w, "%5d  %-12s %10d %-9s %6d %8.4f %12d %12d\n", e.Index, short(e.Miner), e.Slot, status, e.Wins, e.Weight, e.Earned, e.Claimed)
	}
	for _, v := range s.Validators {
		fmt.Fprintf(w, "validator %s: %s, stake %d, %d votes, %d faults\n", short(v.Key), v.Status, v.Stake, v.Votes, v.Faults)
	}
	return nil
}

// short is a key's first and last four characters.
func short(key string) string {
	if len(key) <= 12 {
		return key
	}
	return key[:4] + "…" + key[len(key)-4:]
}

func competitionJoinCommand() *cli.Command {
	return &cli.Command{
		Name: "join",
		Usage: "join a competition as a validator, staking its validator stake from the wallet's associated token account " +
			"(a permissioned competition admits the holders of its authority's CompetitionValidate authorization)",
		Flags:  append(competitionSignerFlags(), authorizerProgramFlag),
		Action: competitionJoin,
	}
}

func competitionJoin(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, acc, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	return joinCompetition(c.Context, c.App.Writer, cc, k, acc)
}

// joinCompetition makes the wallet an active validator of k, saying in one
// line why it cannot before sending anything.
func joinCompetition(ctx context.Context, w io.Writer, cc *competitionCtx, k competition.Competition, acc *competition.Account) error {
	me := cc.wallet.PublicKey()
	if acc.Closed {
		return fmt.Errorf("competition %q is closed", k.ID)
	}
	b, err := k.ReadBoard(ctx, cc.client)
	if err != nil {
		return err
	}
	if i := validatorIndex(b, me); i >= 0 {
		switch b.Validators[i].Status {
		case competition.ValidatorActive:
			return fmt.Errorf("%s is an active validator of competition %q already", me, k.ID)
		case competition.ValidatorFaulted:
			return fmt.Errorf("%s voted against a final result of competition %q: it can never validate it again", me, k.ID)
		}
	}
	if acc.Permissioned {
		addr, err := k.Authorization(acc.Authority, me)
		if err != nil {
			return err
		}
		a, err := k.Program.Authorizer.Fetch(ctx, cc.client, addr)
		if err != nil && !errors.Is(err, chain.ErrAccountNotFound) {
			return err
		}
		if a == nil || !authorizer.IsValidFor(a, acc.Authority, me, competition.ValidateScope) {
			return fmt.Errorf("competition %q is permissioned and %s holds no active authorization %s to validate it: its authority %s grants one with "+
				"psyche-client join-authorization-create --scope %s --authorizer %s", k.ID, me, addr, acc.Authority, competition.ValidateScope, me)
		}
	}
	if acc.ValidatorStake > 0 {
		ata, err := treasurer.AssociatedTokenAddress(me, k.Mint, k.TokenProgram)
		if err != nil {
			return err
		}
		held := uint64(0)
		if ta, err := treasurer.FetchTokenAccount(ctx, cc.client, ata); err == nil {
			held = ta.Amount
		} else if !errors.Is(err, chain.ErrAccountNotFound) {
			return err
		}
		if held < acc.ValidatorStake {
			return fmt.Errorf("joining competition %q stakes %d base units of %s; %s's token account %s holds %d", k.ID, acc.ValidatorStake, k.Mint, me, ata, held)
		}
	}
	ix, err := k.JoinValidator(me, acc.Authority, acc)
	if err != nil {
		return err
	}
	sig, err := cc.client.Send(ctx, cc.wallet, []solana.Instruction{ix})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s validates competition %q (stake %d base units)\nsignature: %s\n", me, k.ID, acc.ValidatorStake, sig)
	return nil
}

// validatorIndex is key's slot on the board, -1 when it has none.
func validatorIndex(b *competition.Board, key solana.PublicKey) int {
	for i := range int(b.ValidatorCount) {
		if b.Validators[i].Key.Equals(key) {
			return i
		}
	}
	return -1
}

func competitionLeaveCommand() *cli.Command {
	return &cli.Command{
		Name:   "leave",
		Usage:  "stop validating a competition and take the stake back (not while the wallet's vote is in a round still being evaluated)",
		Flags:  competitionSignerFlags(),
		Action: competitionLeave,
	}
}

func competitionLeave(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, _, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	me := cc.wallet.PublicKey()
	b, err := k.ReadBoard(c.Context, cc.client)
	if err != nil {
		return err
	}
	i := validatorIndex(b, me)
	if i < 0 || b.Validators[i].Status != competition.ValidatorActive {
		return fmt.Errorf("%s is not an active validator of competition %q", me, k.ID)
	}
	stake := b.Validators[i].Stake
	ix, err := k.LeaveValidator(me, stake)
	if err != nil {
		return err
	}
	return cc.send(c, []solana.Instruction{ix}, fmt.Sprintf("%s left competition %q; %d base units of stake returned", me, k.ID, stake))
}

func competitionSubmitCommand() *cli.Command {
	return &cli.Command{
		Name: "submit",
		Usage: "submit a model file (trainer.SaveModel's parameters-only safetensors, as model import and train --competition write): " +
			"it is checked as validators check it, uploaded to the hub repo and committed as the wallet's entry",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "the model file (required)"},
			&cli.StringFlag{Name: "hub-repo", Usage: "the hub repo validators download it from: a base URL such as http://host:9100/comp, or file:///DIR (required)"},
			competitionHubTokenFlag, competitionDataFlag, dataCacheDirFlag,
		}, competitionSignerFlags()...),
		Action: competitionSubmit,
	}
}

func competitionSubmit(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name, "model", "hub-repo"); err != nil {
		return err
	}
	repo, err := competitionRepo(c)
	if err != nil {
		return err
	}
	token, err := hubToken(c, competitionHubTokenFlag.Name)
	if err != nil {
		return err
	}
	path := c.String("model")
	if _, err := os.Stat(path); err != nil {
		return badInputf("--model: %w", err)
	}
	cc, k, acc, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	if err := submissionsOpen(k, acc); err != nil {
		return err
	}
	data, cons, err := competitionData(c, acc, competitionDataFlag.Name)
	if err != nil {
		return err
	}
	data.Close()
	params, err := checkModel(path, cc.wallet.PublicKey(), cons)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	s, err := commitModel(c.Context, cc, k, path, params, repo, token, log)
	if err != nil {
		return err
	}
	s.print(c.App.Writer)
	return nil
}

// competitionRepo is --hub-repo, checked: a repo the hub accepts, short
// enough for the Submission account.
func competitionRepo(c *cli.Context) (string, error) {
	repo := c.String("hub-repo")
	if _, err := hub.ParseRepo(repo); err != nil {
		return "", badInputf("--hub-repo: %w", err)
	}
	if len(repo) > competition.MaxRepoLen {
		return "", badInputf("--hub-repo is %d bytes; a submission's repo holds at most %d", len(repo), competition.MaxRepoLen)
	}
	return repo, nil
}

// submissionsOpen refuses, before anything is uploaded, what the program
// would refuse a commit for.
func submissionsOpen(k competition.Competition, acc *competition.Account) error {
	switch {
	case acc.Closed:
		return fmt.Errorf("competition %q is closed", k.ID)
	case acc.Paused:
		return fmt.Errorf("competition %q is paused: it takes no submissions until its authority resumes it", k.ID)
	}
	return nil
}

// checkModel loads the model file at path as a validator will
// (evaluate.Check), declaring the parameter count of its trainer, and
// returns that count. A file that does not fit is bad input.
func checkModel(path string, minerKey solana.PublicKey, cons evaluate.Constraints) (uint64, error) {
	tr, err := trainer.LoadCheckpoint(path)
	if err != nil {
		return 0, badInputf("--model %s: %w", path, asBadModel(err))
	}
	params := uint64(tr.NumParams())
	tr.Close()
	if err := evaluate.Check(path, evaluate.Submission{Miner: minerKey, Params: params}, cons); err != nil {
		if _, ok := evaluate.AsInvalid(err); ok {
			return 0, badInputf("--model %s does not fit the competition: %w", path, err)
		}
		return 0, err
	}
	return params, nil
}

// submitted is a committed model.
type submitted struct {
	Revision   string
	Commitment [32]byte
	Slot       uint64
	Signature  solana.Signature
}

func (s submitted) print(w io.Writer) {
	fmt.Fprintf(w, "revision: %s\ncommitment: %x\nslot: %d\nsignature: %s\n", s.Revision, s.Commitment, s.Slot, s.Signature)
}

// commitModel uploads the model file at path, checked already, to repo and
// commits it as the wallet's submission: what `competition submit` and
// `train --competition` do.
func commitModel(ctx context.Context, cc *competitionCtx, k competition.Competition, path string, params uint64, repo, token string, log *slog.Logger) (submitted, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return submitted{}, err
	}
	rev, err := hub.Upload(ctx, repo, path, hub.UploadOptions{Token: token, Log: log})
	if err != nil {
		return submitted{}, fmt.Errorf("uploading %s to %s: %w", path, repo, err)
	}
	var revision [32]byte
	if b, err := hex.DecodeString(rev); err != nil || len(b) != 32 {
		return submitted{}, fmt.Errorf("the hub named the file %q, not a revision", rev)
	} else {
		copy(revision[:], b)
	}
	if revision != sha256.Sum256(raw) {
		return submitted{}, fmt.Errorf("%s changed while it was uploaded", path)
	}
	me := cc.wallet.PublicKey()
	s := submitted{Revision: rev, Commitment: evaluate.Commitment(raw, me)}
	ix, err := k.Commit(me, competition.CommitParams{Commitment: s.Commitment, Revision: revision, Params: params, Repo: repo})
	if err != nil {
		return submitted{}, err
	}
	if s.Signature, err = cc.client.Send(ctx, cc.wallet, []solana.Instruction{ix}); err != nil {
		return submitted{}, err
	}
	sub, err := k.ReadSubmission(ctx, cc.client, me)
	if err != nil {
		return submitted{}, err
	}
	if sub != nil {
		s.Slot = sub.Current.Slot
	}
	return s, nil
}

func competitionValidateCommand() *cli.Command {
	return &cli.Command{
		Name: "validate",
		Usage: "be a validator of a competition until Ctrl-C: tick its rounds forward, evaluate every model of each round on its pages " +
			"and vote the loss table's digest (exits 1 once the wallet is not, or no longer, one of its validators)",
		Flags: append([]cli.Flag{competitionDataFlag, competitionModelDirFlag, dataCacheDirFlag,
			&cli.IntFlag{Name: "threads", Usage: "trainer threads of the evaluation (0: all cores; results do not depend on it)"},
			&cli.IntFlag{Name: "poll-ms", Usage: "milliseconds between reads of the chain when there is nothing to do", Value: 500},
			&cli.BoolFlag{Name: "join", Usage: "join the competition first when the wallet is not one of its active validators"},
			authorizerProgramFlag,
		}, competitionSignerFlags()...),
		Action: competitionValidate,
	}
}

func competitionValidate(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	threads, err := nonNegative(c, "threads")
	if err != nil {
		return err
	}
	if c.Int("poll-ms") < 1 {
		return badInputf("--poll-ms must be at least 1")
	}
	cc, k, acc, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	if acc.Closed {
		return fmt.Errorf("competition %q is closed: there is nothing to validate", k.ID)
	}
	data, cons, err := competitionData(c, acc, competitionDataFlag.Name)
	if err != nil {
		return err
	}
	defer data.Close()
	dir, err := competitionModelDir(c, k)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	me := cc.wallet.PublicKey()
	if c.Bool("join") {
		b, err := k.ReadBoard(ctx, cc.client)
		if err != nil {
			return err
		}
		if i := validatorIndex(b, me); i < 0 || b.Validators[i].Status != competition.ValidatorActive {
			if err := joinCompetition(ctx, c.App.Writer, cc, k, acc); err != nil {
				return err
			}
		}
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)).With("competition", k.ID)
	v := &competition.Validator{Chain: cc.client, Competition: k, Key: cc.wallet, Data: data, Dir: dir, Constraints: cons,
		Options: evaluate.Options{Fetch: hub.FetchOptions{Log: log}, Table: evaluate.TableOptions{Threads: threads}},
		Poll:    time.Duration(c.Int("poll-ms")) * time.Millisecond, Log: log}
	log.Info("validating", "validator", me, "models", dir, "data", data.Info().Root)
	err = v.Run(ctx)
	switch {
	case errors.Is(err, competition.ErrNotValidator):
		return fmt.Errorf("%s is not an active validator of competition %q (it never joined, left or was faulted, or the competition is closed): "+
			"join with psyche-client competition join --id %s", me, k.ID, k.ID)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		log.Info("stopped")
		return nil
	case err != nil:
		// Closing the competition deletes its board under the loop.
		if acc, aerr := k.Account(c.Context, cc.client); aerr == nil && acc.Closed {
			return fmt.Errorf("competition %q was closed: there is nothing more to validate", k.ID)
		}
	}
	return err
}

func competitionCheckCommand() *cli.Command {
	return &cli.Command{
		Name: "check",
		Usage: "rerun the evaluation of the board's current round and compare every vote with it: each validator, its digest and MATCH or DIFFERS, " +
			"the table hash, the wins of each entry, and who is (or would be) faulted; reads only",
		Flags:  append([]cli.Flag{competitionDataFlag, competitionModelDirFlag, dataCacheDirFlag}, competitionReadFlags()...),
		Action: competitionCheck,
	}
}

func competitionCheck(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, acc, err := openCompetition(c, newCompetitionReadCtx)
	if err != nil {
		return err
	}
	if acc.Closed {
		return fmt.Errorf("competition %q is closed: it has no round to check", k.ID)
	}
	b, err := k.ReadBoard(c.Context, cc.client)
	if err != nil {
		return err
	}
	r := b.Round
	if ph := competition.Phase(r.State); ph != competition.PhaseEvaluating && ph != competition.PhaseFinal {
		return fmt.Errorf("competition %q's round %d is %v: only a seeded round (evaluating or final) can be checked", k.ID, r.Number, ph)
	}
	data, cons, err := competitionData(c, acc, competitionDataFlag.Name)
	if err != nil {
		return err
	}
	defer data.Close()
	dir, err := competitionModelDir(c, k)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ev, err := k.EvaluateRound(c.Context, cc.client, acc, b, data, dir, cons, evaluate.Options{Fetch: hub.FetchOptions{Log: log}})
	if err != nil {
		return err
	}
	// Votes may have landed while we evaluated.
	if now, err := k.ReadBoard(c.Context, cc.client); err == nil && now.Round.Number == r.Number {
		b, r = now, now.Round
	}
	digest := ev.Digest()
	w := c.App.Writer
	final := competition.Phase(r.State) == competition.PhaseFinal
	fmt.Fprintf(w, "round %d (%v), seed %x, %d pages\n", r.Number, competition.Phase(r.State), r.Seed, len(ev.Eval.Pages))
	fmt.Fprintf(w, "table hash: %x\ndigest: %x\n", ev.TableHash, digest)
	pages := len(ev.Eval.Pages)
	for j, idx := range ev.Entries {
		line := fmt.Sprintf("entry %d (%s): wins %d", idx, b.Submissions[idx].Miner, ev.Wins[idx])
		if inv := ev.Eval.Invalid[j]; inv != nil {
			line += ", invalid: " + inv.Error()
		} else {
			line += fmt.Sprintf(", mean loss %.6f", miner.MeanLoss(ev.Eval.Losses[j*pages:(j+1)*pages]))
		}
		fmt.Fprintln(w, line)
	}
	var faulted []string
	for _, v := range r.Votes[:r.VoteCount] {
		key := b.Validators[v.Validator].Key
		verdict := "MATCH"
		if v.Digest != digest {
			verdict = "DIFFERS"
		}
		fmt.Fprintf(w, "vote %s %x %s\n", key, v.Digest, verdict)
		if (final && v.Digest != r.FinalDigest) || (!final && v.Digest != digest) {
			faulted = append(faulted, key.String())
		}
	}
	if r.VoteCount == 0 {
		fmt.Fprintln(w, "no votes yet")
	}
	switch {
	case final && len(faulted) > 0:
		fmt.Fprintf(w, "faulted (not the final digest): %s\n", strings.Join(faulted, ", "))
	case final:
		fmt.Fprintln(w, "faulted: none (every vote is the final digest)")
	case len(faulted) > 0:
		fmt.Fprintf(w, "would be faulted once the recomputed digest reaches quorum: %s\n", strings.Join(faulted, ", "))
	default:
		fmt.Fprintln(w, "would be faulted: none")
	}
	if final && r.FinalDigest != digest {
		return fmt.Errorf("round %d's final digest %x is not the recomputed %x: this machine's evaluation differs from the quorum's", r.Number, r.FinalDigest, digest)
	}
	return nil
}

func competitionClaimCommand() *cli.Command {
	return &cli.Command{
		Name:   "claim",
		Usage:  "as a miner, take what the wallet's entry earned and has not claimed into its associated token account (created if missing)",
		Flags:  competitionSignerFlags(),
		Action: competitionClaim,
	}
}

func competitionClaim(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, _, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	if !k.HasPool() {
		return fmt.Errorf("competition %q has no reward pool: there is nothing to claim", k.ID)
	}
	me := cc.wallet.PublicKey()
	sub, err := k.ReadSubmission(c.Context, cc.client, me)
	if err != nil {
		return err
	}
	if sub == nil {
		return fmt.Errorf("%s has no entry in competition %q: nothing to claim", me, k.ID)
	}
	b, err := k.ReadBoard(c.Context, cc.client)
	if err != nil {
		return err
	}
	if e := b.Submissions[sub.Index]; e.Earned <= e.Claimed {
		return fmt.Errorf("nothing to claim: entry %d earned %d base units and claimed them all", sub.Index, e.Earned)
	}
	ixs, err := k.Claim(me, me)
	if err != nil {
		return err
	}
	ata, err := treasurer.AssociatedTokenAddress(me, k.Mint, k.TokenProgram)
	if err != nil {
		return err
	}
	before, after, err := sendMeasured(c, cc.client, cc.wallet, ixs, ata)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "claimed %d base units into %s (balance %d)\n", after-before, ata, after)
	return nil
}

func competitionBurnStakesCommand() *cli.Command {
	return &cli.Command{
		Name:   "burn-stakes",
		Usage:  "burn the stakes faulted validators forfeited (anyone may): they leave the pool and the supply, paid to nobody",
		Flags:  competitionSignerFlags(),
		Action: competitionBurnStakes,
	}
}

func competitionBurnStakes(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	cc, k, _, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	if !k.HasPool() {
		return fmt.Errorf("competition %q has no reward pool: it takes no stakes", k.ID)
	}
	ix, err := k.BurnStakes()
	if err != nil {
		return err
	}
	before, after, err := sendMeasured(c, cc.client, cc.wallet, []solana.Instruction{ix}, k.Pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "burned %d base units of forfeited stakes\n", before-after)
	return nil
}

func competitionWithdrawCommand() *cli.Command {
	return &cli.Command{
		Name:  "withdraw",
		Usage: "as the competition's authority, take tokens of its pool nobody is owed (not earned rewards unclaimed, stakes, nor forfeited stakes to burn)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "amount", Usage: "base units, or a decimal amount of tokens such as 1.5 (default: everything withdrawable)"},
			&cli.StringFlag{Name: "to", Usage: "owner of the receiving associated token account (default: the wallet; created if missing)"},
		}, competitionSignerFlags()...),
		Action: competitionWithdraw,
	}
}

func competitionWithdraw(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	if _, err := competitionID(c); err != nil {
		return err
	}
	if s := c.String("to"); s != "" {
		if _, err := parsePubkey("--to", s); err != nil {
			return err
		}
	}
	cc, k, acc, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	if !k.HasPool() {
		return fmt.Errorf("competition %q has no reward pool: there is nothing to withdraw", k.ID)
	}
	var amount uint64
	if c.IsSet("amount") {
		info, err := treasurer.FetchMint(c.Context, cc.client, k.Mint)
		if err != nil {
			return err
		}
		if amount, err = parseAmount("--amount", c.String("amount"), info.Decimals); err != nil {
			return err
		}
	} else {
		balance, withdrawable, err := k.PoolBalance(c.Context, cc.client, acc)
		if err != nil {
			return err
		}
		if withdrawable == 0 {
			return fmt.Errorf("nothing to withdraw: the pool's %d base units are all owed (unclaimed %d, stakes %d, forfeited %d)",
				balance, acc.Unclaimed, acc.Stakes, acc.Forfeited)
		}
		amount = withdrawable
	}
	owner, err := pubkeyOrWallet(c, "to", cc.wallet)
	if err != nil {
		return err
	}
	me := cc.wallet.PublicKey()
	create, to, err := treasurer.CreateTokenAccount(me, owner, k.Mint, k.TokenProgram)
	if err != nil {
		return err
	}
	ix, err := k.Withdraw(me, to, amount)
	if err != nil {
		return err
	}
	return cc.send(c, []solana.Instruction{create, ix}, fmt.Sprintf("withdrew %d base units into %s", amount, to))
}

func competitionCloseCommand() *cli.Command {
	return &cli.Command{
		Name: "close",
		Usage: "as the competition's authority, close it once nothing is owed (every reward claimed, every stake returned or burned): " +
			"its board's rent goes to --spill; its pool stays withdrawable",
		Flags:  append([]cli.Flag{spillFlag}, competitionSignerFlags()...),
		Action: competitionClose,
	}
}

func competitionClose(c *cli.Context) error {
	if err := requireFlagsNoArgs(c, competitionIDFlag.Name); err != nil {
		return err
	}
	if s := c.String(spillFlag.Name); s != "" {
		if _, err := parsePubkey("--"+spillFlag.Name, s); err != nil {
			return err
		}
	}
	cc, k, _, err := openCompetition(c, newCompetitionCtx)
	if err != nil {
		return err
	}
	spill, err := pubkeyOrWallet(c, spillFlag.Name, cc.wallet)
	if err != nil {
		return err
	}
	ix, err := k.Close(cc.wallet.PublicKey(), spill)
	if err != nil {
		return err
	}
	return cc.send(c, []solana.Instruction{ix}, fmt.Sprintf("competition %q closed", k.ID))
}

// competitionCtx is what every competition command needs.
type competitionCtx struct {
	program competition.Program
	client  *chain.Client
	wallet  solana.PrivateKey // nil for the commands that only read
}

// newCompetitionCtx is newCompetitionReadCtx with the wallet that signs.
func newCompetitionCtx(c *cli.Context) (*competitionCtx, error) {
	key, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	cc, err := newCompetitionReadCtx(c)
	if err != nil {
		return nil, err
	}
	cc.wallet = key
	return cc, nil
}

// newCompetitionReadCtx connects to the cluster for commands that only
// read: no wallet file is needed.
func newCompetitionReadCtx(c *cli.Context) (*competitionCtx, error) {
	program := competition.Default()
	if s := c.String(competitionProgramFlag.Name); s != "" {
		id, err := parsePubkey("--"+competitionProgramFlag.Name, s)
		if err != nil {
			return nil, err
		}
		program.ID = id
	}
	var err error
	if program.Authorizer, err = authorizerProgram(c); err != nil {
		return nil, err
	}
	client, err := newChainClient(c)
	if err != nil {
		return nil, err
	}
	// Name the programs' errors under overridden ids too.
	if tables, ok := client.Errors.(chain.ErrorTables); ok {
		for name, id := range map[string]solana.PublicKey{"psyche_competition": program.ID, "psyche_authorizer": program.Authorizer.ID} {
			d, err := idl.Load(name)
			if err != nil {
				return nil, err
			}
			d.AddErrors(tables, id)
		}
	}
	return &competitionCtx{program: program, client: client}, nil
}

func (cc *competitionCtx) send(c *cli.Context, ixs []solana.Instruction, done string) error {
	return sendSigned(c, cc.client, cc.wallet, ixs, done)
}

// competitionID is --id, checked.
func competitionID(c *cli.Context) (string, error) {
	return checkCompetitionID("--id", c.String(competitionIDFlag.Name))
}

func checkCompetitionID(flag, id string) (string, error) {
	if len(id) == 0 || len(id) > competition.MaxIDLen {
		return "", badInputf("%s %q: %v", flag, id, competition.ErrBadID)
	}
	return id, nil
}

// openCompetition opens --id's competition.
func openCompetition(c *cli.Context, newCtx func(*cli.Context) (*competitionCtx, error)) (*competitionCtx, competition.Competition, *competition.Account, error) {
	id, err := competitionID(c)
	if err != nil {
		return nil, competition.Competition{}, nil, err
	}
	return openCompetitionID(c, id, newCtx)
}

func openCompetitionID(c *cli.Context, id string, newCtx func(*cli.Context) (*competitionCtx, error)) (*competitionCtx, competition.Competition, *competition.Account, error) {
	cc, err := newCtx(c)
	if err != nil {
		return nil, competition.Competition{}, nil, err
	}
	k, acc, err := cc.program.Open(c.Context, cc.client, id)
	if errors.Is(err, chain.ErrAccountNotFound) {
		return nil, competition.Competition{}, nil, fmt.Errorf("no competition %q on program %s (psyche-client competition list names them)", id, cc.program.ID)
	}
	if err != nil {
		return nil, competition.Competition{}, nil, err
	}
	return cc, k, acc, nil
}

// competitionData opens the competition's dataset: its data location, or
// the first of flags (at least one) given, pinned to its data root. It checks that the
// data is the competition's (tokenizer, sequences) and returns the
// constraints models are evaluated under; the caller closes it.
func competitionData(c *cli.Context, acc *competition.Account, flags ...string) (provider.Provider, evaluate.Constraints, error) {
	loc, flag := acc.DataLocation, ""
	for _, f := range flags {
		if s := c.String(f); s != "" {
			loc, flag = s, f
			break
		}
	}
	root := hex.EncodeToString(acc.DataRoot[:])
	p, err := provider.Open(c.Context, []provider.Source{{Location: loc, Root: root}}, provider.HTTPOptions{CacheDir: c.String(dataCacheDirFlag.Name)})
	if err != nil {
		if flag != "" {
			return nil, evaluate.Constraints{}, badInputf("--%s: %w", flag, err)
		}
		return nil, evaluate.Constraints{}, fmt.Errorf("open the competition's data (%s): %w; give a copy of it with --%s", loc, err, flags[0])
	}
	fail := func(err error) (provider.Provider, evaluate.Constraints, error) {
		p.Close()
		if flag != "" {
			return nil, evaluate.Constraints{}, badInputf("--%s %s: %w", flag, loc, err)
		}
		return nil, evaluate.Constraints{}, fmt.Errorf("the competition's data %s: %w", loc, err)
	}
	info := p.Info()
	if competition.TokenizerHash(info.Tokenizer) != acc.TokenizerHash {
		return fail(fmt.Errorf("its tokenizer %s is not the competition's (tokenizer hash %x)", info.Tokenizer, acc.TokenizerHash))
	}
	cons, err := competition.Constraints(acc, info.VocabSize, info.Tokenizer)
	if err != nil {
		return fail(err)
	}
	if err := evaluate.DataFits(info, cons); err != nil {
		return fail(err)
	}
	return p, cons, nil
}

// competitionModelDir is --model-dir, else the competition's directory in
// the user's cache, created.
func competitionModelDir(c *cli.Context, k competition.Competition) (string, error) {
	dir := c.String(competitionModelDirFlag.Name)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "psyche", "competition", k.Address.String())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", badInputf("--%s: %w", competitionModelDirFlag.Name, err)
	}
	return dir, nil
}

func nonNegative(c *cli.Context, name string) (int, error) {
	v := c.Int(name)
	if v < 0 {
		return 0, badInputf("--%s cannot be negative", name)
	}
	return v, nil
}

// parsePPM reads a decimal such as 0.01 as millionths (10000), exactly.
func parsePPM(flag, s string) (uint64, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	digits := func(x string) bool {
		for _, r := range x {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	if whole+frac == "" || !digits(whole) || !digits(frac) {
		return 0, badInputf("--%s %q is not a decimal number such as 0.01", flag, s)
	}
	if len(frac) > 6 {
		return 0, badInputf("--%s %q has more than 6 decimal places: the program counts millionths", flag, s)
	}
	if len(strings.TrimLeft(whole, "0")) > 12 {
		return 0, badInputf("--%s %q is out of range", flag, s)
	}
	var w, f uint64
	if whole != "" {
		w, _ = strconv.ParseUint(whole, 10, 64)
	}
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*1_000_000 + f, nil
}

// ppmString writes millionths as a decimal.
func ppmString(v uint32) string {
	s := fmt.Sprintf("%d.%06d", v/1_000_000, v%1_000_000)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func epsilonPPM(c *cli.Context, flag string) (uint32, error) {
	v, err := parsePPM(flag, c.String(flag))
	if err != nil {
		return 0, err
	}
	if v > maxEpsilonPPM {
		return 0, badInputf("--%s %s: at most 1 (the whole loss)", flag, c.String(flag))
	}
	return uint32(v), nil
}

func checkEpsilons(start, end uint32) error {
	if end > start {
		return badInputf("--%s %s exceeds --%s %s: epsilon decays, it does not grow", epsilonEndFlag.Name, ppmString(end), epsilonFlag.Name, ppmString(start))
	}
	return nil
}

func temperaturePPM(c *cli.Context) (uint32, error) {
	v, err := parsePPM(temperatureFlag.Name, c.String(temperatureFlag.Name))
	if err != nil {
		return 0, err
	}
	if v < minTemperaturePPM || v > maxTemperaturePPM {
		return 0, badInputf("--%s %s: 0.001 to 100", temperatureFlag.Name, c.String(temperatureFlag.Name))
	}
	return uint32(v), nil
}

// uintFlag reads flag name, an integer from lo to hi (0 when not given).
func uintFlag(c *cli.Context, name string, lo, hi uint64) (uint64, error) {
	if !c.IsSet(name) {
		return 0, nil
	}
	s := c.String(name)
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	switch {
	case err != nil:
		return 0, badInputf("--%s %q is not a non-negative integer", name, s)
	case v < lo || v > hi:
		return 0, badInputf("--%s %d: %d to %d", name, v, lo, hi)
	}
	return v, nil
}

func pagesPerRound(c *cli.Context) (uint16, error) {
	v, err := uintFlag(c, pagesFlag.Name, 1, maxPagesPerRound)
	return uint16(v), err
}

func roundSlots(c *cli.Context) (uint64, error) {
	return uintFlag(c, roundSlotsFlag.Name, 1, math.MaxUint64)
}

func quorum(c *cli.Context) (uint8, error) {
	v, err := uintFlag(c, quorumFlag.Name, 1, maxQuorum)
	return uint8(v), err
}

// The flags of `train --competition` (train.go defines them with train's
// others): the mode trains a model alone, in no run.
var competitionTrainOnly = map[string]bool{
	competitionProgramFlag.Name: true, "steps": true, "sessions": true, "batch-size": true, "learning-rate": true, "model-config": true,
	"init-seed": true, "load-best": true, "load-submission": true, "hub-repo": true, "eval-pages": true,
}

// competitionTrainAlso are train's flags that apply with --competition too.
var competitionTrainAlso = map[string]bool{
	"competition": true, walletFlag.Name: true, insecureKeyfileFlag.Name: true, rpcFlag.Name: true, wsRPCFlag.Name: true,
	"data-dir": true, "data-url": true, dataCacheDirFlag.Name: true, "checkpoint-dir": true, "threads": true, "hub-token-file": true, "eval-seed": true,
}

// refuseFlags fails, as bad input, on the first of the command's flags
// given on the command line that refused names (a flag set only through
// its environment variable is not refused: the environment may serve
// other commands).
func refuseFlags(c *cli.Context, refused func(name string) bool, why string) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !refused(name) || !c.IsSet(name) || fromEnv(f) {
			continue
		}
		return badInputf("--%s does not apply %s", name, why)
	}
	return nil
}

// fromEnv reports whether one of f's environment variables is set.
func fromEnv(f cli.Flag) bool {
	if e, ok := f.(interface{ GetEnvVars() []string }); ok {
		for _, v := range e.GetEnvVars() {
			if _, set := os.LookupEnv(v); set {
				return true
			}
		}
	}
	return false
}

// competitionTrain is `train --competition`: SN9's miner. It trains a model
// alone over the competition's dataset, from fresh weights or a submitted
// model, scores it after each session on its own pages of the dataset, and
// submits it when its loss beats the best by more than the competition's
// epsilon.
func competitionTrain(c *cli.Context) error {
	if err := refuseFlags(c, func(n string) bool { return !competitionTrainOnly[n] && !competitionTrainAlso[n] },
		"with --competition (it trains a model alone, in no run)"); err != nil {
		return err
	}
	if c.Args().Present() {
		return badInputf("train takes no arguments, got %q", c.Args().Slice())
	}
	if err := requireFlags(c, "checkpoint-dir", "hub-repo"); err != nil {
		return err
	}
	id, err := checkCompetitionID("--competition", c.String("competition"))
	if err != nil {
		return err
	}
	steps, sessions, batch, evalPages := c.Int("steps"), c.Int("sessions"), c.Int("batch-size"), c.Int("eval-pages")
	for name, v := range map[string]int{"steps": steps, "sessions": sessions, "batch-size": batch, "eval-pages": evalPages} {
		if v < 1 {
			return badInputf("--%s must be at least 1", name)
		}
	}
	lr := c.Float64("learning-rate")
	if !(lr > 0) || lr > math.MaxFloat32 {
		return badInputf("--learning-rate %v must be positive and finite", lr)
	}
	threads, err := nonNegative(c, "threads")
	if err != nil {
		return err
	}
	starts := 0
	for _, n := range []string{"model-config", "load-best", "load-submission"} {
		if c.IsSet(n) {
			starts++
		}
	}
	if starts != 1 {
		return badInputf("give one start: --model-config (fresh weights), --load-best or --load-submission MINER")
	}
	if c.IsSet("init-seed") && !c.IsSet("model-config") {
		return badInputf("--init-seed applies with --model-config only (the seed of fresh weights)")
	}
	var from solana.PublicKey
	if s := c.String("load-submission"); s != "" {
		if from, err = parsePubkey("--load-submission", s); err != nil {
			return err
		}
	}
	var fresh *trainer.Config
	if name := c.String("model-config"); name != "" {
		cfg, err := modelConfig(name)
		if err != nil {
			return err
		}
		fresh = &cfg
	}
	repo, err := competitionRepo(c)
	if err != nil {
		return err
	}
	token, err := hubToken(c, "hub-token-file")
	if err != nil {
		return err
	}
	if c.IsSet("data-dir") && c.IsSet("data-url") {
		return badInputf("give --data-url or --data-dir, not both")
	}
	dir := c.String("checkpoint-dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return badInputf("--checkpoint-dir: %w", err)
	}

	cc, k, acc, err := openCompetitionID(c, id, newCompetitionCtx)
	if err != nil {
		return err
	}
	data, cons, err := competitionData(c, acc, "data-dir", "data-url")
	if err != nil {
		return err
	}
	defer data.Close()
	info := data.Info()
	pages, err := evaluate.Pages(sha256.Sum256([]byte(strconv.FormatUint(c.Uint64("eval-seed"), 10))), info.NumSequences, acc.SequencesPerPage, evalPages)
	if err != nil {
		return badInputf("--eval-pages %d: %w", evalPages, err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)).With("competition", id)
	me := cc.wallet.PublicKey()
	score := func(path string, params uint64) (float32, error) {
		losses, _, err := evaluate.LossTable(ctx, []evaluate.Model{{Path: path, Submission: evaluate.Submission{Miner: me, Params: params}}},
			data, pages, acc.SequencesPerPage, cons, evaluate.TableOptions{Threads: threads})
		if err != nil {
			return 0, err
		}
		return miner.MeanLoss(losses), nil
	}

	// The start model, and the loss a new model must beat.
	best := float32(math.Inf(1))
	var tr *trainer.Trainer
	if fresh != nil {
		cfg := *fresh
		// The dataset's vocabulary, its rows padded to a multiple of 64 as
		// GPT-2's are (the padded rows count against max_params).
		cfg.Vocab, cfg.PaddedVocab = int(info.VocabSize), (int(info.VocabSize)+63)/64*64
		cfg.SeqLen, cfg.Arith = int(acc.SeqLen), cons.Precision
		if arch(cfg) != cons.Architecture {
			return badInputf("--model-config %s is a %s model; the competition's architecture is %s", c.String("model-config"), arch(cfg), cons.Architecture)
		}
		if tr, err = trainer.New(cfg, c.Uint64("init-seed")); err != nil {
			return asBadModel(fmt.Errorf("--model-config %s: %w", c.String("model-config"), err))
		}
		defer tr.Close()
		if n := uint64(tr.NumParams()); n > cons.MaxParams {
			return badInputf("--model-config %s has %d parameters with the dataset's vocabulary; the competition allows %d", c.String("model-config"), n, cons.MaxParams)
		}
		log.Info("fresh model", "config", c.String("model-config"), "params", tr.NumParams(), "init_seed", c.Uint64("init-seed"))
		// The wallet's own entry, if any, is the model to beat.
		if own, err := k.ReadSubmission(ctx, cc.client, me); err != nil {
			return err
		} else if own != nil {
			sub := competition.SubmissionOf(own, own.Current)
			path, err := fetchSubmission(ctx, sub, dir, cons, log)
			switch _, invalid := evaluate.AsInvalid(err); {
			case invalid:
				log.Warn("the wallet's own submission is invalid: any model beats it", "err", err)
			case err != nil:
				return err
			default:
				if best, err = score(path, sub.Params); err != nil {
					return err
				}
				log.Info("the wallet's own submission", "revision", hex.EncodeToString(sub.Revision[:]), "loss", best)
			}
		}
	} else {
		sub, what, err := startSubmission(ctx, cc, k, c.Bool("load-best"), from)
		if err != nil {
			return err
		}
		path, err := fetchSubmission(ctx, sub, dir, cons, log)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if tr, err = trainer.LoadCheckpoint(path); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer tr.Close()
		if best, err = score(path, sub.Params); err != nil {
			return err
		}
		log.Info("start model", "from", what, "path", path, "params", sub.Params, "loss", best)
	}
	if threads > 0 {
		if err := tr.SetThreads(threads); err != nil {
			return err
		}
	}

	// Each miner walks the dataset from its own place (miner.Options.Offset).
	opts := miner.Options{Batch: batch, LR: float32(lr), Warmup: miner.Defaults.Warmup, Offset: binary.LittleEndian.Uint64(me[:8])}
	err = mine(ctx, c, log, mineArgs{cc: cc, k: k, tr: tr, data: data, cons: cons, opts: opts, steps: steps, sessions: sessions,
		dir: dir, repo: repo, token: token, best: best, score: score})
	if ctx.Err() != nil {
		log.Info("stopped")
		return nil // Ctrl-C
	}
	return err
}

// mineArgs are the miner's sessions' inputs.
type mineArgs struct {
	cc              *competitionCtx
	k               competition.Competition
	tr              *trainer.Trainer
	data            provider.Provider
	cons            evaluate.Constraints
	opts            miner.Options
	steps, sessions int
	dir, repo       string
	token           string
	best            float32
	score           func(path string, params uint64) (float32, error)
}

// mine runs the miner's sessions: train, save, score, and submit when the
// model beats the best by more than epsilon.
func mine(ctx context.Context, c *cli.Context, log *slog.Logger, a mineArgs) error {
	me, id, tr, best := a.cc.wallet.PublicKey(), a.k.ID, a.tr, a.best
	step := 0
	for s := 1; s <= a.sessions; s++ {
		var sum float64
		var n int
		if err := miner.Train(ctx, tr, a.data, a.opts, step, a.steps, func(_ int, loss float32) { sum += float64(loss); n++ }); err != nil {
			return err
		}
		step += a.steps
		path := filepath.Join(a.dir, fmt.Sprintf("model-%d.safetensors", step))
		if err := tr.SaveModel(path, map[string]string{"competition": id}); err != nil {
			return err
		}
		params := uint64(tr.NumParams())
		if err := evaluate.Check(path, evaluate.Submission{Miner: me, Params: params}, a.cons); err != nil {
			return fmt.Errorf("the trained model %s does not fit the competition: %w", path, err)
		}
		loss, err := a.score(path, params)
		if err != nil {
			return err
		}
		// The rules as they stand now (the authority may change epsilon, or pause).
		acc, err := a.k.Account(ctx, a.cc.client)
		if err != nil {
			return err
		}
		decision := "keep training: not better than the best by more than epsilon"
		switch {
		case !miner.Improved(loss, best, acc.EpsilonStartPpm):
		case submissionsOpen(a.k, acc) != nil:
			decision = "improved, not submitted: " + submissionsOpen(a.k, acc).Error()
		default:
			sub, err := commitModel(ctx, a.cc, a.k, path, params, a.repo, a.token, log)
			if err != nil {
				return err
			}
			sub.print(c.App.Writer)
			decision = "submitted " + sub.Revision
			best = loss
		}
		log.Info("session", "session", s, "step", step, "train_loss", sum/float64(max(n, 1)), "loss", loss, "best", best,
			"epsilon", ppmString(acc.EpsilonStartPpm), "model", path, "decision", decision)
	}
	return nil
}

// modelConfig is --model-config: a preset name, or a model file whose shape
// (not its weights) the fresh model takes.
func modelConfig(name string) (trainer.Config, error) {
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		tr, err := trainer.LoadCheckpoint(name)
		if err != nil {
			return trainer.Config{}, badInputf("--model-config %s: %w", name, err)
		}
		defer tr.Close()
		return tr.Config(), nil
	}
	cfg, err := trainer.ConfigByName(name)
	if err != nil {
		return trainer.Config{}, badInputf("--model-config: %w, or a model file", err)
	}
	return cfg, nil
}

// startSubmission is the submission --load-best or --load-submission names.
func startSubmission(ctx context.Context, cc *competitionCtx, k competition.Competition, loadBest bool, from solana.PublicKey) (evaluate.Submission, string, error) {
	b, err := k.ReadBoard(ctx, cc.client)
	if err != nil {
		return evaluate.Submission{}, "", err
	}
	if loadBest {
		i := bestEntry(b)
		if i < 0 {
			return evaluate.Submission{}, "", badInputf("--load-best: no final round of competition %q has weighted an entry yet", k.ID)
		}
		from = b.Submissions[i].Miner
	}
	s, err := k.ReadSubmission(ctx, cc.client, from)
	if err != nil {
		return evaluate.Submission{}, "", err
	}
	if s == nil {
		return evaluate.Submission{}, "", badInputf("--load-submission: %s has no entry in competition %q", from, k.ID)
	}
	sub := competition.SubmissionOf(s, s.Current)
	what := fmt.Sprintf("entry %d (%s)", s.Index, from)
	if loadBest {
		// The model the last final round weighted, when the board still holds that round.
		if r := b.Round; competition.Phase(r.State) == competition.PhaseFinal {
			if m, ok := evaluate.RoundModel(sub, competition.SubmissionOf(s, s.Prev), r.OpenSlot); ok {
				sub = m
			}
		}
		what = fmt.Sprintf("the best entry %d (%s, weight %.4f)", s.Index, from, float64(b.Submissions[s.Index].Weight)/float64(1<<24))
	}
	return sub, what, nil
}

// bestEntry is the entry with the highest weight in the last final round,
// ties to the lower index; -1 when no entry has a weight.
func bestEntry(b *competition.Board) int {
	best, weight := -1, uint32(0)
	for i := range int(b.SubmissionCount) {
		if w := b.Submissions[i].Weight; w > weight {
			best, weight = i, w
		}
	}
	return best
}

// fetchSubmission downloads a submission's model into dir, verified, and
// checks it against the competition.
func fetchSubmission(ctx context.Context, sub evaluate.Submission, dir string, cons evaluate.Constraints, log *slog.Logger) (string, error) {
	path, _, err := evaluate.Fetch(ctx, sub, dir, cons, hub.FetchOptions{Log: log})
	if err != nil {
		return "", err
	}
	if err := evaluate.Check(path, sub, cons); err != nil {
		return "", err
	}
	return path, nil
}

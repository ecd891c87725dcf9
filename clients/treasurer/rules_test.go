package treasurer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
)

func TestDefaultIndexIsSha256Prefix(t *testing.T) {
	h := sha256.Sum256([]byte("consilience-40b-1"))
	if got, want := DefaultIndex("consilience-40b-1"), binary.LittleEndian.Uint64(h[:8]); got != want {
		t.Fatalf("DefaultIndex = %d, want %d", got, want)
	}
	if DefaultIndex("a") == DefaultIndex("b") {
		t.Fatal("different run ids share an index")
	}
}

func TestAssociatedTokenAddressMatchesSPL(t *testing.T) {
	wallet, mint := solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey()
	want, _, err := solana.FindAssociatedTokenAddress(wallet, mint)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AssociatedTokenAddress(wallet, mint, TokenProgramID)
	if err != nil || got != want {
		t.Fatalf("AssociatedTokenAddress = %s, %v; want %s", got, err, want)
	}
	t22, err := AssociatedTokenAddress(wallet, mint, Token2022ProgramID)
	if err != nil || t22 == want {
		t.Fatalf("the Token-2022 address %s equals the SPL Token one", t22)
	}
	if err := CheckTokenProgram(solana.SystemProgramID); err == nil {
		t.Fatal("the system program passed as a token program")
	}
}

// Claimable and Reserved follow the program's rules (interface/src/lib.rs).
func TestClaimableAndReserved(t *testing.T) {
	user := solana.NewWallet().PublicKey()
	for _, tc := range []struct {
		name            string
		earned, slashed uint64 // still in the coordinator
		record          *Participant
		want            uint64
	}{
		{"first claim", 100, 0, nil, 100},
		{"slashed", 100, 40, nil, 60},
		{"slashes over earnings", 5, 9, nil, 0},
		{"already claimed", 0, 0, &Participant{EarnedPoints: 100, ClaimedPoints: 100}, 0},
		{"new points", 30, 0, &Participant{EarnedPoints: 100, ClaimedPoints: 100}, 30},
		{"debt from a late slash", 40, 0, &Participant{EarnedPoints: 100, SlashedPoints: 25, ClaimedPoints: 100}, 15},
		{"never joined", 0, 0, nil, 0},
	} {
		s := &coordinator.State{}
		if tc.name != "never joined" {
			s.Clients[3] = coordinator.ClientSlot{Signer: user, Earned: tc.earned, Slashed: tc.slashed, Occupied: 1}
		}
		if got := Claimable(s, tc.record, user); got != tc.want {
			t.Errorf("%s: Claimable = %d, want %d", tc.name, got, tc.want)
		}
	}
	s := &coordinator.State{}
	s.Clients[0] = coordinator.ClientSlot{Earned: 50, Occupied: 1}
	s.Clients[1] = coordinator.ClientSlot{Earned: 30, Slashed: 40, Occupied: 1}
	s.Clients[2] = coordinator.ClientSlot{Earned: 20, Slashed: 5, Occupied: 1}
	s.Clients[3] = coordinator.ClientSlot{Earned: 1000, Unvested: [4]uint64{9}, Burned: 9}
	if got := Reserved(s); got != 65 {
		t.Errorf("Reserved = %d, want 65", got)
	}
	s.Clients[4] = coordinator.ClientSlot{Unvested: [4]uint64{1, 2, 3, 4}, Burned: 7, Occupied: 1}
	if got := ReserveOf(s); got != (Reserve{Claims: 65, Unvested: 10, Burned: 7}) || Reserved(s) != 82 {
		t.Errorf("ReserveOf = %+v, Reserved = %d", got, Reserved(s))
	}
	acc := &RunAccount{TotalDeposits: 300}
	if got := ReservedTokens(acc, s); got != 382 {
		t.Errorf("ReservedTokens = %d, want 382", got)
	}
	acc.Closed = true
	if got := ReservedTokens(acc, s); got != 300 {
		t.Errorf("ReservedTokens of a closed run = %d, want its deposits, 300", got)
	}
	// Points settled into records (participant_settle) stay reserved.
	acc.Closed, acc.UnclaimedSettledPoints = false, 40
	if got := ReserveOfRun(acc, s); got != (Reserve{Claims: 65, Unvested: 10, Burned: 7, Settled: 40}) || got.Points() != 122 {
		t.Errorf("ReserveOfRun = %+v", got)
	}
	if got := ReservedTokens(acc, s); got != 422 {
		t.Errorf("ReservedTokens with settled points = %d, want 422", got)
	}
	if got := ReserveOfRun(acc, nil); got != (Reserve{Settled: 40}) {
		t.Errorf("ReserveOfRun without the Coordinator run = %+v", got)
	}
}

// SlotHolds follows the Coordinator's ClientSlot::is_free; SettleFrees lists
// the slots that only unsettled points hold.
func TestSlotHoldsAndSettleFrees(t *testing.T) {
	for _, tc := range []struct {
		name string
		slot coordinator.ClientSlot
		want []string
	}{
		{"free", coordinator.ClientSlot{}, nil},
		{"points", coordinator.ClientSlot{Earned: 1}, []string{"unsettled points"}},
		{"a slash", coordinator.ClientSlot{Slashed: 1}, []string{"unsettled points"}},
		{"member", coordinator.ClientSlot{InEpoch: 1, Earned: 5}, []string{"in the epoch", "unsettled points"}},
		{"everything", coordinator.ClientSlot{Pending: 1, InEpoch: 1, Earned: 1, Unvested: [4]uint64{0, 0, 0, 1}, Burned: 1, OpenDisputes: 1},
			[]string{"pending join", "in the epoch", "unsettled points", "unvested points", "burned points", "open disputes"}},
	} {
		if got := SlotHolds(&tc.slot); !slices.Equal(got, tc.want) {
			t.Errorf("%s: SlotHolds = %q, want %q", tc.name, got, tc.want)
		}
	}
	s := &coordinator.State{}
	absent, member, slashed := solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey()
	s.Clients[0] = coordinator.ClientSlot{Signer: absent, Occupied: 1, Earned: 10}
	s.Clients[1] = coordinator.ClientSlot{Signer: member, Occupied: 1, Earned: 10, InEpoch: 1}
	s.Clients[2] = coordinator.ClientSlot{Signer: slashed, Occupied: 1, Slashed: 5}
	s.Clients[3] = coordinator.ClientSlot{Earned: 10} // unoccupied
	if got := SettleFrees(s); !slices.Equal(got, []solana.PublicKey{absent, slashed}) {
		t.Errorf("SettleFrees = %v", got)
	}
	if e, sl, ok := Settleable(s, slashed); !ok || e != 0 || sl != 5 {
		t.Errorf("Settleable = %d, %d, %v", e, sl, ok)
	}
	if _, _, ok := Settleable(s, solana.NewWallet().PublicKey()); ok {
		t.Error("a stranger has points to settle")
	}
}

// CheckEarningRate is run_update's rule (check_earning_rate in the interface
// crate); FundingOf counts the epochs the run's free tokens cover.
func TestEarningRateFunding(t *testing.T) {
	fixed := MintInfo{Supply: 1000, SupplyFixed: true}
	growable := MintInfo{Supply: 1000}
	for _, tc := range []struct {
		mint MintInfo
		rate uint64
		ok   bool
	}{{fixed, 1000, true}, {fixed, 0, true}, {fixed, 1001, false}, {growable, 1 << 62, true}} {
		if err := CheckEarningRate(tc.mint, tc.rate); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnfundableRate)) {
			t.Errorf("CheckEarningRate(%+v, %d) = %v", tc.mint, tc.rate, err)
		}
	}
	s := &coordinator.State{}
	s.Clients[0] = coordinator.ClientSlot{Occupied: 1, Earned: 100}
	acc := &RunAccount{TotalDeposits: 50, UnclaimedSettledPoints: 25}
	s.FutureRates.EarningRateTotalShared = 300
	// 1000 held, 175 reserved: 825 available, 2 epochs of 300.
	f := FundingOf(acc, s, growable, 1000)
	if f.EarningRate != 300 || f.Available != 825 || f.EpochsFunded == nil || *f.EpochsFunded != 2 || f.Unfundable || f.SupplyFixed {
		t.Errorf("FundingOf = %+v", f)
	}
	s.FutureRates.EarningRateTotalShared = 1001
	if f := FundingOf(acc, s, fixed, 1000); !f.Unfundable || *f.EpochsFunded != 0 || !f.SupplyFixed {
		t.Errorf("a rate above the supply: %+v", f)
	}
	if f := FundingOf(acc, s, fixed, 100); f.Available != 0 {
		t.Errorf("an underfunded run: %+v", f)
	}
	s.FutureRates.EarningRateTotalShared = 0
	if f := FundingOf(acc, s, fixed, 1000); f.EpochsFunded != nil || f.Unfundable {
		t.Errorf("no rate: %+v", f)
	}
	acc.Closed = true
	if f := FundingOf(acc, nil, fixed, 1000); f.EarningRate != 0 || f.EpochsFunded != nil || f.Available != 1000-75 {
		t.Errorf("a closed run: %+v", f)
	}
}

// ForfeitOf follows the program's rule (interface/src/lib.rs, Forfeit::of).
func TestForfeitOf(t *testing.T) {
	user := solana.NewWallet().PublicKey()
	held := &Participant{Deposit: 25, DepositEpoch: 4, Deposited: true}
	for _, tc := range []struct {
		name string
		slot *coordinator.ClientSlot
		p    *Participant
		want Forfeit
	}{
		{"points only, no record", &coordinator.ClientSlot{Burned: 70, HasFault: 1, LastFaultEpoch: 4}, nil, Forfeit{Points: 70}},
		{"points and the deposit", &coordinator.ClientSlot{Burned: 70, HasFault: 1, LastFaultEpoch: 4}, held, Forfeit{70, 25, true}},
		{"a fault before the deposit", &coordinator.ClientSlot{Burned: 70, HasFault: 1, LastFaultEpoch: 3}, held, Forfeit{Points: 70}},
		{"a fault the slot forgot", nil, &Participant{Deposit: 25, DepositEpoch: 4, Deposited: true, HasFault: true, LastFaultEpoch: 5}, Forfeit{0, 25, true}},
		{"nothing", &coordinator.ClientSlot{Earned: 10}, held, Forfeit{}},
	} {
		s := &coordinator.State{}
		if tc.slot != nil {
			slot := *tc.slot
			slot.Signer, slot.Occupied = user, 1
			s.Clients[7] = slot
		}
		if got := ForfeitOf(s, tc.p, user); got != tc.want {
			t.Errorf("%s: ForfeitOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// CheckSlashingRate and CheckDepositSlashing follow the program's rules
// (interface/src/lib.rs, Run::check_slashing_rate and
// check_deposit_slashing): a deposit is at stake only where a fault slashes
// (audit finding F5).
func TestSlashingRateRules(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		joinDeposit, totalDeposits, rate uint64
		ok                               bool
	}{
		{"asks, rate 0", 25, 0, 0, false},
		{"asks, rate 1", 25, 0, 1, true},
		{"holds, rate 0", 0, 25, 0, false},
		{"neither, rate 0", 0, 0, 0, true},
	} {
		err := CheckSlashingRate(tc.joinDeposit, tc.totalDeposits, tc.rate)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrZeroSlashingRate)) {
			t.Errorf("%s: CheckSlashingRate = %v", tc.name, err)
		}
	}
	user := solana.NewWallet().PublicKey()
	for _, tc := range []struct {
		name            string
		current, future uint64
		slot            *coordinator.ClientSlot
		ok              bool
	}{
		{"both rates", 5, 5, &coordinator.ClientSlot{InEpoch: 1}, true},
		{"no rate for the coming epochs", 5, 0, nil, false},
		{"none now, never joined", 0, 5, nil, true},
		{"none now, pending", 0, 5, &coordinator.ClientSlot{Pending: 1}, true},
		{"none now, in the epoch", 0, 5, &coordinator.ClientSlot{InEpoch: 1}, false},
		{"none now, named by an open dispute", 0, 5, &coordinator.ClientSlot{OpenDisputes: 1}, false},
	} {
		s := &coordinator.State{}
		s.CurrentRates.SlashingRatePerClient, s.FutureRates.SlashingRatePerClient = tc.current, tc.future
		if tc.slot != nil {
			slot := *tc.slot
			slot.Signer, slot.Occupied = user, 1
			s.Clients[3] = slot
		}
		err := CheckDepositSlashing(s, user)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrZeroSlashingRate)) {
			t.Errorf("%s: CheckDepositSlashing = %v", tc.name, err)
		}
	}
}

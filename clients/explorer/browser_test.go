package explorer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/explorer/explorertest"
)

// What a user sees, in a real browser (headless chromium) against a run on
// localnet: the runs list, a run's page with its members and loss curve,
// the curve growing when a round lands, at desktop and at phone width,
// where nothing may overflow the page sideways (tables scroll in their
// box); a finished run whose dispute faulted a member (its steps, the
// fault in the events, keys shortened); and the header while the RPC
// endpoint fails and once it works again. Screenshots go to
// $PSYCHE_TEST_ARTIFACTS (else a temporary directory).
func TestExplorerInBrowser(t *testing.T) {
	path, err := explorertest.Chromium() // scripts/setup.sh installs it
	if err != nil {
		t.Fatal(err)
	}
	n := sharedNet(t)
	r := trainingRun(t, n, "browser-run", 3.2, 2.9, 2.7)
	_, member := faultedRun(t, n)
	_, url, _ := startExplorer(t, n, nil, true)
	b, err := explorertest.NewBrowser(testCtx(t, 2*time.Minute), path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	artifacts := os.Getenv("PSYCHE_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) {
		t.Helper()
		png, err := b.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(artifacts, "explorer-"+name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := explorertest.Eval[any](b, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	load := func(path string) {
		t.Helper()
		d, err := b.Load(url+path, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rendered %v after the navigation started", path, d)
	}
	const lossPoints = `document.querySelector('#loss-chart polyline').points.numberOfItems`
	// Nothing is wider than the window, and every table is in its scroll box.
	const fits = `document.documentElement.scrollWidth <= window.innerWidth &&
		[...document.querySelectorAll('table')].every((t) => t.parentElement.classList.contains('table-wrap') &&
			t.parentElement.getBoundingClientRect().right <= window.innerWidth + 0.5)`

	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		if err := b.Viewport(size.width, size.height, size.mobile); err != nil {
			t.Fatal(err)
		}
		load("/")
		if got := eval(`[...document.querySelectorAll('#runs tbody tr')].some((tr) =>
			tr.cells[0].textContent === 'browser-run' && tr.cells[1].textContent === 'RoundTrain' && tr.cells[4].textContent === '2')`); got != true {
			t.Fatalf("%s: the runs table does not show browser-run in RoundTrain with 2 members: %v", size.name, eval(`document.getElementById('app').innerText`))
		}
		if eval(fits) != true {
			t.Errorf("%s: the runs list overflows the window (scroll width %v)", size.name, eval(`document.documentElement.scrollWidth`))
		}
		shot("runs-" + size.name)

		load("/runs/browser-run")
		if h1 := eval(`document.querySelector('h1').textContent`); h1 != "browser-run RoundTrain treasurer" {
			t.Errorf("%s: heading %q", size.name, h1)
		}
		if rows := eval(`document.querySelectorAll('#members tbody tr').length`); rows != 2.0 {
			t.Errorf("%s: %v member rows, want 2", size.name, rows)
		}
		if eval(fits) != true {
			t.Errorf("%s: the run page overflows the window (scroll width %v)", size.name, eval(`document.documentElement.scrollWidth`))
		}
		if w := eval(`document.getElementById('loss-chart').getBoundingClientRect().width`).(float64); w > float64(size.width) || w < 300 {
			t.Errorf("%s: the loss chart is %v px wide in a %d px window", size.name, w, size.width)
		}
		before := eval(lossPoints).(float64)
		if size.name == "desktop" && before != 3 {
			t.Fatalf("the loss curve has %v points, want 3", before)
		}
		playRound(t, r, 2.5)
		if err := b.WaitFor(lossPoints+` === `+fmt.Sprint(before+1), 20*time.Second); err != nil {
			t.Fatalf("%s: the loss curve still has %v points after a round: %v", size.name, eval(lossPoints), err)
		}
		if got := eval(`[...document.querySelectorAll('#witnesses th')].map((th) => th.textContent).join(',')`); got != "Step,Index,Witness,Participants,Loss,Tokens/s,Transaction" {
			t.Errorf("%s: witness columns %v", size.name, got)
		}
		shot("run-" + size.name)
	}

	if err := b.Viewport(1280, 900, false); err != nil {
		t.Fatal(err)
	}
	load("/runs/fault-run")
	if got := eval(`[...document.querySelectorAll('.facts div')].find((d) => d.firstChild.textContent === 'Epoch · step').lastChild.textContent`); got != "1 · 1 of 1" {
		t.Errorf("fault-run: epoch · step %q, want 1 · 1 of 1 (epoch 0 ended)", got)
	}
	if got := eval(`document.querySelector('progress').value`); got != 1.0 {
		t.Errorf("fault-run: progress %v, want 1", got)
	}
	// The fault's row names the member by its short key, the full one in the title.
	key := member.String()
	faultRow := `[...document.querySelectorAll('#events tbody tr')].find((tr) => tr.cells[1].textContent === 'MemberFaulted')`
	if got := eval(faultRow + `?.cells[2].textContent`); got != key[:4]+"…"+key[len(key)-4:]+" faulted by dispute 1 (its step 1 was found wrong): slashed, unvested points burned, out of the epoch" {
		t.Errorf("fault-run: the MemberFaulted row says %v", got)
	}
	if got := eval(faultRow + `?.cells[2].querySelector('code').title`); got != key {
		t.Errorf("fault-run: the faulted member's key in the title is %v, want %s", got, key)
	}
	// No full key is left in the events' text.
	if got := eval(`[...document.querySelectorAll('#events td')].map((td) => td.textContent).filter((t) => /[1-9A-HJ-NP-Za-km-z]{32,}/.test(t))`); len(got.([]any)) != 0 {
		t.Errorf("fault-run: events with full keys: %v", got)
	}
	shot("run-faulted")

	// The RPC endpoint fails: the header says since when, and not live.
	sw := newRPCSwitch(t, n.Chain.RPCURL())
	c, err := chain.New(sw.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, url2, _ := startExplorer(t, n, c, false)
	url = url2
	load("/")
	const status = `document.getElementById('status')`
	if got := eval(status + `.className + ': ' + ` + status + `.textContent`); got != "status live: live (polling the RPC)" {
		t.Errorf("status %q", got)
	}
	sw.down.Store(true)
	if err := b.WaitFor(status+`.className === 'status unreachable'`, 20*time.Second); err != nil {
		t.Fatalf("the header does not say the chain is unreachable: %v (%v)", eval(status+`.textContent`), err)
	}
	if got := eval(status + `.textContent`).(string); !strings.HasPrefix(got, "chain unreachable since ") || !strings.HasSuffix(got, " · showing the last data read") ||
		eval(status+`.querySelector('time').dateTime`) == "" || !strings.Contains(eval(status+`.title`).(string), "503") {
		t.Errorf("status %q, title %q", got, eval(status+`.title`))
	}
	if got := eval(`getComputedStyle(` + status + `, '::before').color`); got == "rgb(19, 115, 51)" { // --ok
		t.Errorf("the status dot is green (%v) while the chain is unreachable", got)
	}
	shot("chain-unreachable")
	sw.down.Store(false)
	if err := b.WaitFor(status+`.className === 'status live'`, time.Minute); err != nil {
		t.Fatalf("the header does not say live once the endpoint works again: %v (%v)", eval(status+`.textContent`), err)
	}
}

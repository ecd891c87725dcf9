// Package tui is the terminal UI for --logs tui: run state, round, role,
// clients, peers, the loss curve, throughput, bandwidth and recent log
// lines, redrawn whenever the Recorder changes.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/status/progress"
)

// Options choose the terminal; zero fields mean the process's stdin and
// stdout.
type Options struct {
	Input  io.Reader
	Output io.Writer
	// Extra are further bubbletea options (tests turn off signal handling).
	Extra []tea.ProgramOption
}

// Run shows rec until ctx ends or the user presses q or Ctrl-C; a key press
// calls cancel first, so the client can leave its run cleanly. It returns
// nil in both cases.
func Run(ctx context.Context, rec *status.Recorder, cancel context.CancelFunc, opts Options) error {
	in, out := opts.Input, opts.Output
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	updates, unsubscribe := rec.Subscribe()
	defer unsubscribe()
	m := newModel(rec, updates, cancel, lipgloss.NewRenderer(out))
	m.snap = rec.Snapshot()
	popts := append([]tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen()}, opts.Extra...)
	_, err := tea.NewProgram(m, popts...).Run()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	case errors.Is(err, tea.ErrInterrupted): // SIGINT reached bubbletea rather than the key handler
		cancel()
		return nil
	}
	return fmt.Errorf("terminal UI: %w", err)
}

// model is the bubbletea model; it only ever holds a Snapshot copy.
type model struct {
	rec     *status.Recorder
	updates <-chan struct{}
	cancel  context.CancelFunc
	st      styles

	snap          status.Snapshot
	width, height int
}

type snapshotMsg status.Snapshot

type styles struct {
	title, label, train, held, warn, err, dim lipgloss.Style
}

func newModel(rec *status.Recorder, updates <-chan struct{}, cancel context.CancelFunc, r *lipgloss.Renderer) model {
	return model{
		rec: rec, updates: updates, cancel: cancel,
		width: 80, height: 24, // until the terminal reports its size
		st: styles{
			title: r.NewStyle().Bold(true).Foreground(lipgloss.Color("13")),
			label: r.NewStyle().Foreground(lipgloss.Color("8")),
			train: r.NewStyle().Foreground(lipgloss.Color("9")),
			held:  r.NewStyle().Foreground(lipgloss.Color("10")),
			warn:  r.NewStyle().Foreground(lipgloss.Color("11")),
			err:   r.NewStyle().Bold(true).Foreground(lipgloss.Color("9")),
			dim:   r.NewStyle().Faint(true),
		},
	}
}

// wait delivers a fresh snapshot after the next change.
func (m model) wait() tea.Cmd {
	return func() tea.Msg {
		if _, ok := <-m.updates; !ok {
			return nil
		}
		return snapshotMsg(m.rec.Snapshot())
	}
}

func (m model) Init() tea.Cmd { return m.wait() }

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 0), max(msg.Height, 0)
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c":
			m.cancel()
			return m, tea.Quit
		}
	case snapshotMsg:
		m.snap = status.Snapshot(msg)
		return m, m.wait()
	}
	return m, nil
}

// Render draws s as the UI would on a width x height terminal, without
// colours (for logs, snapshots in bug reports, and the benchmark).
func Render(s status.Snapshot, width, height int) string {
	m := newModel(nil, nil, func() {}, lipgloss.NewRenderer(io.Discard))
	m.snap, m.width, m.height = s, max(width, 0), max(height, 0)
	return m.View()
}

func (m model) View() string {
	lines := m.render()
	if len(lines) > m.height {
		lines = lines[:m.height]
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, m.width, "…")
	}
	return strings.Join(lines, "\n")
}

func (m model) render() []string {
	s, st := m.snap, m.st
	kv := func(k, v string) string { return st.label.Render(k) + " " + v }
	sep := st.dim.Render("  ·  ")

	role := string(s.Role)
	if role == "" {
		role = "—"
	}
	runState := clean(s.RunState)
	if runState == "" {
		runState = "unknown"
	}
	top := []string{
		st.title.Render("psyche") + sep + kv("run", clean(s.RunID)) + sep + kv("state", runState),
		strings.Join([]string{kv("epoch", fmt.Sprint(s.Epoch)), kv("round", fmt.Sprint(s.Round)), kv("step", fmt.Sprint(s.Step)), kv("role", role)}, sep),
		strings.Join([]string{kv("clients", fmt.Sprintf("%d in epoch, %d healthy", s.ClientsInEpoch, s.ClientsHealthy)), kv("peers", fmt.Sprint(s.PeerCount))}, sep),
	}

	last, hasStep := s.LastStep()
	held, hasHeld := s.LastHeldOut()
	lossLine := st.label.Render("loss") + " " + st.train.Render("train")
	if hasStep {
		lossLine += fmt.Sprintf(" %s@%d", progress.Loss(last.Loss), last.Step)
	} else {
		lossLine += " —"
	}
	lossLine += "  " + st.held.Render("● held-out")
	if hasHeld {
		lossLine += fmt.Sprintf(" %s@%d", progress.Loss(held.Loss), held.Step)
	} else {
		lossLine += " —"
	}
	top = append(top, lossLine)

	var rates []float64
	for _, x := range s.Steps {
		rates = append(rates, x.TokensPerSecond())
	}
	if hasStep {
		top = append(top, strings.Join([]string{
			kv("tok/s", fmt.Sprintf("%.1f %s", last.TokensPerSecond(), sparkline(rates, 20))),
			kv("steps", fmt.Sprint(s.StepsTotal)),
			kv("tokens", fmt.Sprint(s.TokensTotal)),
		}, sep))
		bw := []string{
			kv("sent", progress.Bytes(last.BytesOut)+"/step"),
			kv("recv", progress.Bytes(last.BytesIn)+"/step"),
		}
		if s.DenseBytes > 0 {
			bw = append(bw, kv("dense fp32", progress.Bytes(s.DenseBytes)))
			if r := status.CompressionRatio(s.DenseBytes, last.BytesOut); r > 0 {
				bw = append(bw, kv("ratio", fmt.Sprintf("%.1fx", r)))
			}
		}
		top = append(top, strings.Join(bw, sep))
		top = append(top, kv("digest", fmt.Sprintf("%s@%d", clean(last.Digest), last.Step)))
	} else {
		top = append(top, st.dim.Render("no step trained yet"))
	}
	if c := s.Checkpoint; c != nil {
		top = append(top, kv("checkpoint", fmt.Sprintf("step %d  %s", c.Step, clean(c.Location))))
	}
	if v := s.Verification; v != nil {
		top = append(top, kv("verify", verificationLine(v)))
		if v.HasFault {
			top = append(top, st.err.Render(faultLine(v)))
		}
	}
	if bs := s.LatestBenchmarks(); len(bs) > 0 {
		var parts []string
		for _, b := range bs {
			parts = append(parts, fmt.Sprintf("%s acc %.3f acc_norm %.3f@%d", clean(b.Task), b.Acc, b.AccNorm, b.Step))
		}
		top = append(top, kv("evals", strings.Join(parts, sep)))
	}
	if n := len(s.Prompts); n > 0 {
		p := s.Prompts[n-1]
		top = append(top, kv("prompt", fmt.Sprintf("@%d %s", p.Step, clean(p.Prompt+p.Text))))
	}
	if e := s.LastError; e != nil {
		top = append(top, st.err.Render("last error: ")+clean(e.Message))
	}

	// The chart, peers and log share the rows left; footer takes one.
	free := m.height - len(top) - 1
	chartRows := min(12, max(0, free/2-1))
	var chartLines []string
	if chartRows >= 3 {
		chartLines = chart(s.Train, s.HeldOut, m.width, chartRows, st.train, st.held)
	}
	free -= len(chartLines)

	var peerLines []string
	if len(s.Peers) > 0 && free >= 3 {
		rows := min(len(s.Peers), max(1, free/2-1))
		// The address column takes what the fixed columns leave.
		addrW := min(48, max(8, m.width-54))
		row := "%-20s %-*s %10s %10s %9s"
		peerLines = append(peerLines, st.label.Render(fmt.Sprintf(row, "peer", addrW, "address", "in", "out", "latency")))
		for _, p := range s.Peers[:rows] {
			lat := "—"
			if p.Latency > 0 {
				lat = fmt.Sprintf("%.1fms", float64(p.Latency.Microseconds())/1000)
			}
			peerLines = append(peerLines, fmt.Sprintf(row,
				shorten(clean(p.ID), 20), addrW, shorten(clean(p.Address), addrW), progress.Bytes(p.BytesIn), progress.Bytes(p.BytesOut), lat))
		}
		if rows < len(s.Peers) {
			peerLines = append(peerLines, st.dim.Render(fmt.Sprintf("… %d more", s.PeerCount-rows)))
		}
	}
	free -= len(peerLines)

	var logLines []string
	if free >= 2 && len(s.Log) > 0 {
		logLines = append(logLines, st.label.Render("log"))
		n := min(len(s.Log), free-1)
		for _, l := range s.Log[len(s.Log)-n:] {
			line := l.Time.Format("15:04:05") + " " + fmt.Sprintf("%-5s", l.Level) + " " + clean(l.Message)
			switch l.Level {
			case "ERROR":
				line = st.err.Render(line)
			case "WARN":
				line = st.warn.Render(line)
			}
			logLines = append(logLines, line)
		}
	}

	lines := append(top, chartLines...)
	lines = append(lines, peerLines...)
	lines = append(lines, logLines...)
	return append(lines, st.dim.Render("q: leave the run and quit"))
}

// verificationLine sums up v in one line: this client's commitments by
// verdict, its replays as a verifier, the disputes involving it and its
// slot's stakes.
func verificationLine(v *status.Verification) string {
	c, r, d := v.Commitments, v.Replays, v.Disputes
	var unvested uint64
	for _, u := range v.Unvested {
		unvested += u
	}
	line := fmt.Sprintf("commits %d: %d MATCH %d MISMATCH %d NO_DATA %d unjudged · replays %d, %d posted · disputes %d open, %d settled · burned %d, unvested %d",
		c.Committed, c.Match, c.Mismatch, c.NoData, c.Unjudged, r.Run, r.Posted, d.Open, d.Transient+d.TrainerFault+d.AccuserFault+d.Unresolved+d.Refuted, v.Burned, unvested)
	if v.HasFault {
		line += " · AT FAULT"
	}
	return line
}

// faultLine tells the operator of a client found at fault what it means.
func faultLine(v *status.Verification) string {
	return fmt.Sprintf("FAULT in epoch %d: this client left the epoch without reward, was slashed (%d in all) and lost %d unvested points; every step it trains this epoch and the next is verified. If it runs honestly, its hardware or build does not replay bit for bit.",
		v.FaultEpoch, v.Slashed, v.Burned)
}

// clean keeps text from peers or the chain from moving the cursor or
// breaking the layout.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// shorten cuts s to n cells, marking the cut.
func shorten(s string, n int) string { return ansi.Truncate(s, n, "…") }

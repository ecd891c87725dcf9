package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/psyche-go/psyche/clients/trainer"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// tolerance is the loss target: at most this much above ddp.
const tolerance = 0.02

// mxTolerance is contract v3's target: an mx8 run's held-out loss at most
// this much above the same run's in fp32.
const mxTolerance = 0.01

// group is what a method is compared with ddp within: one model, client
// count and numeric contract.
type group struct {
	model   string
	clients int
	arith   string
}

func (c config) group() group { return group{c.model, c.clients, c.arith} }

// name describes g, with the model when the results hold several.
func (g group) name(models int) string {
	s := fmt.Sprintf("%d clients, %s", g.clients, g.arith)
	if models > 1 {
		s = g.model + ", " + s
	}
	return s
}

// groups returns the groups of results in order of appearance, and how many
// models they span.
func groups(results []result) (gs []group, models int) {
	seen, seenModel := map[group]bool{}, map[string]bool{}
	for _, r := range results {
		if g := r.group(); !seen[g] {
			seen[g] = true
			gs = append(gs, g)
		}
		if !seenModel[r.model] {
			seenModel[r.model] = true
			models++
		}
	}
	return gs, models
}

// baseline returns the best ddp held-out loss of each group.
func baseline(results []result) map[group]float64 {
	b := map[group]float64{}
	for _, r := range results {
		if r.m.kind == kindDDP {
			if v, ok := b[r.group()]; !ok || r.loss < v {
				b[r.group()] = r.loss
			}
		}
	}
	return b
}

// rel returns r's loss relative to ddp's in its group.
func rel(r result, base map[group]float64) (float64, bool) {
	b, ok := base[r.group()]
	if !ok {
		return 0, false
	}
	return r.loss/b - 1, true
}

// fp32Twin returns the run that differs from r only in being fp32.
func fp32Twin(results []result, r result) (result, bool) {
	want := r.config
	want.arith = trainer.ArithFP32
	for _, f := range results {
		if f.config == want {
			return f, true
		}
	}
	return result{}, false
}

// label names r's method, with DeMo's top-k, which sets its bytes.
func (r result) label() string {
	if r.m.kind == kindDeMo {
		return fmt.Sprintf("%s top-%d", r.m, r.topk)
	}
	return r.m.String()
}

func pct(v float64) string { return fmt.Sprintf("%+.1f%%", 100*v) }

// thousands formats v rounded to an integer with comma separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func bytesString(v float64) string {
	if v >= 100 {
		return thousands(v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// writeRows prints rows as columns, the first left-aligned, the others
// right-aligned.
func writeRows(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "%*s", width[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// diverged says whether r trained the model to worse than it started:
// held-out loss not finite or above the untrained model's.
func (r result) diverged() bool { return !(r.loss <= r.untrained) }

// writeTable prints one row per run (its "vs ddp" against the best ddp run
// of the same model, client count and contract), then the staleness cost of
// every delayed run against the same run without delay with the overlap
// target, then the runs that diverged, then mx8 against fp32 for every run
// made in both, then the compression targets.
func writeTable(w io.Writer, results []result) {
	base := baseline(results)
	gs, models := groups(results)
	rows := [][]string{{"method", "model", "clients", "arith", "top-k", "lr", "outer lr", "held-out", "vs ddp", "B/client/token", "fp32 ddp / this", "wall"}}
	for _, r := range results {
		topk, outer, vs := "-", "-", "-"
		if r.m.kind != kindDDP {
			topk = strconv.Itoa(r.topk)
		}
		if r.m.kind == kindLoCo {
			outer = strconv.FormatFloat(float64(r.outer), 'g', -1, 32)
		}
		if d, ok := rel(r, base); ok {
			vs = pct(d)
		}
		rows = append(rows, []string{r.m.String(), r.model, strconv.Itoa(r.clients), r.arith, topk, strconv.FormatFloat(float64(r.lr), 'g', -1, 32), outer,
			fmt.Sprintf("%.4f", r.loss), vs, bytesString(r.bytesPerToken), thousands(r.ratio) + "x", fmt.Sprintf("%.0f s", r.wall.Seconds())})
	}
	fmt.Fprintln(w)
	writeRows(w, rows)

	writeStaleness(w, results, models)
	writeStability(w, results, models)
	writeMX8(w, results)
	if len(base) > 0 {
		fmt.Fprintf(w, "\ntargets (held-out loss <= ddp %s):\n", pct(tolerance))
		targets(w, results, base, gs, models, kindLoCo, "SparseLoCo", 10000)
		targets(w, results, base, gs, models, kindDeMo, "DeMo", 1000)
	}
}

// writeStaleness prints every delayed run against the same run without
// delay, and which miss the overlap target (within tolerance of it).
func writeStaleness(w io.Writer, results []result, models int) {
	var stale, over []string
	for _, d := range results {
		if !d.m.delay {
			continue
		}
		undelayed := d.config
		undelayed.m.delay = false
		for _, r := range results {
			if r.config != undelayed {
				continue
			}
			name := fmt.Sprintf("%s, %s", r.label(), r.group().name(models))
			gap := d.loss/r.loss - 1
			stale = append(stale, fmt.Sprintf("  %s: %.4f -> %.4f (%s)", name, r.loss, d.loss, pct(gap)))
			if !(gap <= tolerance) {
				over = append(over, fmt.Sprintf("%s (%s)", name, pct(gap)))
			}
		}
	}
	if len(stale) == 0 {
		return
	}
	fmt.Fprintln(w, "\nstaleness (payload one round late, as the overlapping client), held-out loss without -> with delay:")
	for _, s := range stale {
		fmt.Fprintln(w, s)
	}
	if len(over) == 0 {
		fmt.Fprintf(w, "overlap target (with delay within %s of without): met by all %d\n", pct(tolerance), len(stale))
	} else {
		fmt.Fprintf(w, "overlap target (with delay within %s of without): not met by %d of %d: %s\n", pct(tolerance), len(over), len(stale),
			strings.Join(over, "; "))
	}
}

// writeStability prints the runs that diverged, and the client counts run.
func writeStability(w io.Writer, results []result, models int) {
	var bad []string
	var counts []int
	for _, r := range results {
		if !slices.Contains(counts, r.clients) {
			counts = append(counts, r.clients)
		}
		if r.diverged() {
			bad = append(bad, fmt.Sprintf("%s, %s (%.4f, untrained %.4f)", r.label(), r.group().name(models), r.loss, r.untrained))
		}
	}
	slices.Sort(counts)
	cs := make([]string, len(counts))
	for i, c := range counts {
		cs[i] = strconv.Itoa(c)
	}
	fmt.Fprintf(w, "\nstability (diverged: held-out loss above the untrained model's, or not finite), %d runs at %s clients: ",
		len(results), strings.Join(cs, ", "))
	if len(bad) == 0 {
		fmt.Fprintln(w, "none diverged")
	} else {
		fmt.Fprintf(w, "%d diverged: %s\n", len(bad), strings.Join(bad, "; "))
	}
}

// writeMX8 prints every mx8 run against the same run in fp32 (at equal
// tokens: the same batches and steps) and which exceed mxTolerance.
func writeMX8(w io.Writer, results []result) {
	rows := [][]string{{"method", "model", "clients", "lr", "fp32", "mx8", "gap"}}
	var over []string
	worst, worstName := math.Inf(-1), ""
	for _, r := range results {
		if r.arith != trainer.ArithMX8 {
			continue
		}
		f, ok := fp32Twin(results, r)
		if !ok {
			continue
		}
		gap := r.loss/f.loss - 1
		name := fmt.Sprintf("%s %s, %d clients, lr %g", r.model, r.label(), r.clients, r.lr)
		if gap > worst || math.IsNaN(gap) {
			worst, worstName = gap, name
		}
		if !(gap <= mxTolerance) {
			over = append(over, fmt.Sprintf("%s (%s)", name, pct(gap)))
		}
		rows = append(rows, []string{r.label(), r.model, strconv.Itoa(r.clients), strconv.FormatFloat(float64(r.lr), 'g', -1, 32),
			fmt.Sprintf("%.4f", f.loss), fmt.Sprintf("%.4f", r.loss), pct(gap)})
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintln(w, "\nmx8 against fp32 (the same run, at equal tokens), held-out loss:")
	writeRows(w, rows)
	fmt.Fprintf(w, "largest gap %s (%s); ", pct(worst), worstName)
	if len(over) == 0 {
		fmt.Fprintf(w, "every mx8 run within %s of fp32\n", pct(mxTolerance))
	} else {
		fmt.Fprintf(w, "above %s: %s\n", pct(mxTolerance), strings.Join(over, "; "))
	}
}

// targets prints, per group (model, client count, contract), the best loss
// among the rows of kind with at least ratio times fewer bytes than fp32
// ddp, and the best ratio among those within tolerance of ddp.
func targets(w io.Writer, results []result, base map[group]float64, gs []group, models int, kind int, name string, ratio float64) {
	for _, g := range gs {
		var bestLoss, bestRatio *result
		has := false
		for i := range results {
			r := &results[i]
			if r.m.kind != kind || r.group() != g {
				continue
			}
			has = true
			d, ok := rel(*r, base)
			if !ok {
				continue
			}
			if r.ratio >= ratio && (bestLoss == nil || r.loss < bestLoss.loss) {
				bestLoss = r
			}
			if d <= tolerance && (bestRatio == nil || r.ratio > bestRatio.ratio) {
				bestRatio = r
			}
		}
		verdict := "not met"
		if bestLoss != nil {
			if d, _ := rel(*bestLoss, base); d <= tolerance {
				verdict = "met"
			}
		}
		describe := func(r *result) string {
			if r == nil {
				return "none"
			}
			d, _ := rel(*r, base)
			return fmt.Sprintf("%s (%sx, %s)", r.label(), thousands(r.ratio), pct(d))
		}
		if !has {
			continue
		}
		fmt.Fprintf(w, "  %s, %s, >= %sx: %s; best loss at >= %sx: %s; best ratio within %s: %s\n",
			name, g.name(models), thousands(ratio), verdict, thousands(ratio), describe(bestLoss), pct(tolerance), describe(bestRatio))
	}
}

// writePlot draws held-out loss against bytes per client per token (log
// scale), one colour per group (client count and contract, and model when
// there are several), each point labelled with its method, a dashed line at
// ddp + 2% per group and dotted lines at 1,000x and 10,000x fewer bytes than
// fp32 ddp.
func writePlot(path string, results []result, ddpBytes float64) error {
	p := plot.New()
	p.Title.Text = "held-out loss against bytes sent per client per token trained"
	p.X.Label.Text = "bytes per client per token (log scale)"
	p.Y.Label.Text = "held-out loss"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	base := baseline(results)
	gs, models := groups(results)
	lo, hi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if !math.IsNaN(r.loss) && !math.IsInf(r.loss, 0) {
			lo, hi = math.Min(lo, r.bytesPerToken), math.Max(hi, r.bytesPerToken)
			ylo, yhi = math.Min(ylo, r.loss), math.Max(yhi, r.loss)
		}
	}
	if math.IsInf(lo, 1) {
		return fmt.Errorf("plot: no finite loss")
	}
	// A diverged run would squash the rest: losses beyond half again the
	// worst ddp loss are drawn at that ceiling, labelled with their value.
	ceiling := math.Inf(1)
	for _, b := range base {
		if c := 1.5 * b; math.IsInf(ceiling, 1) || c > ceiling {
			ceiling = c
		}
	}
	yhi = math.Min(yhi, ceiling)
	lo, hi = lo/2, hi*2
	for i, g := range gs {
		col := plotutil.Color(i)
		var xys plotter.XYs
		var labels []string
		for _, r := range results {
			if r.group() == g && !math.IsNaN(r.loss) && !math.IsInf(r.loss, 0) {
				label := r.label()
				if r.loss > ceiling {
					label = fmt.Sprintf("%s (%.1f, off scale)", label, r.loss)
				}
				xys = append(xys, plotter.XY{X: r.bytesPerToken, Y: math.Min(r.loss, ceiling)})
				labels = append(labels, label)
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.Color = col
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(3)
		p.Add(sc)
		p.Legend.Add(g.name(models), sc)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return err
		}
		for j := range lb.TextStyle {
			lb.TextStyle[j].Color = col
			lb.TextStyle[j].Font.Size = vg.Points(8)
		}
		lb.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(-3)}
		p.Add(lb)
		if b, ok := base[g]; ok {
			y := b * (1 + tolerance)
			ln, err := plotter.NewLine(plotter.XYs{{X: lo, Y: y}, {X: hi, Y: y}})
			if err != nil {
				return err
			}
			ln.Color, ln.Dashes = col, []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(ln)
			p.Legend.Add(fmt.Sprintf("ddp %s, %s", pct(tolerance), g.name(models)), ln)
			yhi = math.Max(yhi, y)
		}
	}
	for _, x := range []float64{1000, 10000} {
		if b := ddpBytes / x; b > lo && b < hi {
			ln, err := plotter.NewLine(plotter.XYs{{X: b, Y: ylo}, {X: b, Y: yhi}})
			if err != nil {
				return err
			}
			ln.Color, ln.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(1), vg.Points(3)}
			p.Add(ln)
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: b, Y: yhi}}, Labels: []string{thousands(x) + "x fewer"}})
			if err != nil {
				return err
			}
			lb.TextStyle[0].Font.Size = vg.Points(8)
			lb.Offset = vg.Point{X: vg.Points(3), Y: vg.Points(2)}
			p.Add(lb)
		}
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Max = yhi + 0.02*(yhi-ylo)
	c := vgimg.NewWith(vgimg.UseWH(10*vg.Inch, 6*vg.Inch), vgimg.UseDPI(96))
	m := vg.Points(12)
	p.Draw(draw.Crop(draw.New(c), m, -m, m, -m))
	return writePNG(path, c)
}

func writePNG(path string, c *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	return f.Close()
}

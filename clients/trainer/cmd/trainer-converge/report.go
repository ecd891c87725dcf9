package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// tolerance is the loss target: at most this much above ddp.
const tolerance = 0.02

// baseline returns the best ddp held-out loss for each client count.
func baseline(results []result) map[int]float64 {
	b := map[int]float64{}
	for _, r := range results {
		if r.m.kind == kindDDP {
			if v, ok := b[r.clients]; !ok || r.loss < v {
				b[r.clients] = r.loss
			}
		}
	}
	return b
}

// rel returns r's loss relative to ddp's with as many clients.
func rel(r result, base map[int]float64) (float64, bool) {
	b, ok := base[r.clients]
	if !ok {
		return 0, false
	}
	return r.loss/b - 1, true
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

// writeTable prints one row per run, then the staleness cost of every
// delayed run against the same run without delay, then the targets.
func writeTable(w io.Writer, results []result) {
	base := baseline(results)
	rows := [][]string{{"method", "clients", "top-k", "lr", "outer lr", "held-out", "vs ddp", "B/client/token", "fp32 ddp / this", "wall"}}
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
		rows = append(rows, []string{r.m.String(), strconv.Itoa(r.clients), topk, strconv.FormatFloat(float64(r.lr), 'g', -1, 32), outer,
			fmt.Sprintf("%.4f", r.loss), vs, bytesString(r.bytesPerToken), thousands(r.ratio) + "x", fmt.Sprintf("%.0f s", r.wall.Seconds())})
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	fmt.Fprintln(w)
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

	var stale []string
	for _, d := range results {
		if !d.m.delay {
			continue
		}
		undelayed := d.config
		undelayed.m.delay = false
		for _, r := range results {
			if r.config == undelayed {
				stale = append(stale, fmt.Sprintf("  %s, %d clients: %.4f -> %.4f (%s)", r.label(), r.clients, r.loss, d.loss, pct(d.loss/r.loss-1)))
			}
		}
	}
	if len(stale) > 0 {
		fmt.Fprintln(w, "\nstaleness (payload one round late, as the overlapping client), held-out loss without -> with delay:")
		for _, s := range stale {
			fmt.Fprintln(w, s)
		}
	}
	if len(base) > 0 {
		fmt.Fprintf(w, "\ntargets (held-out loss <= ddp %s):\n", pct(tolerance))
		targets(w, results, base, kindLoCo, "SparseLoCo", 10000)
		targets(w, results, base, kindDeMo, "DeMo", 1000)
	}
}

// targets prints, per client count, the best loss among the rows of kind
// with at least ratio times fewer bytes than fp32 ddp, and the best ratio
// among those within tolerance of ddp.
func targets(w io.Writer, results []result, base map[int]float64, kind int, name string, ratio float64) {
	var clients []int
	seen := map[int]bool{}
	for _, r := range results {
		if r.m.kind == kind && !seen[r.clients] {
			seen[r.clients] = true
			clients = append(clients, r.clients)
		}
	}
	for _, n := range clients {
		var bestLoss, bestRatio *result
		for i := range results {
			r := &results[i]
			d, ok := rel(*r, base)
			if r.m.kind != kind || r.clients != n || !ok {
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
		fmt.Fprintf(w, "  %s, %d clients, >= %sx: %s; best loss at >= %sx: %s; best ratio within %s: %s\n",
			name, n, thousands(ratio), verdict, thousands(ratio), describe(bestLoss), pct(tolerance), describe(bestRatio))
	}
}

// writePlot draws held-out loss against bytes per client per token (log
// scale), one colour per client count, each point labelled with its method,
// a dashed line at ddp + 2% per client count and dotted lines at 1,000x and
// 10,000x fewer bytes than fp32 ddp.
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
	var clients []int
	seen := map[int]bool{}
	lo, hi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if !seen[r.clients] {
			seen[r.clients] = true
			clients = append(clients, r.clients)
		}
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
	for i, n := range clients {
		col := plotutil.Color(i)
		var xys plotter.XYs
		var labels []string
		for _, r := range results {
			if r.clients == n && !math.IsNaN(r.loss) && !math.IsInf(r.loss, 0) {
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
		p.Legend.Add(fmt.Sprintf("%d clients", n), sc)
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
		if b, ok := base[n]; ok {
			y := b * (1 + tolerance)
			ln, err := plotter.NewLine(plotter.XYs{{X: lo, Y: y}, {X: hi, Y: y}})
			if err != nil {
				return err
			}
			ln.Color, ln.Dashes = col, []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(ln)
			p.Legend.Add(fmt.Sprintf("ddp %s, %d clients", pct(tolerance), n), ln)
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

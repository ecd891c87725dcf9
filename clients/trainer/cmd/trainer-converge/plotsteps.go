package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"github.com/psyche-go/psyche/clients/trainer"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// curveName names r's curve in the steps plot: its method (with DeMo's
// top-k), the client count and learning rates where the results hold
// several, and its contract.
func curveName(results []result, r result) string {
	clients, lrs := map[int]bool{}, map[[2]float32]bool{}
	for _, o := range results {
		clients[o.clients] = true
		if o.m.kind == r.m.kind {
			lrs[[2]float32{o.lr, o.outer}] = true
		}
	}
	s := r.label()
	if len(clients) > 1 {
		s += fmt.Sprintf(", %d clients", r.clients)
	}
	if len(lrs) > 1 {
		s += ", lr " + strconv.FormatFloat(float64(r.lr), 'g', -1, 32)
		if r.m.kind == kindLoCo {
			s += "/" + strconv.FormatFloat(float64(r.outer), 'g', -1, 32)
		}
	}
	return s + " " + r.arith
}

// writeStepsPlot draws, one column per model, held-out loss against global
// steps, one colour per run (the same across models) with fp32 solid and mx8
// dashed; and, when some runs were made in both contracts, below it the mx8
// run's held-out loss relative to fp32's at every evaluation, with the
// contract's +1% target dashed.
func writeStepsPlot(path string, results []result) error {
	var models []string
	seenModel := map[string]bool{}
	colour := map[config]int{} // by the run without model and contract
	for _, r := range results {
		if !seenModel[r.model] {
			seenModel[r.model] = true
			models = append(models, r.model)
		}
		k := r.config
		k.model, k.arith = "", ""
		if _, ok := colour[k]; !ok {
			colour[k] = len(colour)
		}
	}
	pairs := false
	for _, r := range results {
		if _, ok := fp32Twin(results, r); ok && r.arith == trainer.ArithMX8 {
			pairs = true
		}
	}
	rows := 1
	if pairs {
		rows = 2
	}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, len(models))
	}
	for j, model := range models {
		p := plot.New()
		p.Title.Text = model + ": held-out loss"
		p.X.Label.Text = "global steps"
		p.Y.Label.Text = "held-out loss"
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		// A diverged run would squash the rest: losses are drawn up to half
		// again the model's best final loss.
		best := math.Inf(1)
		for _, r := range results {
			if r.model == model && r.loss < best {
				best = r.loss
			}
		}
		ceiling := 1.5 * best
		for _, r := range results {
			if r.model != model {
				continue
			}
			k := r.config
			k.model, k.arith = "", ""
			var xys plotter.XYs
			for _, pt := range r.curve {
				if !math.IsNaN(pt.loss) && pt.loss <= ceiling {
					xys = append(xys, plotter.XY{X: float64(pt.step), Y: pt.loss})
				}
			}
			if len(xys) == 0 {
				continue
			}
			ln, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			ln.Color = plotutil.Color(colour[k])
			ln.Width = vg.Points(1.2)
			if r.arith == trainer.ArithMX8 {
				ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(ln)
			p.Legend.Add(curveName(results, r), ln)
		}
		grid[0][j] = p
		if !pairs {
			continue
		}
		g := plot.New()
		g.Title.Text = model + ": mx8 against fp32 (same run, equal tokens)"
		g.X.Label.Text = "global steps"
		g.Y.Label.Text = "held-out loss, mx8 / fp32 - 1 (%)"
		g.Add(plotter.NewGrid())
		xmax := 0.0
		// The first evaluations, early in training, can differ by tens of
		// percent: the axis spans the points from a fifth of the steps on,
		// 0 and the target, and earlier points beyond it are cut off.
		var all plotter.XYs
		ylo, yhi := 0.0, 100*mxTolerance
		for _, r := range results {
			f, ok := fp32Twin(results, r)
			if r.model != model || r.arith != trainer.ArithMX8 || !ok {
				continue
			}
			fp := map[int]float64{}
			for _, pt := range f.curve {
				fp[pt.step] = pt.loss
			}
			var xys plotter.XYs
			for _, pt := range r.curve {
				if b, ok := fp[pt.step]; ok && !math.IsNaN(pt.loss/b) && !math.IsInf(pt.loss/b, 0) {
					y := 100 * (pt.loss/b - 1)
					xys = append(xys, plotter.XY{X: float64(pt.step), Y: y})
					xmax = math.Max(xmax, float64(pt.step))
					if 5*pt.step >= r.curve[len(r.curve)-1].step {
						ylo, yhi = math.Min(ylo, y), math.Max(yhi, y)
					}
				}
			}
			if len(xys) == 0 {
				continue
			}
			all = append(all, xys...)
			k := r.config
			k.model, k.arith = "", ""
			ln, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			ln.Color, pts.Color = plotutil.Color(colour[k]), plotutil.Color(colour[k])
			pts.Shape = draw.CircleGlyph{}
			pts.Radius = vg.Points(2)
			g.Add(ln, pts)
		}
		for _, y := range []float64{0, 100 * mxTolerance} {
			ln, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: xmax, Y: y}})
			if err != nil {
				return err
			}
			ln.Color = color.Gray{Y: 120}
			if y != 0 {
				ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				g.Legend.Add(fmt.Sprintf("target %s", pct(mxTolerance)), ln)
			}
			g.Add(ln)
		}
		g.Legend.Top = true
		pad := 0.1 * (yhi - ylo)
		g.Y.Min, g.Y.Max = ylo-pad, yhi+pad
		for _, pt := range all {
			if pt.Y < g.Y.Min || pt.Y > g.Y.Max {
				g.Title.Text += "; earlier points off scale"
				break
			}
		}
		grid[1][j] = g
	}
	w, h := 6*vg.Inch*vg.Length(len(models)), 5*vg.Inch*vg.Length(rows)
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	m := vg.Points(12)
	dc := draw.Crop(draw.New(c), m, -m, m, -m)
	tiles := draw.Tiles{Rows: rows, Cols: len(models), PadX: vg.Points(20), PadY: vg.Points(20)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j, p := range grid[i] {
			p.Draw(canvases[i][j])
		}
	}
	return writePNG(path, c)
}

// Package lossplot draws loss curves (train and held-out loss versus step),
// and below them benchmark accuracies when there are any, as PNG files for
// the end-of-run summary.
package lossplot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/internal/atomicfile"
)

const dpi = 96

// Series is one named curve. Markers draws each point, which suits sparse
// series such as held-out evaluations. An Accuracy series (values in [0, 1])
// goes to a panel of its own under the losses.
type Series struct {
	Name     string
	Points   []status.LossPoint
	Markers  bool
	Accuracy bool
}

// FromSnapshot returns the train and held-out curves of a snapshot, and the
// acc of each benchmark task, names prefixed with prefix (e.g. a client
// name; may be empty).
func FromSnapshot(prefix string, s status.Snapshot) []Series {
	out := []Series{
		{Name: prefix + "train loss", Points: s.Train},
		{Name: prefix + "held-out loss", Points: s.HeldOut, Markers: true},
	}
	at := map[string]int{}
	for _, b := range s.Benchmarks {
		i, ok := at[b.Task]
		if !ok {
			i = len(out)
			at[b.Task] = i
			out = append(out, Series{Name: prefix + b.Task + " acc", Markers: true, Accuracy: true})
		}
		out[i].Points = append(out[i].Points, status.LossPoint{Step: b.Step, Loss: status.Float(b.Acc)})
	}
	return out
}

// Options set the image; zero fields take 960x540 pixels and no title.
type Options struct {
	Title         string
	Width, Height int // pixels
}

// Render draws the series as a PNG image. Non-finite losses (a diverged
// step) are left out of the curve; series with no finite point are left out
// of the plot, and at least one must remain.
func Render(series []Series, opts Options) ([]byte, error) {
	if opts.Width == 0 {
		opts.Width = 960
	}
	if opts.Height == 0 {
		opts.Height = 540
	}
	if opts.Width < 100 || opts.Height < 100 || opts.Width > 10000 || opts.Height > 10000 {
		return nil, fmt.Errorf("plot size %dx%d is outside 100..10000 pixels", opts.Width, opts.Height)
	}
	loss, acc := newPlot(), newPlot()
	loss.Title.Text = opts.Title
	loss.Y.Label.Text = "loss"
	acc.Y.Label.Text = "accuracy"
	acc.Y.Min, acc.Y.Max = 0, 1
	var lossDrawn, accDrawn int
	for i, s := range series {
		p, drawn := loss, &lossDrawn
		if s.Accuracy {
			p, drawn = acc, &accDrawn
		}
		ok, err := addSeries(p, s, plotutil.Color(i))
		if err != nil {
			return nil, err
		}
		if ok {
			*drawn++
		}
	}
	if lossDrawn+accDrawn == 0 {
		return nil, errors.New("no finite loss values to plot")
	}
	c := vgimg.NewWith(
		vgimg.UseWH(vg.Length(opts.Width)*vg.Inch/dpi, vg.Length(opts.Height)*vg.Inch/dpi),
		vgimg.UseDPI(dpi),
	)
	// A margin keeps the last tick label and the title off the image edge.
	m := vg.Points(12)
	dc := draw.Crop(draw.New(c), m, -m, m, -m)
	switch {
	case accDrawn == 0:
		loss.X.Label.Text = "step"
		loss.Draw(dc)
	case lossDrawn == 0:
		acc.Title.Text, acc.X.Label.Text = opts.Title, "step"
		acc.Draw(dc)
	default: // losses above, accuracies in the lower third, on one step axis
		acc.X.Label.Text = "step"
		lo, hi := math.Min(loss.X.Min, acc.X.Min), math.Max(loss.X.Max, acc.X.Max)
		loss.X.Min, acc.X.Min, loss.X.Max, acc.X.Max = lo, lo, hi, hi
		top, bottom := dc, dc
		split := dc.Min.Y + (dc.Max.Y-dc.Min.Y)/3
		top.Min.Y, bottom.Max.Y = split, split
		loss.Draw(top)
		acc.Draw(bottom)
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding plot: %w", err)
	}
	return buf.Bytes(), nil
}

func newPlot() *plot.Plot {
	p := plot.New()
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addSeries draws s's finite points on p; false when it has none.
func addSeries(p *plot.Plot, s Series, color color.Color) (bool, error) {
	xys := make(plotter.XYs, 0, len(s.Points))
	for _, pt := range s.Points {
		if l := float64(pt.Loss); !math.IsNaN(l) && !math.IsInf(l, 0) {
			xys = append(xys, plotter.XY{X: float64(pt.Step), Y: l})
		}
	}
	if len(xys) == 0 {
		return false, nil
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return false, fmt.Errorf("plotting %s: %w", s.Name, err)
	}
	line.Color = color
	line.Width = vg.Points(1.5)
	p.Add(line)
	p.Legend.Add(s.Name, line)
	if s.Markers || len(xys) == 1 {
		points.Color = color
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(2.5)
		p.Add(points)
	}
	return true, nil
}

// WritePNG renders the series to path atomically: the file is either the
// old one or the complete new plot, never a partial image.
func WritePNG(path string, series []Series, opts Options) error {
	img, err := Render(series, opts)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, img, 0o644)
}

// Package lossplot draws loss curves (train and held-out loss versus step)
// as PNG files for the end-of-run summary.
package lossplot

import (
	"bytes"
	"errors"
	"fmt"
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
// series such as held-out evaluations.
type Series struct {
	Name    string
	Points  []status.LossPoint
	Markers bool
}

// FromSnapshot returns the train and held-out curves of a snapshot, names
// prefixed with prefix (e.g. a client name; may be empty).
func FromSnapshot(prefix string, s status.Snapshot) []Series {
	return []Series{
		{Name: prefix + "train loss", Points: s.Train},
		{Name: prefix + "held-out loss", Points: s.HeldOut, Markers: true},
	}
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
	p := plot.New()
	p.Title.Text = opts.Title
	p.X.Label.Text = "step"
	p.Y.Label.Text = "loss"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range series {
		xys := make(plotter.XYs, 0, len(s.Points))
		for _, pt := range s.Points {
			if l := float64(pt.Loss); !math.IsNaN(l) && !math.IsInf(l, 0) {
				xys = append(xys, plotter.XY{X: float64(pt.Step), Y: l})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plotting %s: %w", s.Name, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.Name, line)
		if s.Markers || len(xys) == 1 {
			points.Color = plotutil.Color(i)
			points.Shape = draw.CircleGlyph{}
			points.Radius = vg.Points(2.5)
			p.Add(points)
		}
		drawn++
	}
	if drawn == 0 {
		return nil, errors.New("no finite loss values to plot")
	}
	c := vgimg.NewWith(
		vgimg.UseWH(vg.Length(opts.Width)*vg.Inch/dpi, vg.Length(opts.Height)*vg.Inch/dpi),
		vgimg.UseDPI(dpi),
	)
	// A margin keeps the last tick label and the title off the image edge.
	m := vg.Points(12)
	p.Draw(draw.Crop(draw.New(c), m, -m, m, -m))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding plot: %w", err)
	}
	return buf.Bytes(), nil
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

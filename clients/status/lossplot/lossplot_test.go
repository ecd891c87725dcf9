package lossplot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/psyche-go/psyche/clients/status"
)

func synthetic() []Series {
	var train, held []status.LossPoint
	for i := uint64(1); i <= 200; i++ {
		train = append(train, status.LossPoint{Step: i, Loss: status.Float(5.5*math.Exp(-float64(i)/60) + 1.5 + 0.1*math.Sin(float64(i)))})
		if i%20 == 0 {
			held = append(held, status.LossPoint{Step: i, Loss: status.Float(5.5*math.Exp(-float64(i)/60) + 1.7)})
		}
	}
	train[50].Loss = status.Float(math.NaN()) // a diverged step is skipped, not fatal
	return []Series{{Name: "train loss", Points: train}, {Name: "held-out loss", Points: held, Markers: true}}
}

func decode(t *testing.T, path string) image.Image {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss.png")
	if err := WritePNG(path, synthetic(), Options{Title: "demo run", Width: 800, Height: 450}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, path)
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 450 {
		t.Fatalf("size %v, want 800x450", b)
	}
	// Not blank: a fair share of non-white pixels, in both series' colours.
	colours := map[color.RGBA]int{}
	nonWhite := 0
	for y := 0; y < 450; y++ {
		for x := 0; x < 800; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
			colours[c]++
			if c != (color.RGBA{255, 255, 255, 255}) {
				nonWhite++
			}
		}
	}
	if nonWhite < 800*450/100 {
		t.Fatalf("only %d non-white pixels", nonWhite)
	}
	// plotutil's first two colours, reddish and greenish, must both show.
	var red, green int
	for c, n := range colours {
		if int(c.R)-int(c.G) > 80 && int(c.R)-int(c.B) > 80 {
			red += n
		}
		if int(c.G)-int(c.R) > 60 && int(c.G)-int(c.B) > 60 {
			green += n
		}
	}
	if red < 200 || green < 50 {
		t.Fatalf("series colours missing: %d red, %d green pixels", red, green)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestWritePNGFailuresLeaveTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loss.png")
	if err := WritePNG(path, synthetic(), Options{}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nan := status.Float(math.NaN())
	for _, tc := range []struct {
		name   string
		series []Series
		opts   Options
	}{
		{"no series", nil, Options{}},
		{"only non-finite", []Series{{Name: "x", Points: []status.LossPoint{{Step: 1, Loss: nan}}}}, Options{}},
		{"tiny", synthetic(), Options{Width: 10, Height: 10}},
		{"huge", synthetic(), Options{Width: 100000, Height: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := WritePNG(path, tc.series, tc.opts); err == nil {
				t.Fatal("accepted")
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatal("failed write changed the existing plot")
			}
		})
	}
	if err := WritePNG(filepath.Join(dir, "missing", "loss.png"), synthetic(), Options{}); err == nil {
		t.Fatal("wrote into a missing directory")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want just loss.png", len(entries))
	}
}

func TestFromSnapshot(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	for i := uint64(1); i <= 3; i++ {
		if err := rec.RecordStep(status.StepStat{Step: i, Loss: 3, Digest: "00"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.RecordEval(3, 3.2); err != nil {
		t.Fatal(err)
	}
	s := FromSnapshot("client-1 ", rec.Snapshot())
	if len(s) != 2 || s[0].Name != "client-1 train loss" || len(s[0].Points) != 3 || len(s[1].Points) != 1 || !s[1].Markers {
		t.Fatalf("%+v", s)
	}
	if _, err := Render(s, Options{}); err != nil {
		t.Fatal(err)
	}
}

// Benchmark accuracies go to a panel of their own, in the lower third.
func TestAccuracyPanel(t *testing.T) {
	rec := status.NewRecorder("r", status.Options{})
	for i := uint64(1); i <= 200; i++ {
		if err := rec.RecordStep(status.StepStat{Step: i, Loss: status.Float(4 - float64(i)/100), Digest: "00"}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if err := rec.RecordBenchmark(status.Benchmark{Step: i, Task: "builtin:sotu", Items: 10, Acc: float64(i) / 400, AccNorm: 0.3}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := FromSnapshot("", rec.Snapshot())
	if len(s) != 3 || s[2].Name != "builtin:sotu acc" || !s[2].Accuracy || len(s[2].Points) != 4 || s[2].Points[3].Loss != 0.5 {
		t.Fatalf("%+v", s)
	}
	img, err := Render(s, Options{Width: 600, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	im, err := png.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	// plotutil's third colour (blue) is the accuracy series': all of it lies
	// in the lower third.
	var upper, lower int
	for y := 0; y < 600; y++ {
		for x := 0; x < 600; x++ {
			r, g, b, _ := im.At(x, y).RGBA()
			if int(b>>8)-int(r>>8) > 60 && int(b>>8)-int(g>>8) > 30 {
				if y < 600*2/3-20 {
					upper++
				} else {
					lower++
				}
			}
		}
	}
	if lower < 50 || upper > 0 {
		t.Fatalf("accuracy pixels: %d in the lower third, %d above it", lower, upper)
	}
}

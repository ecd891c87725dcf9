package tui

import (
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/psyche-go/psyche/clients/status"
)

// labelWidth is the width of the y-axis labels, e.g. " 3.214 ┤".
const labelWidth = 8

// chart draws the train loss as a braille line (2x4 dots per cell) and the
// held-out losses as markers, with y labels on the left and the step range
// below. It returns height+1 lines of at most width cells, or nothing when
// there is no room or no finite data.
func chart(train, heldOut []status.LossPoint, width, height int, trainStyle, heldStyle lipgloss.Style) []string {
	plotW := width - labelWidth
	if plotW < 4 || height < 2 {
		return nil
	}
	minS, maxS := uint64(math.MaxUint64), uint64(0)
	minL, maxL := math.Inf(1), math.Inf(-1)
	for _, series := range [][]status.LossPoint{train, heldOut} {
		for _, p := range series {
			l := float64(p.Loss)
			if math.IsNaN(l) || math.IsInf(l, 0) {
				continue
			}
			minS, maxS = min(minS, p.Step), max(maxS, p.Step)
			minL, maxL = min(minL, l), max(maxL, l)
		}
	}
	if maxS < minS {
		return nil
	}
	if maxL-minL < 1e-9 { // flat curve: give it a band to sit in
		minL, maxL = minL-0.5, maxL+0.5
	}
	dotsX, dotsY := plotW*2, height*4
	x := func(step uint64) int {
		if maxS == minS {
			return dotsX / 2
		}
		return int(math.Round(float64(step-minS) / float64(maxS-minS) * float64(dotsX-1)))
	}
	y := func(l float64) int { // 0 at the top
		return int(math.Round((maxL - l) / (maxL - minL) * float64(dotsY-1)))
	}

	dots := make([][]uint8, height) // braille bit masks per cell
	for i := range dots {
		dots[i] = make([]uint8, plotW)
	}
	set := func(dx, dy int) {
		// Braille dot numbering: left column bits 0,1,2,6; right column 3,4,5,7.
		bits := [2][4]uint8{{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}}
		dots[dy/4][dx/2] |= bits[dx%2][dy%4]
	}
	prevX, prevY, have := 0, 0, false
	for _, p := range train {
		l := float64(p.Loss)
		if math.IsNaN(l) || math.IsInf(l, 0) {
			have = false // a gap in the line where the loss diverged
			continue
		}
		cx, cy := x(p.Step), y(l)
		if have {
			line(prevX, prevY, cx, cy, set)
		} else {
			set(cx, cy)
		}
		prevX, prevY, have = cx, cy, true
	}
	markers := map[[2]int]bool{}
	for _, p := range heldOut {
		l := float64(p.Loss)
		if math.IsNaN(l) || math.IsInf(l, 0) {
			continue
		}
		markers[[2]int{y(l) / 4, x(p.Step) / 2}] = true
	}

	out := make([]string, 0, height+1)
	for row := 0; row < height; row++ {
		var lbl string
		switch row {
		case 0:
			lbl = fmt.Sprintf("%7.3f┤", maxL)
		case height - 1:
			lbl = fmt.Sprintf("%7.3f┤", minL)
		default:
			lbl = strings.Repeat(" ", labelWidth-1) + "│"
		}
		var b, run strings.Builder // run: braille cells styled together
		flush := func() {
			if run.Len() > 0 {
				b.WriteString(trainStyle.Render(run.String()))
				run.Reset()
			}
		}
		b.WriteString(lbl)
		for col := 0; col < plotW; col++ {
			switch {
			case markers[[2]int{row, col}]:
				flush()
				b.WriteString(heldStyle.Render("●"))
			case dots[row][col] != 0:
				run.WriteRune(rune(0x2800 + int(dots[row][col])))
			default:
				run.WriteRune(' ')
			}
		}
		flush()
		out = append(out, b.String())
	}
	lo, hi := fmt.Sprintf("step %d", minS), fmt.Sprintf("%d", maxS)
	gap := plotW - len(lo) - len(hi)
	if gap < 1 {
		out = append(out, strings.Repeat(" ", labelWidth)+lo)
	} else {
		out = append(out, strings.Repeat(" ", labelWidth)+lo+strings.Repeat(" ", gap)+hi)
	}
	return out
}

// line sets the dots from (x0,y0) to (x1,y1) (Bresenham).
func line(x0, y0, x1, y1 int, set func(x, y int)) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		set(x0, y0)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// sparkline draws values as block heights, one cell each (the last width).
func sparkline(values []float64, width int) string {
	if width <= 0 || len(values) == 0 {
		return ""
	}
	if len(values) > width {
		values = values[len(values)-width:]
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	blocks := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for _, v := range values {
		i := len(blocks) - 1
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(blocks)-1))
		}
		b.WriteRune(blocks[i])
	}
	return b.String()
}

package main

import (
	"cmp"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// series is one line of the plot: points (N, seconds), N increasing.
type series struct {
	name   string
	color  color.RGBA
	dashed bool
	points [][2]float64
	// lost marks points whose mean lag is infinite (some tokens were never shown): drawn hollow
	// in the band above the plot area.
	lost map[float64]bool
}

var seriesColors = map[string]color.RGBA{
	"fair":            {0, 90, 200, 255},
	"every-1s":        {230, 120, 0, 255},
	"every-20-chunks": {190, 0, 120, 255},
}

var extraColors = []color.RGBA{{0, 150, 60, 255}, {200, 30, 30, 255}, {120, 60, 200, 255}, {0, 150, 160, 255}}

// lagSeries turns the results into one series per policy and number of replicas (mean visible
// lag, in seconds, against N, never-shown tokens counted until the end of the run) and the best
// possible mean lag.
func lagSeries(results []*result) []series {
	var order []string
	points := map[string][][2]float64{}
	lost := map[string]map[float64]bool{}
	best := series{name: "best possible", color: color.RGBA{90, 90, 90, 255}, dashed: true}
	for _, r := range results {
		if !slices.ContainsFunc(best.points, func(p [2]float64) bool { return p[0] == float64(r.n) }) {
			best.points = append(best.points, [2]float64{float64(r.n), r.best.Seconds()})
		}
		m, finite := r.lagMean()
		if len(r.lags) == 0 && r.hidden == 0 {
			continue // nothing streamed
		}
		name := r.policy
		if r.replicas > 1 {
			name += fmt.Sprintf(", %d replicas", r.replicas)
			if r.noRedis {
				name += " without Redis"
			}
		}
		if _, ok := points[name]; !ok {
			order = append(order, name)
			lost[name] = map[float64]bool{}
		}
		if !finite {
			lost[name][float64(r.n)] = true
			m = 0
		}
		points[name] = append(points[name], [2]float64{float64(r.n), m.Seconds()})
	}
	var out []series
	for i, name := range order {
		c, ok := seriesColors[name]
		if !ok { // several replicas: colours apart from the policies'
			c = extraColors[i%len(extraColors)]
		}
		out = append(out, series{name: name, color: c, points: points[name], lost: lost[name]})
	}
	out = append(out, best)
	for i := range out {
		slices.SortFunc(out[i].points, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	}
	return out
}

// writePlot draws mean visible lag against N (both axes logarithmic) for every policy and the
// best possible, and writes it as a PNG.
func writePlot(path string, results []*result, set settings) error {
	img := drawPlot(lagSeries(results), fmt.Sprintf("CHAT.UPDATE %g/MIN, BURST %d; ANSWERS OF %d TOKENS AT %d/S; TIME SCALE %g",
		set.updatesPerMin, set.burst, set.tokens, int(math.Round(float64(time.Second)/float64(set.tokenInterval))), set.scale))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Plot geometry.
const (
	plotW, plotH                       = 1000, 620
	marginL, marginR, marginT, marginB = 90, 270, 100, 70
	px                                 = 2 // font scale
)

func drawPlot(ss []series, subtitle string) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	white := color.RGBA{255, 255, 255, 255}
	ink := color.RGBA{30, 30, 30, 255}
	grid := color.RGBA{225, 225, 225, 255}
	fillRect(img, 0, 0, plotW, plotH, white)

	xs, ys := []float64{}, []float64{}
	anyLost := false
	for _, s := range ss {
		for _, p := range s.points {
			switch {
			case s.lost[p[0]]:
				xs, anyLost = append(xs, p[0]), true
			case p[0] > 0 && p[1] > 0:
				xs, ys = append(xs, p[0]), append(ys, p[1])
			}
		}
	}
	if len(ys) == 0 {
		drawText(img, marginL, plotH/2, "NO DATA", px, ink)
		return img
	}
	x0, x1 := logBounds(slices.Min(xs), slices.Max(xs))
	y0, y1 := logBounds(slices.Min(ys), slices.Max(ys))
	left, right, top, bottom := marginL, plotW-marginR, marginT, plotH-marginB
	lostY := top + 8 // the band of infinite means (text lost), above the finite values
	finiteTop := top + 36
	mapX := func(v float64) int {
		return left + int(math.Round((math.Log10(v)-x0)/(x1-x0)*float64(right-left)))
	}
	mapY := func(v float64) int {
		return bottom - int(math.Round((math.Log10(v)-y0)/(y1-y0)*float64(bottom-finiteTop)))
	}

	// Grid and ticks: x at every N measured, y at 1-2-5 steps.
	var ns []float64
	for _, x := range xs {
		if !slices.Contains(ns, x) {
			ns = append(ns, x)
		}
	}
	for _, n := range ns {
		x := mapX(n)
		fillRect(img, x, top, 1, bottom-top, grid)
		label := strconv.Itoa(int(n))
		drawText(img, x-textWidth(label, px)/2, bottom+10, label, px, ink)
	}
	for e := math.Floor(y0); e <= math.Ceil(y1); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) < y0-1e-9 || math.Log10(v) > y1+1e-9 {
				continue
			}
			y := mapY(v)
			fillRect(img, left, y, right-left, 1, grid)
			label := strconv.FormatFloat(v, 'g', -1, 64)
			drawText(img, left-10-textWidth(label, px), y-glyphH*px/2, label, px, ink)
		}
	}
	if anyLost {
		fillRect(img, left, lostY, right-left, 1, grid)
		drawText(img, left-10-textWidth("LOST", px), lostY-glyphH*px/2, "LOST", px, ink)
	}
	fillRect(img, left, top, 2, bottom-top+1, ink)
	fillRect(img, left, bottom, right-left, 2, ink)

	for _, s := range ss {
		var prev image.Point
		drawn := false
		for _, p := range s.points {
			var pt image.Point
			switch {
			case s.lost[p[0]]:
				pt = image.Point{mapX(p[0]), lostY}
			case p[0] > 0 && p[1] > 0:
				pt = image.Point{mapX(p[0]), mapY(p[1])}
			default:
				continue
			}
			if drawn {
				drawLine(img, prev, pt, s.color, s.dashed)
			}
			fillRect(img, pt.X-4, pt.Y-4, 9, 9, s.color)
			if s.lost[p[0]] {
				fillRect(img, pt.X-2, pt.Y-2, 5, 5, white)
			}
			prev, drawn = pt, true
		}
	}

	drawText(img, 10, 12, "MEAN VISIBLE LAG AGAINST N", px+1, ink)
	drawText(img, 10, 42, subtitle, px, ink)
	drawText(img, 10, top-22, "MEAN LAG, S (LOG)", px, ink)
	xl := "N: CONVERSATIONS STARTED TOGETHER (LOG)"
	drawText(img, left+(right-left-textWidth(xl, px))/2, plotH-30, xl, px, ink)
	ly := top + 10
	for _, s := range ss {
		drawLine(img, image.Point{right + 20, ly + 7}, image.Point{right + 60, ly + 7}, s.color, s.dashed)
		fillRect(img, right+37, ly+4, 7, 7, s.color)
		drawText(img, right+70, ly, s.name, px, ink)
		ly += 30
	}
	if anyLost {
		ly += 10
		fillRect(img, right+36, ly+3, 9, 9, ink)
		fillRect(img, right+38, ly+5, 5, 5, white)
		drawText(img, right+56, ly, "LOST: TEXT NEVER", px, ink)
		drawText(img, right+56, ly+20, "SHOWN, MEAN LAG", px, ink)
		drawText(img, right+56, ly+40, "INFINITE", px, ink)
	}
	return img
}

// logBounds returns log10 bounds around [lo, hi] with some room, at least a factor 4 apart.
func logBounds(lo, hi float64) (float64, float64) {
	a, b := math.Log10(lo)-0.15, math.Log10(hi)+0.15
	if b-a < 0.6 {
		mid := (a + b) / 2
		a, b = mid-0.3, mid+0.3
	}
	return a, b
}

// drawLine draws a 3-pixel-wide line from a to b, dashed if asked (8 pixels on, 6 off).
func drawLine(img *image.RGBA, a, b image.Point, c color.Color, dashed bool) {
	dx, dy := b.X-a.X, b.Y-a.Y
	steps := max(abs(dx), abs(dy), 1)
	for i := 0; i <= steps; i++ {
		if dashed && i%14 >= 8 {
			continue
		}
		x := a.X + int(math.Round(float64(dx*i)/float64(steps)))
		y := a.Y + int(math.Round(float64(dy*i)/float64(steps)))
		fillRect(img, x-1, y-1, 3, 3, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

package main

import (
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestLagSeries(t *testing.T) {
	results := []*result{
		{n: 10, policy: "fair", lags: ms(6000), best: 6 * time.Second},
		{n: 10, policy: "every-1s", lags: ms(20000), best: 6 * time.Second},
		{n: 1, policy: "fair", lags: ms(500, 700), best: 600 * time.Millisecond},
		{n: 1, policy: "every-1s", best: 600 * time.Millisecond}, // nothing sent: no point
		{n: 20, policy: "every-1s", lags: ms(30000), hidden: 1, best: 12 * time.Second},
	}
	got := lagSeries(results)
	want := []series{
		{name: "fair", points: [][2]float64{{1, 0.6}, {10, 6}}},
		{name: "every-1s", points: [][2]float64{{10, 20}, {20, 0}}, lost: map[float64]bool{20: true}},
		{name: "best possible", dashed: true, points: [][2]float64{{1, 0.6}, {10, 6}, {20, 12}}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].name != want[i].name || got[i].dashed != want[i].dashed || len(got[i].points) != len(want[i].points) ||
			len(got[i].lost) != len(want[i].lost) {
			t.Fatalf("series %d = %+v, want %+v", i, got[i], want[i])
		}
		for j, p := range want[i].points {
			if d := got[i].points[j][1] - p[1]; got[i].points[j][0] != p[0] || d > 1e-9 || d < -1e-9 {
				t.Errorf("series %s point %d = %v, want %v", want[i].name, j, got[i].points[j], p)
			}
			if got[i].lost[p[0]] != want[i].lost[p[0]] {
				t.Errorf("series %s point %d: lost %v, want %v", want[i].name, j, got[i].lost[p[0]], want[i].lost[p[0]])
			}
		}
	}
}

// TestLagSeriesReplicas: results of several replicas are series of their own, in colours apart from
// the policies'.
func TestLagSeriesReplicas(t *testing.T) {
	results := []*result{
		{n: 50, policy: "fair", replicas: 1, lags: ms(9000), best: 30 * time.Second},
		{n: 50, policy: "fair", replicas: 2, lags: ms(10000), best: 30 * time.Second},
		{n: 50, policy: "fair", replicas: 2, noRedis: true, lags: ms(12000), best: 30 * time.Second},
	}
	got := lagSeries(results)
	var names []string
	for _, s := range got {
		names = append(names, s.name)
	}
	want := []string{"fair", "fair, 2 replicas", "fair, 2 replicas without Redis", "best possible"}
	if !slices.Equal(names, want) {
		t.Fatalf("series %q, want %q", names, want)
	}
	if got[1].color == got[0].color || got[2].color == got[1].color || got[1].color.A == 0 {
		t.Errorf("colours %v, %v, %v: want three apart, none transparent", got[0].color, got[1].color, got[2].color)
	}
}

// TestWritePlot draws a plot and checks that each series' colour is where its points are.
func TestWritePlot(t *testing.T) {
	results := []*result{
		{n: 1, policy: "fair", lags: ms(600), best: 600 * time.Millisecond},
		{n: 200, policy: "fair", lags: ms(120000), best: 2 * time.Minute},
		{n: 1, policy: "every-20-chunks", lags: ms(3000), best: 600 * time.Millisecond},
		{n: 200, policy: "every-20-chunks", lags: ms(300000), hidden: 3, best: 2 * time.Minute},
	}
	path := filepath.Join(t.TempDir(), "lag.png")
	if err := writePlot(path, results, settings{updatesPerMin: 50, burst: 5, tokens: 400, tokenInterval: 25 * time.Millisecond, scale: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Fatalf("size %v, want %dx%d", b, plotW, plotH)
	}
	count := func(c color.RGBA) int {
		n := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
					n++
				}
			}
		}
		return n
	}
	for _, name := range []string{"fair", "every-20-chunks"} {
		if n := count(seriesColors[name]); n < 200 {
			t.Errorf("%s: %d pixels of its colour, want a line and markers", name, n)
		}
	}
	if n := count(seriesColors["every-1s"]); n != 0 {
		t.Errorf("every-1s has no results but %d pixels of its colour", n)
	}
	if dir := os.Getenv("BENCH_PLOT_DIR"); dir != "" { // to look at it
		data, _ := os.ReadFile(path)
		_ = os.WriteFile(filepath.Join(dir, "lag-test.png"), data, 0o644)
	}
}

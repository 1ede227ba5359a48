package media

import (
	"image"
	"image/draw"
	"math"

	xdraw "golang.org/x/image/draw"
)

// scale resamples src into dst with the Catmull-Rom kernel (x/image/draw's), a source row at a
// time: each row is converted to RGBA and scaled across into a small ring of rows, and each row of
// dst is the weighted sum of the ring's rows under it. What it holds besides src and dst is one
// source row and as many scaled rows as the kernel spans, where x/image/draw's Scale holds a
// buffer of dst's width by src's height (32 bytes each: 200 MB for a 12-megapixel photo).
func scale(dst *image.RGBA, src image.Image) {
	sb := src.Bounds()
	dw, dh := dst.Rect.Dx(), dst.Rect.Dy()
	xs, ys := taps(sb.Dx(), dw), taps(sb.Dy(), dh)
	row := image.NewRGBA(image.Rect(0, 0, sb.Dx(), 1))
	span := 0
	for _, t := range ys {
		span = max(span, len(t.w))
	}
	ring := make([][]float32, span)
	ringY := make([]int, span)
	for i := range ring {
		ring[i], ringY[i] = make([]float32, 4*dw), -1
	}
	across := func(sy int) []float32 {
		k := sy % span
		if ringY[k] != sy {
			draw.Draw(row, row.Rect, src, image.Pt(sb.Min.X, sb.Min.Y+sy), draw.Src)
			resampleRow(ring[k], row.Pix, xs)
			ringY[k] = sy
		}
		return ring[k]
	}
	acc := make([]float32, 4*dw)
	for y, t := range ys {
		clear(acc)
		for k, w := range t.w {
			for i, v := range across(t.first + k) {
				acc[i] += w * v
			}
		}
		out := dst.Pix[y*dst.Stride : y*dst.Stride+4*dw]
		for i := 0; i < len(acc); i += 4 {
			a := min(max(acc[i+3], 0), 255)
			out[i], out[i+1], out[i+2], out[i+3] = clamp(acc[i], a), clamp(acc[i+1], a), clamp(acc[i+2], a), clamp(a, a)
		}
	}
}

// resampleRow scales one row of RGBA bytes across, into 4 floats a pixel.
func resampleRow(out []float32, pix []uint8, xs []tap) {
	for x, t := range xs {
		var r, g, b, a float32
		p := pix[4*t.first:]
		for k, w := range t.w {
			r += w * float32(p[4*k])
			g += w * float32(p[4*k+1])
			b += w * float32(p[4*k+2])
			a += w * float32(p[4*k+3])
		}
		out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = r, g, b, a
	}
}

// clamp rounds v into [0, hi]: the kernel's negative lobes overshoot at sharp edges, and a
// premultiplied colour may not exceed its alpha.
func clamp(v, hi float32) uint8 {
	return uint8(min(max(v, 0), hi) + 0.5)
}

// tap is what one output pixel takes of a source line: the weights of consecutive source pixels
// from first, summing to 1.
type tap struct {
	first int
	w     []float32
}

// taps are the Catmull-Rom weights of n source pixels for each of m output pixels (m <= n: a
// downscale, where the kernel is widened by n/m, as x/image/draw does), cut at the line's ends.
func taps(n, m int) []tap {
	k := xdraw.CatmullRom
	scale := max(float64(n)/float64(m), 1)
	half := k.Support * scale
	out := make([]tap, m)
	for i := range out {
		c := (float64(i)+0.5)*scale - 0.5
		lo := max(0, int(math.Ceil(c-half)))
		hi := min(n-1, int(math.Floor(c+half)))
		t := tap{first: lo, w: make([]float32, 0, hi-lo+1)}
		var sum float64
		ws := make([]float64, 0, hi-lo+1)
		for j := lo; j <= hi; j++ {
			w := 0.0
			if d := math.Abs(c-float64(j)) / scale; d < k.Support {
				w = k.At(d)
			}
			ws = append(ws, w)
			sum += w
		}
		for _, w := range ws {
			t.w = append(t.w, float32(w/sum))
		}
		out[i] = t
	}
	return out
}

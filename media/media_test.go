package media

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"testing"
)

func solid(w, h int, c color.Color) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	return img
}

func pngOf(w, h int) []byte {
	var b bytes.Buffer
	png.Encode(&b, solid(w, h, color.RGBA{200, 30, 30, 255}))
	return b.Bytes()
}

func jpegOf(w, h int) []byte {
	var b bytes.Buffer
	jpeg.Encode(&b, solid(w, h, color.RGBA{30, 200, 30, 255}), nil)
	return b.Bytes()
}

// animated is a two-frame GIF: red, then blue.
func animated(w, h int) []byte {
	frame := func(c color.Color) *image.Paletted {
		p := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
		for y := range h {
			for x := range w {
				p.Set(x, y, c)
			}
		}
		return p
	}
	var b bytes.Buffer
	gif.EncodeAll(&b, &gif.GIF{Image: []*image.Paletted{frame(color.RGBA{255, 0, 0, 255}), frame(color.RGBA{0, 0, 255, 255})}, Delay: []int{10, 10}})
	return b.Bytes()
}

func webpFile(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/blue-purple-pink.lossy.webp")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		name         string
		data         func(testing.TB) []byte
		maxSide      int
		wantMIME     string
		wantW, wantH int
		asIs         bool // the bytes as they came
		wantFirstRed bool // an animated GIF: its first frame
	}{
		{"small png as is", func(testing.TB) []byte { return pngOf(300, 200) }, 2048, "image/png", 300, 200, true, false},
		{"wide png scaled", func(testing.TB) []byte { return pngOf(4000, 1000) }, 2048, "image/png", 2048, 512, false, false},
		{"tall jpeg scaled, stays jpeg", func(testing.TB) []byte { return jpegOf(500, 3000) }, 1000, "image/jpeg", 167, 1000, false, false},
		{"jpeg as is", func(testing.TB) []byte { return jpegOf(640, 480) }, 2048, "image/jpeg", 640, 480, true, false},
		{"animated gif: first frame as png", func(testing.TB) []byte { return animated(40, 30) }, 2048, "image/png", 40, 30, false, true},
		{"webp as png", webpFile, 2048, "image/png", 0, 0, false, false},
		{"no limit", func(testing.TB) []byte { return pngOf(3000, 10) }, 0, "image/png", 3000, 10, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.data(t)
			img, err := NewPreparer(2).Prepare(t.Context(), bytesOf(in), tc.maxSide)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if img.MIMEType != tc.wantMIME || (tc.wantW > 0 && (img.Width != tc.wantW || img.Height != tc.wantH)) {
				t.Errorf("got %s %dx%d, want %s %dx%d", img.MIMEType, img.Width, img.Height, tc.wantMIME, tc.wantW, tc.wantH)
			}
			if same := bytes.Equal(img.Data, in); same != tc.asIs {
				t.Errorf("data passed through: %v, want %v", same, tc.asIs)
			}
			out, format, err := image.Decode(bytes.NewReader(img.Data))
			if err != nil || "image/"+format != img.MIMEType || out.Bounds().Dx() != img.Width || out.Bounds().Dy() != img.Height {
				t.Fatalf("output decodes as %s %v, %v; want %s %dx%d", format, out.Bounds(), err, img.MIMEType, img.Width, img.Height)
			}
			if tc.wantFirstRed {
				if r, _, b, _ := out.At(1, 1).RGBA(); r>>8 < 200 || b>>8 > 50 {
					t.Errorf("pixel = %v, want the first frame's red", out.At(1, 1))
				}
			}
		})
	}
}

func TestPrepareRefuses(t *testing.T) {
	bomb := []byte("GIF89a\xff\xff\xff\xff\x00\x00\x00,\x00\x00\x00\x00\xff\xff\xff\xff\x00\x02\x02D\x01\x00;")
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"text", []byte("hello, world"), ErrUnsupported},
		{"pdf", []byte("%PDF-1.7\n"), ErrUnsupported},
		{"65535×65535 gif", bomb, ErrTooLarge},
		{"20000×20000 png", pngHeader(20000, 20000, 6, 0), ErrTooLarge},
		{"6300×6300 png (160 MB decoded)", pngHeader(6300, 6300, 6, 0), ErrTooLarge},
		{"16-bit 4200×3000 png (101 MB decoded)", pngHeader(4200, 3000, 6, 16), ErrTooLarge},
		{"48-megapixel progressive jpeg (360 MB decoded)", jpegHeader(t, 8000, 6000, true), ErrTooLarge},
	} {
		if _, err := NewPreparer(2).Prepare(t.Context(), bytesOf(tc.data), 2048); !errors.Is(err, tc.want) {
			t.Errorf("%s: Prepare = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestFitBounds: whatever the size, the result's longest side is within the limit, no side is
// 0 or larger than it was, and the proportions are kept to within rounding.
func TestFitBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		w, h, side := 1+r.IntN(20_000), 1+r.IntN(20_000), r.IntN(4096)
		if r.IntN(10) == 0 {
			h = 1 + r.IntN(3) // slivers
		}
		checkFit(t, w, h, side)
	}
}

func checkFit(t testing.TB, w, h, side int) {
	fw, fh := Fit(w, h, side)
	switch {
	case fw < 1 || fh < 1 || fw > w || fh > h:
		t.Fatalf("Fit(%d, %d, %d) = %d×%d", w, h, side, fw, fh)
	case side > 0 && max(fw, fh) > side:
		t.Fatalf("Fit(%d, %d, %d) = %d×%d: over the side", w, h, side, fw, fh)
	case side > 0 && max(w, h) > side && max(fw, fh) != side:
		t.Fatalf("Fit(%d, %d, %d) = %d×%d: smaller than needed", w, h, side, fw, fh)
	case fw != w || fh != h:
		// proportions: fw/fh ≈ w/h within one pixel of rounding on the short side
		if w >= h && absDiff(int64(fh)*int64(w), int64(h)*int64(fw)) > int64(w) {
			t.Fatalf("Fit(%d, %d, %d) = %d×%d: proportions lost", w, h, side, fw, fh)
		}
		if h > w && absDiff(int64(fw)*int64(h), int64(w)*int64(fh)) > int64(h) {
			t.Fatalf("Fit(%d, %d, %d) = %d×%d: proportions lost", w, h, side, fw, fh)
		}
	}
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// FuzzPrepare: any bytes either fail with an error or give a decodable PNG or JPEG within the
// side limit.
func FuzzPrepare(f *testing.F) {
	f.Add(pngOf(30, 20), 16)
	f.Add(jpegOf(20, 30), 8)
	f.Add(animated(9, 9), 4)
	f.Add(webpFile(f), 100)
	f.Fuzz(func(t *testing.T, data []byte, side int) {
		side = side%64 + 1
		if side < 1 {
			side = -side + 1
		}
		img, err := NewPreparer(1).Prepare(t.Context(), bytesOf(data), side)
		if err != nil {
			return
		}
		if max(img.Width, img.Height) > side {
			t.Fatalf("%d×%d over side %d", img.Width, img.Height, side)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil || "image/"+format != img.MIMEType || cfg.Width != img.Width || cfg.Height != img.Height {
			t.Fatalf("output %s %dx%d (%v), claims %s %dx%d", format, cfg.Width, cfg.Height, err, img.MIMEType, img.Width, img.Height)
		}
	})
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct{ w, h, want int }{
		{1024, 1024, 765}, // OpenAI's examples
		{2048, 4096, 1105},
		{512, 512, 255},
		{100, 100, 255},
		{0, 0, 85},
	} {
		if got := Tokens(tc.w, tc.h); got != tc.want {
			t.Errorf("Tokens(%d, %d) = %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
}

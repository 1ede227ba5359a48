package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/jpeg"
	"runtime"
	"testing"

	xdraw "golang.org/x/image/draw"
)

// pngHeader is the start of a PNG that declares w×h pixels of the given colour type (6: RGBA) and
// bit depth (0: 8): all DecodeConfig reads. A 150 KB file may declare as much.
func pngHeader(w, h int, colorType, depth byte) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = max(depth, 8), colorType
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	b = append(b, ihdr...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte("IHDR"), ihdr...)))
	return b
}

// jpegHeader is a small photo-like JPEG (4:2:0, as image/jpeg and phones write them) whose frame
// header is made to declare w×h pixels, and to be progressive when asked.
func jpegHeader(t testing.TB, w, h int, progressive bool) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewYCbCr(image.Rect(0, 0, 16, 16), image.YCbCrSubsampleRatio420), nil); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	i := bytes.Index(data, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0 in image/jpeg's output")
	}
	if progressive {
		data[i+1] = 0xc2
	}
	binary.BigEndian.PutUint16(data[i+5:], uint16(h))
	binary.BigEndian.PutUint16(data[i+7:], uint16(w))
	return data
}

// photo is a w×h JPEG with detail in it (a flat picture compresses to nothing and decodes fast).
func photo(t testing.TB, w, h int) []byte {
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	for i := range img.Y {
		img.Y[i] = byte(i*7 + i/w*3)
	}
	for i := range img.Cb {
		img.Cb[i], img.Cr[i] = byte(i), byte(i/3)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeLimits: the header decides. A 12- and a 48-megapixel phone photo are within the
// limits; what they would cost decoded is what the limit compares.
func TestDecodeLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		data     []byte
		format   string
		min, max int64 // the estimate's bounds
	}{
		{"12 MP jpeg", jpegHeader(t, 4032, 3024, false), "jpeg", 18_000_000, 18_400_000},
		{"48 MP jpeg", jpegHeader(t, 8000, 6000, false), "jpeg", 72_000_000, 72_000_000},
		{"12 MP progressive jpeg", jpegHeader(t, 4032, 3024, true), "jpeg", 91_000_000, 92_000_000},
		{"5000×4000 rgba png", pngHeader(5000, 4000, 6, 0), "png", 80_000_000, 80_000_000},
		{"gray png", pngHeader(1000, 1000, 0, 0), "png", 1_000_000, 1_000_000},
	} {
		cfg, format, err := decodeConfig(tc.data)
		if err != nil || format != tc.format {
			t.Fatalf("%s: decodeConfig = %s, %v", tc.name, format, err)
		}
		c := decodeCost(tc.data, cfg, format)
		if c < tc.min || c > tc.max || c > MaxDecodeBytes || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
			t.Errorf("%s: cost %d, want in [%d, %d] and within MaxDecodeBytes %d", tc.name, c, tc.min, tc.max, MaxDecodeBytes)
		}
	}
}

// TestScaleMemory: scaling a photo allocates the decoded photo, the output and a few rows, not a
// buffer of the output's width by the source's height (32 bytes each: 25 MB here, 200 MB for a
// 12-megapixel photo scaled to 2048). A 3-megapixel photo keeps the test quick under -race.
func TestScaleMemory(t *testing.T) {
	data := photo(t, 2016, 1512)
	p := NewPreparer(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	img, err := p.Prepare(t.Context(), bytesOf(data), 512)
	runtime.ReadMemStats(&after)
	if err != nil || img.Width != 512 || img.Height != 384 {
		t.Fatalf("Prepare = %dx%d, %v", img.Width, img.Height, err)
	}
	// decoded 4.6 MB, the output 0.8 MB, the encoder's buffer less
	if got := after.TotalAlloc - before.TotalAlloc; got > 10<<20 {
		t.Errorf("allocated %.1f MB, want at most 10", float64(got)/(1<<20))
	}
}

// TestScaleMatchesCatmullRom: the banded scaler gives what x/image/draw's Catmull-Rom gives, to
// within rounding at a few edges.
func TestScaleMatchesCatmullRom(t *testing.T) {
	for _, size := range [][4]int{{640, 480, 200, 150}, {301, 97, 300, 96}, {1000, 10, 100, 1}, {7, 900, 1, 90}} {
		src := image.NewNRGBA(image.Rect(0, 0, size[0], size[1]))
		for i := range src.Pix {
			src.Pix[i] = byte(i*31 + i/size[0]*17)
		}
		for i := 3; i < len(src.Pix); i += 8 {
			src.Pix[i] = 255
		}
		want := image.NewRGBA(image.Rect(0, 0, size[2], size[3]))
		xdraw.CatmullRom.Scale(want, want.Rect, src, src.Rect, xdraw.Src, nil)
		got := image.NewRGBA(want.Rect)
		scale(got, src)
		worst := 0
		for i := range got.Pix {
			worst = max(worst, abs(int(got.Pix[i])-int(want.Pix[i])))
		}
		if worst > 3 {
			t.Errorf("%v: a channel differs by %d from x/image/draw's", size, worst)
		}
	}
}

func abs(n int) int { return max(n, -n) }

// TestPrepareRecoversPanic: a decoder that panics on hostile bytes makes that picture
// ErrCorrupt; the process goes on.
func TestPrepareRecoversPanic(t *testing.T) {
	p := NewPreparer(1)
	p.decode = func([]byte, string) (image.Image, error) {
		var pix []byte
		_ = pix[len(pix)+3] // what a decoder's bounds mistake looks like
		return nil, nil
	}
	_, err := p.Prepare(t.Context(), bytesOf(animated(40, 30)), 2048)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Prepare = %v, want ErrCorrupt", err)
	}
	// the slot was given back
	p.decode = decodeImage
	if _, err := p.Prepare(t.Context(), bytesOf(animated(40, 30)), 2048); err != nil {
		t.Fatalf("Prepare after a panic = %v", err)
	}
}

// bytesOf is a Fetch of data.
func bytesOf(data []byte) Fetch {
	return func(context.Context) ([]byte, error) { return data, nil }
}

// TestPrepareWaitsForSlot: a picture waits, before it is fetched, while the slots are taken by
// others being read, until its context ends; a fetch's error is returned as it is.
func TestPrepareWaitsForSlot(t *testing.T) {
	p := NewPreparer(1)
	fetched := false
	fetch := func(context.Context) ([]byte, error) { fetched = true; return pngOf(30, 20), nil }
	p.slots <- struct{}{} // another picture being read
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Prepare(ctx, fetch, 2048); !errors.Is(err, context.Canceled) || fetched {
		t.Errorf("Prepare while the slot is taken = %v, fetched %v; want context.Canceled, not fetched", err, fetched)
	}
	<-p.slots
	notThere := errors.New("no access")
	if _, err := p.Prepare(t.Context(), func(context.Context) ([]byte, error) { return nil, notThere }, 2048); !errors.Is(err, notThere) {
		t.Errorf("Prepare of a failed fetch = %v, want its error", err)
	}
	if _, err := p.Prepare(t.Context(), fetch, 2048); err != nil || !fetched {
		t.Errorf("Prepare with the slot free = %v, fetched %v", err, fetched)
	}
}

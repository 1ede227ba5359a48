// Package media readies pictures from Slack for a model: decoded (PNG, JPEG, GIF's first frame,
// WebP), scaled down to a longest side, and encoded as PNG or JPEG, which every server with vision
// takes. It knows nothing of Slack or of the model service.
package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/webp"
)

// MaxPixels bounds the pictures read: a 48-megapixel phone photo (8000×6000) is read, a small file
// declaring an enormous picture (a decompression bomb) is refused before anything is decoded.
const MaxPixels = 50_000_000

// MaxDecodeBytes bounds the memory one picture's decoding may take, as estimated from its header
// (decodeCost): a 48-megapixel JPEG as phones write them (4:2:0, about 72 MB) is read; a PNG of
// the same size (4 bytes a pixel, 192 MB) is not.
const MaxDecodeBytes = 96 << 20

// jpegQuality keeps screenshot text legible at a fraction of PNG's size for photos.
const jpegQuality = 85

// bigPNG is the size over which an opaque picture is sent as JPEG instead: a photo as PNG is
// several times larger, and every byte travels base64-encoded in each request.
const bigPNG = 1 << 20

// ErrUnsupported is a file that is not a PNG, JPEG, GIF or WebP picture.
var ErrUnsupported = errors.New("not a PNG, JPEG, GIF or WebP image")

// ErrTooLarge is a picture of more than MaxPixels, or whose decoding would take more than
// MaxDecodeBytes.
var ErrTooLarge = errors.New("image too large to read")

// ErrCorrupt is a picture whose decoder failed in a way it does not report as an error (a panic
// on hostile bytes): the picture is not read, the process goes on.
var ErrCorrupt = errors.New("image could not be decoded")

// Image is a picture ready for a model.
type Image struct {
	Data          []byte
	MIMEType      string // "image/png" or "image/jpeg"
	Width, Height int    // after scaling
	Scaled        bool   // it was larger than the longest side allowed
}

// Preparer readies pictures for a model, reading at most a few at once: a picture's bytes and its
// decoding are what cost memory (the download, and up to MaxDecodeBytes decoded), so the number
// read at once bounds what all answers' pictures take together, however many answers read them.
// One Preparer serves the whole process.
type Preparer struct {
	// slots is a semaphore: its capacity is the number of pictures read at once.
	slots  chan struct{}
	decode func(data []byte, format string) (image.Image, error) // decodeImage; tests put a panicking one
}

// NewPreparer returns a Preparer that reads at most concurrent pictures at once (at least 1).
func NewPreparer(concurrent int) *Preparer {
	return &Preparer{slots: make(chan struct{}, max(1, concurrent)), decode: decodeImage}
}

// Fetch returns a picture's bytes (a download).
type Fetch func(ctx context.Context) ([]byte, error)

// Prepare waits for a slot (or ctx), fetches a picture and returns it with its longest side at
// most maxSide (0: as it is), all within the slot. A PNG or JPEG that needs no scaling is returned
// as it came, without decoding; anything else is decoded and encoded anew. A picture over
// MaxPixels or MaxDecodeBytes is refused from its header (ErrTooLarge); one whose decoder panics is
// ErrCorrupt; fetch's error is returned as it is.
func (p *Preparer) Prepare(ctx context.Context, fetch Fetch, maxSide int) (Image, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return Image{}, fmt.Errorf("picture: wait: %w", context.Cause(ctx))
	}
	defer func() { <-p.slots }()
	data, err := fetch(ctx)
	if err != nil {
		return Image{}, err
	}
	return p.prepare(data, maxSide)
}

// prepare is Prepare once the bytes are there. Decoders run on bytes anyone in a thread may have
// shared: a panic in one (its header's reading included) is this picture's error, not the
// process's end.
func (p *Preparer) prepare(data []byte, maxSide int) (img Image, err error) {
	defer func() {
		if v := recover(); v != nil {
			img, err = Image{}, fmt.Errorf("decode: %w (panic: %v)", ErrCorrupt, v)
		}
	}()
	cfg, format, err := decodeConfig(data)
	if err != nil {
		return Image{}, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Image{}, fmt.Errorf("decode: %w", ErrUnsupported)
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return Image{}, fmt.Errorf("decode %dx%d: %w", cfg.Width, cfg.Height, ErrTooLarge)
	}
	if c := decodeCost(data, cfg, format); c > MaxDecodeBytes {
		return Image{}, fmt.Errorf("decode %dx%d %s (%d MB decoded): %w", cfg.Width, cfg.Height, format, c>>20, ErrTooLarge)
	}
	w, h := Fit(cfg.Width, cfg.Height, maxSide)
	scaled := w != cfg.Width || h != cfg.Height
	if !scaled && (format == "png" || format == "jpeg") {
		return Image{Data: data, MIMEType: "image/" + format, Width: w, Height: h}, nil
	}
	if img, err = p.convert(data, format, w, h); err != nil {
		return Image{}, err
	}
	img.Width, img.Height, img.Scaled = w, h, scaled
	return img, nil
}

// convert decodes data, scales it to w×h when that differs, and encodes it.
func (p *Preparer) convert(data []byte, format string, w, h int) (Image, error) {
	src, err := p.decode(data, format)
	if err != nil {
		return Image{}, fmt.Errorf("decode %s: %w", format, err)
	}
	if b := src.Bounds(); b.Dx() != w || b.Dy() != h {
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		scale(dst, src)
		src = dst
	}
	return encode(src, format == "jpeg")
}

func decodeConfig(data []byte) (image.Config, string, error) {
	r := bytes.NewReader(data)
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		c, err := png.DecodeConfig(r)
		return c, "png", wrapDecode(err)
	case bytes.HasPrefix(data, []byte("\xff\xd8")):
		c, err := jpeg.DecodeConfig(r)
		return c, "jpeg", wrapDecode(err)
	case bytes.HasPrefix(data, []byte("GIF8")):
		c, err := gif.DecodeConfig(r)
		return c, "gif", wrapDecode(err)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		c, err := webp.DecodeConfig(r)
		return c, "webp", wrapDecode(err)
	}
	return image.Config{}, "", ErrUnsupported
}

func wrapDecode(err error) error {
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// decodeImage reads the picture; of an animated GIF, the first frame (gif.Decode).
func decodeImage(data []byte, format string) (image.Image, error) {
	r := bytes.NewReader(data)
	switch format {
	case "png":
		return png.Decode(r)
	case "jpeg":
		return jpeg.Decode(r)
	case "gif":
		return gif.Decode(r)
	default:
		return webp.Decode(r)
	}
}

// encode writes img as JPEG when it came as one, or as PNG, unless that PNG is large and the
// picture opaque (a photo): then as JPEG.
func encode(img image.Image, wasJPEG bool) (Image, error) {
	var b bytes.Buffer
	if !wasJPEG {
		if err := png.Encode(&b, img); err != nil {
			return Image{}, fmt.Errorf("encode png: %w", err)
		}
		if b.Len() <= bigPNG || !opaque(img) {
			return Image{Data: b.Bytes(), MIMEType: "image/png"}, nil
		}
		b.Reset()
	}
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return Image{}, fmt.Errorf("encode jpeg: %w", err)
	}
	return Image{Data: b.Bytes(), MIMEType: "image/jpeg"}, nil
}

func opaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return img.ColorModel() == color.YCbCrModel || img.ColorModel() == color.GrayModel
}

// Fit is the size of a w×h picture scaled down (never up) so that its longest side is at most
// maxSide, keeping its proportions; each side stays at least 1. maxSide <= 0: unchanged.
func Fit(w, h, maxSide int) (int, int) {
	if maxSide <= 0 || (w <= maxSide && h <= maxSide) {
		return w, h
	}
	if w >= h {
		return maxSide, max(1, int((int64(h)*int64(maxSide)+int64(w)/2)/int64(w)))
	}
	return max(1, int((int64(w)*int64(maxSide)+int64(h)/2)/int64(h))), maxSide
}

// Tokens estimates what a w×h picture costs a model, as OpenAI documents it for high detail:
// scaled to fit 2048×2048, then its shortest side to 768, 170 tokens per 512-pixel tile plus 85.
// Other providers count differently, but in the same range: it is a budget, not a bill.
func Tokens(w, h int) int {
	if w <= 0 || h <= 0 {
		return 85
	}
	w, h = Fit(w, h, 2048)
	if s := min(w, h); s > 768 {
		w, h = (w*768+s/2)/s, (h*768+s/2)/s
	}
	tiles := ((w + 511) / 512) * ((h + 511) / 512)
	return 85 + 170*tiles
}

package media

import (
	"encoding/binary"
	"image"
	"image/color"
)

// decodeCost estimates the bytes decoding data takes, from its header: the decoded picture in the
// form its decoder returns, and what the decoder holds besides (a progressive JPEG's coefficients,
// a lossless WebP's pixels before conversion, an interlaced PNG's passes).
func decodeCost(data []byte, cfg image.Config, format string) int64 {
	px := int64(cfg.Width) * int64(cfg.Height)
	switch format {
	case "jpeg":
		return jpegCost(data, px)
	case "png":
		c := px * pngBytesPerPixel(cfg.ColorModel)
		if len(data) > 28 && data[28] == 1 { // IHDR's interlace method: Adam7 decodes each pass apart first
			c += c / 4
		}
		return c
	case "gif":
		return px // paletted: a byte a pixel
	}
	switch cfg.ColorModel {
	case color.YCbCrModel: // lossy WebP: 4:2:0
		return px * 3 / 2
	case color.NYCbCrAModel:
		return px * 5 / 2
	}
	return px * 8 // lossless WebP: its ARGB words, then the NRGBA picture
}

// pngBytesPerPixel is the size of a pixel in the image image/png decodes to for model m.
func pngBytesPerPixel(m color.Model) int64 {
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	switch m {
	case color.GrayModel:
		return 1
	case color.Gray16Model:
		return 2
	case color.RGBAModel, color.NRGBAModel:
		return 4
	}
	return 8 // RGBA64, NRGBA64
}

// jpegCost reads the JPEG's frame header (SOF) for its components and their sampling: image/jpeg
// decodes to a plane a component (chroma planes subsampled as the file says), plus 4 bytes a
// sample for a progressive JPEG's coefficients, plus a CMYK picture for a 4-component one. Without
// a frame header, the cost of 3 full planes.
func jpegCost(data []byte, px int64) int64 {
	comps, progressive, ok := jpegFrame(data)
	if !ok {
		return px * 3
	}
	var hmax, vmax int64 = 1, 1
	for _, c := range comps {
		hmax, vmax = max(hmax, int64(c[0])), max(vmax, int64(c[1]))
	}
	var samples int64
	for _, c := range comps {
		samples += px * int64(c[0]) * int64(c[1]) / (hmax * vmax)
	}
	cost := samples
	if progressive {
		cost += samples * 4
	}
	if len(comps) == 4 {
		cost += px * 4
	}
	return cost
}

// jpegFrame returns the sampling factors (h, v, each at least 1) of the JPEG's components from
// its first frame header, and whether that frame is progressive.
func jpegFrame(data []byte) (comps [][2]byte, progressive, ok bool) {
	i := 2 // after SOI
	for i+4 <= len(data) {
		if data[i] != 0xff {
			return nil, false, false
		}
		m := data[i+1]
		switch {
		case m == 0xff: // fill byte
			i++
			continue
		case m == 0x01 || m >= 0xd0 && m <= 0xd8: // markers without a length
			i += 2
			continue
		case m == 0xda || m == 0xd9: // scan data or the end before any frame header
			return nil, false, false
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc {
			return frameComps(data[i+4:min(len(data), i+2+n)], m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce)
		}
		i += 2 + n
	}
	return nil, false, false
}

// frameComps reads a frame header's payload: precision, height, width, the count of components,
// then 3 bytes each (id, sampling factors, quantisation table).
func frameComps(p []byte, progressive bool) ([][2]byte, bool, bool) {
	if len(p) < 6 {
		return nil, false, false
	}
	n := int(p[5])
	if n == 0 || len(p) < 6+3*n {
		return nil, false, false
	}
	comps := make([][2]byte, n)
	for k := range n {
		hv := p[6+3*k+1]
		comps[k] = [2]byte{max(1, hv>>4), max(1, hv&0x0f)}
	}
	return comps, progressive, true
}

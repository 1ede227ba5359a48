package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/jpeg"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// peakRSSLimit is what the bot process may reach answering over the heaviest thread of files a
// person can make (TestProcessMemoryFiles); the Kubernetes kit's memory limit has room above it.
const peakRSSLimit = 200 << 20

// TestProcessMemoryFiles runs the real binary and asks it about a thread holding a 150 KB PNG that
// declares 20000×20000 pixels, four 12-megapixel photos and a 20 MB log: the answer comes, the
// model gets the photos scaled, the log's start and a note on the PNG, and the process's peak RSS
// (VmHWM) stays within peakRSSLimit. docs/benchmarks.md has the figures.
func TestProcessMemoryFiles(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t)
	p := rs.start()
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Four photos and a log.") })

	files := memoryThreadFiles(t)
	parent, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "from the site visit", Files: files[:3]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U2", ThreadTS: parent, Text: "more", Files: files[3:]}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: parent, Text: "<@UBOT> what do these show?"}); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer", func() bool {
		for _, m := range rs.fs.BotReplies("C1", parent) {
			if m.Text == "Four photos and a log." && markOf(t, m).Kind == "answer" {
				return true
			}
		}
		return false
	})
	peak := vmHWM(t, p.cmd.Process.Pid)
	t.Logf("peak RSS %.1f MiB", float64(peak)/(1<<20))
	if peak > peakRSSLimit {
		t.Errorf("peak RSS %.1f MiB, want at most %d MiB", float64(peak)/(1<<20), peakRSSLimit>>20)
	}

	reqs := rs.fl.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	if n := len(reqs[0].Images()); n != 4 {
		t.Errorf("%d images in the request, want the 4 photos", n)
	}
	text := requestText(reqs[0])
	for _, want := range []string{`["bomb.png": picture too large to read`, ` data from the file "site.log" shared by `, ">>>\n0000000 site log line", "characters are included of its 19.1 MB]"} {
		if !strings.Contains(text, want) {
			t.Errorf("the request lacks %q", want)
		}
	}
}

// memoryThreadFiles are the thread's files: the PNG bomb and two photos, then two photos and the log.
func memoryThreadFiles(t *testing.T) []fakeslack.UserFile {
	photo := twelveMegapixels(t)
	var log bytes.Buffer
	for i := 0; log.Len() < 20_000_000; i++ {
		fmt.Fprintf(&log, "%07d site log line with a reading of %d\n", i, i*7%1000)
	}
	return []fakeslack.UserFile{
		{Name: "bomb.png", Bytes: pngBomb(20000, 20000, 150<<10)},
		{Name: "north.jpg", Bytes: photo}, {Name: "south.jpg", Bytes: photo},
		{Name: "east.jpg", Bytes: photo}, {Name: "west.jpg", Bytes: photo},
		{Name: "site.log", Bytes: log.Bytes()[:20_000_000]},
	}
}

// twelveMegapixels is a 4032×3024 JPEG as phones write them (4:2:0), with detail enough to be a
// few megabytes, as photos are.
func twelveMegapixels(t *testing.T) []byte {
	img := image.NewYCbCr(image.Rect(0, 0, 4032, 3024), image.YCbCrSubsampleRatio420)
	for i := range img.Y {
		img.Y[i] = byte(i ^ i>>7)
	}
	for i := range img.Cb {
		img.Cb[i], img.Cr[i] = byte(i>>5), byte(i>>9)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngBomb is a PNG of size bytes whose header declares w×h RGBA pixels, followed by one IDAT
// chunk of zlib data: what a crafted picture looks like before anything is decoded.
func pngBomb(w, h, size int) []byte {
	chunk := func(b []byte, kind string, data []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		b = append(append(b, kind...), data...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(kind), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	b := chunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", append(ihdr, 8, 6, 0, 0, 0))
	b = chunk(b, "IDAT", append([]byte{0x78, 0x9c}, make([]byte, max(0, size-len(b)-24))...))
	return chunk(b, "IEND", nil)
}

// vmHWM is a process's peak resident set size in bytes, from /proc/<pid>/status.
func vmHWM(t *testing.T, pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

package attach

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/media"
)

// mention is a person's message that asks the bot.
func mention(text string) slack.Message {
	var m slack.Message
	m.User, m.Text, m.Timestamp = "U1", text, "1700000000.000001"
	return m
}

// read reads the files of trigger and thread as an answer in channel C1 does: the bot's own messages
// (user UBOT, bot BBOT) and other bots' are left out, as handlers leaves them out by default.
func read(t *testing.T, r *Reader, thread []slack.Message, trigger slack.Message) ([]slack.Message, slack.Message, map[string]convo.FileContent) {
	skip := func(m slack.Message) bool { return m.User == "UBOT" || m.BotID != "" }
	return r.Read(t.Context(), zaptest.NewLogger(t), Thread{Channel: "C1", Messages: thread, Trigger: trigger, Skip: skip})
}

// fakeFiles is a hand-written Files: bytes or an error per file id, and files.info answers.
type fakeFiles struct {
	mu        sync.Mutex
	data      map[string][]byte
	errs      map[string]error
	info      map[string]slack.File
	downloads []string
	prefixes  []int64
	// pause makes each download take that long; inflight and peak count those under way.
	pause          time.Duration
	inflight, peak int
}

func (f *fakeFiles) Download(_ context.Context, file slack.File, prefix int64) ([]byte, string, bool, error) {
	f.mu.Lock()
	f.inflight++
	f.peak = max(f.peak, f.inflight)
	f.mu.Unlock()
	time.Sleep(f.pause)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
	f.downloads = append(f.downloads, file.ID)
	f.prefixes = append(f.prefixes, prefix)
	if err := f.errs[file.ID]; err != nil {
		return nil, "", false, err
	}
	data := f.data[file.ID]
	if prefix > 0 && int64(len(data)) > prefix {
		return data[:prefix], file.Mimetype, true, nil
	}
	return data, file.Mimetype, false, nil
}

func (f *fakeFiles) Info(_ context.Context, id string) (slack.File, error) {
	if file, ok := f.info[id]; ok {
		return file, nil
	}
	return slack.File{}, fmt.Errorf("files.info %s: file_not_found: %w", id, ErrFileNoAccess)
}

func testPNG(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// pngDeclaring is the start of a PNG (RGBA) that declares w×h pixels: all its header says.
func pngDeclaring(w, h int) []byte {
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	b := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte("IHDR"), ihdr...)))
}

func privateFile(id, name, mimetype string, size int) slack.File {
	return slack.File{ID: id, Name: name, Mimetype: mimetype, Size: size, URLPrivate: "https://files.slack.com/" + id}
}

// TestReadFiles: what an answer makes of each kind of file: a picture (scaled), a text file
// (capped), a PDF (a note, not downloaded), a file too large or not accessible (a note), one known
// only by id (looked up), and with vision off, pictures are not downloaded at all.
func TestReadFiles(t *testing.T) {
	big := testPNG(3000, 1500)
	for _, tc := range []struct {
		name      string
		vision    Vision
		file      slack.File
		data      []byte
		err       error
		want      string // the FileContent as "image <tokens>", "text <content>", "note <note>" or "none"
		downloads int
	}{
		{"picture scaled", VisionAuto, privateFile("F1", "shot.png", "image/png", len(big)), big, nil, "image 1105", 1},
		{"picture with vision off", VisionOff, privateFile("F1", "shot.png", "image/png", 10), nil, nil, "none", 0},
		{"text", VisionAuto, privateFile("F2", "app.log", "text/plain", 5), []byte("boom!"), nil, "text boom!", 1},
		{"code snippet typed octet-stream", VisionAuto, slack.File{ID: "F2", Name: "main.go", Filetype: "go", Mimetype: "application/octet-stream", URLPrivate: "https://files.slack.com/F2"}, []byte("package main"), nil, "text package main", 1},
		{"text cut", VisionAuto, privateFile("F2", "big.csv", "text/csv", 30), []byte(strings.Repeat("ab", 15)), nil, "text abababababab\n[cut here: only the first 12 of its 30 characters are included]", 1},
		{"text read in part", VisionAuto, privateFile("F2", "big.log", "text/plain", 3<<20), bytes.Repeat([]byte("é"), 1<<20), nil, "text éééééééééééé\n[cut here: only the first 12 characters are included of its 3.0 MB]", 1},
		{"binary as text", VisionAuto, privateFile("F2", "x.txt", "text/plain", 3), []byte("a\x00b"), nil, "note " + noteNotText, 1},
		{"pdf", VisionAuto, privateFile("F3", "spec.pdf", "application/pdf", 10), nil, nil, "note " + notePDF, 0},
		{"too large", VisionAuto, privateFile("F4", "huge.png", "image/png", 30<<20), nil, fmt.Errorf("download: %w", ErrFileTooLarge), "note too large to read (30.0 MB; the limit is 20.0 MB)", 1},
		{"no access", VisionAuto, privateFile("F5", "x.png", "image/png", 10), nil, fmt.Errorf("download: %w", ErrFileNoAccess), "note " + noteNoAccess, 1},
		{"not a picture", VisionAuto, privateFile("F6", "x.png", "image/png", 4), []byte("nope"), nil, "note " + noteNotImage, 1},
		{"picture declaring 20000×20000", VisionAuto, privateFile("F6", "bomb.png", "image/png", 150<<10), pngDeclaring(20000, 20000), nil, "note " + noteBigPicture, 1},
		{"known by id only", VisionAuto, slack.File{ID: "F7", FileAccess: "check_file_info"}, []byte("hello"), nil, "text hello", 1},
		{"known by id, not found", VisionAuto, slack.File{ID: "F8", FileAccess: "check_file_info"}, nil, nil, "note " + noteNoAccess, 0},
		{"other kinds are noted only", VisionAuto, privateFile("F9", "a.zip", "application/zip", 10), nil, nil, "none", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := &fakeFiles{data: map[string][]byte{tc.file.ID: tc.data}, errs: map[string]error{tc.file.ID: tc.err},
				info: map[string]slack.File{"F7": privateFile("F7", "notes.txt", "text/plain", 5)}}
			r := NewReader(Options{Files: files, Vision: tc.vision, MaxText: 12, MaxBytes: 20 << 20})
			trigger := mention("<@UBOT> look")
			trigger.Files = []slack.File{tc.file}
			_, trig, got := read(t, r, nil, trigger)
			if s := showContent(got[tc.file.ID]); s != tc.want {
				t.Errorf("content = %q, want %q", s, tc.want)
			}
			if len(files.downloads) != tc.downloads {
				t.Errorf("%d downloads, want %d", len(files.downloads), tc.downloads)
			}
			for i, p := range files.prefixes {
				if kindOf(tc.file) == kindText && (p <= 0 || p > 4*12) {
					t.Errorf("download %d of a text file asked for %d bytes, want at most %d (12 characters)", i, p, 4*12)
				}
			}
			if tc.name == "known by id only" && trig.Files[0].Name != "notes.txt" {
				t.Errorf("trigger's file = %+v, want the whole object from files.info", trig.Files[0])
			}
		})
	}
}

// TestReadFilesPictureSlots: pictures are downloaded within the process's picture slots (one
// here), however many an answer reads at once: their bytes are not all held together.
func TestReadFilesPictureSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		files := &fakeFiles{data: map[string][]byte{}, pause: 100 * time.Millisecond}
		r := NewReader(Options{Files: files, Pictures: media.NewPreparer(1)})
		trigger := mention("<@UBOT> compare")
		for _, id := range []string{"P1", "P2", "P3", "P4"} {
			trigger.Files = append(trigger.Files, privateFile(id, id+".png", "image/png", 100))
			files.data[id] = testPNG(30, 20)
		}
		_, _, got := read(t, r, nil, trigger)
		if len(got) != 4 || files.peak != 1 {
			t.Errorf("%d pictures read, at most %d downloads at once; want 4, one at a time", len(got), files.peak)
		}
	})
}

func showContent(c convo.FileContent) string {
	switch {
	case c.Image != "":
		return fmt.Sprintf("image %d", c.Tokens)
	case c.Text != "":
		return "text " + c.Text
	case c.Note != "":
		return "note " + c.Note
	}
	return "none"
}

// TestReadFilesOrder: the trigger's files come first, then the thread's newest first, and
// MaxFiles stops the reading; the bot's own files and messages after the trigger are not read.
func TestReadFilesOrder(t *testing.T) {
	files := &fakeFiles{data: map[string][]byte{}}
	r := NewReader(Options{Files: files, MaxFiles: 3})
	msg := func(ts, user, botID string, ids ...string) slack.Message {
		var m slack.Message
		m.Timestamp, m.User, m.BotID = ts, user, botID
		for _, id := range ids {
			m.Files = append(m.Files, privateFile(id, id+".txt", "text/plain", 1))
			files.data[id] = []byte(id)
		}
		return m
	}
	thread := []slack.Message{
		msg("1.000001", "U1", "", "old1", "old2"),
		msg("1.000002", "UBOT", "BBOT", "bots"),
		msg("1.000003", "U2", "", "mid"),
		msg("1.000004", "U1", "", "trig"),
		msg("1.000005", "U3", "", "later"),
	}
	_, _, got := read(t, r, thread, thread[3])
	var read, notes []string
	for id, c := range got {
		if c.Text != "" {
			read = append(read, id)
		} else {
			notes = append(notes, id+": "+c.Note)
		}
	}
	if len(read) != 3 || got["trig"].Text == "" || got["mid"].Text == "" || got["old2"].Text == "" && got["old1"].Text == "" {
		t.Errorf("read %v, want trig, mid and one of old1, old2", read)
	}
	if len(notes) != 1 || got["bots"] != (convo.FileContent{}) || got["later"] != (convo.FileContent{}) {
		t.Errorf("notes %v, want one file over MaxFiles; the bot's and the later file untouched", notes)
	}
}

// TestReadFilePanicIsItsNote: a file whose reading panics is noted as not read, the other files of
// the answer are read, and the process goes on.
func TestReadFilePanicIsItsNote(t *testing.T) {
	files := &panickyFiles{fakeFiles: fakeFiles{data: map[string][]byte{"F2": []byte("boom!")}, errs: map[string]error{}}, panics: "F1"}
	r := NewReader(Options{Files: files, Vision: VisionAuto, MaxText: 12, MaxBytes: 20 << 20})
	trigger := mention("<@UBOT> look")
	trigger.Files = []slack.File{privateFile("F1", "evil.txt", "text/plain", 5), privateFile("F2", "app.log", "text/plain", 5)}
	_, _, got := read(t, r, nil, trigger)
	if s := showContent(got["F1"]); s != "note "+noteNotRead {
		t.Errorf("the panicking file: %q, want its note", s)
	}
	if s := showContent(got["F2"]); s != "text boom!" {
		t.Errorf("the other file: %q, want it read", s)
	}
}

// panickyFiles is fakeFiles whose download of the file panics names panics.
type panickyFiles struct {
	fakeFiles
	panics string
}

func (f *panickyFiles) Download(ctx context.Context, file slack.File, prefix int64) ([]byte, string, bool, error) {
	if file.ID == f.panics {
		panic("a decoder met bytes it cannot take")
	}
	return f.fakeFiles.Download(ctx, file, prefix)
}

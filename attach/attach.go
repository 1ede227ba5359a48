// Package attach reads the files of a thread for the model: which files an answer reads (the
// trigger's, then the thread's newest first, up to a number), pictures readied through media within
// the process's picture slots, text files bounded in characters, and the notes the model reads in
// place of a file it is not given (a PDF, one too large, one the bot may not open). It owns the
// Files port (bot.Files implements it over Slack), the vision setting and the reading's limits. It
// knows nothing of answers: handlers calls a Reader built once, with the messages whose files it
// leaves out, and gets each file's convo.FileContent back.
package attach

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/media"
)

// Files reads the files people share (implemented by bot.Files over Slack's url_private and
// files.info). Errors wrap ErrFileTooLarge and ErrFileNoAccess where those apply.
type Files interface {
	// Download returns a file's bytes and their Content-Type. With prefix > 0 it reads at most the
	// first prefix bytes, whatever the file's size, and cut says there were more; with prefix 0 it
	// reads the whole file, which must be within the download limit (ErrFileTooLarge).
	Download(ctx context.Context, f slack.File, prefix int64) (data []byte, mimeType string, cut bool, err error)
	// Info returns the whole file object (files.info), for events and messages that carry only
	// a file's id ("file_access": "check_file_info").
	Info(ctx context.Context, id string) (slack.File, error)
}

var (
	// ErrFileTooLarge: the file is over the size the bot reads (MAX_FILE_BYTES).
	ErrFileTooLarge = errors.New("file too large")
	// ErrFileNoAccess: Slack does not let the bot read the file (not shared with it, another
	// workspace's, deleted, or the files:read scope is missing).
	ErrFileNoAccess = errors.New("no access to the file")
)

// Vision says whether answers send pictures to the model.
type Vision string

// The vision settings.
const (
	// VisionAuto sends pictures; a model that refuses them is asked again without them (and
	// from then on), and the answer says it could not see them.
	VisionAuto Vision = "auto"
	// VisionOn always sends pictures: a model's refusal is the answer's error.
	VisionOn Vision = "on"
	// VisionOff never sends pictures: they are noted by name, as any other file.
	VisionOff Vision = "off"
)

// Options configure what answers read of the files people share.
type Options struct {
	// Files downloads them; nil: files are only noted by name.
	Files  Files
	Vision Vision // "": VisionAuto
	// ChannelVision, when set, returns a channel's own Vision; "" keeps Vision (CHANNEL_CONFIG).
	ChannelVision func(channel string) Vision
	MaxImageSide  int   // longest side of a picture sent; default 2048
	MaxText       int   // characters of one text file; default 20,000
	MaxBytes      int64 // for the note on a file too large; the limit itself is Files'
	// Pictures readies pictures for the model; nil: a Preparer of its own, reading 2 at once.
	// One Preparer for the process bounds the memory all answers' pictures take together.
	Pictures Pictures
	// MaxFiles is how many files one answer reads, newest first; default 20.
	MaxFiles int
}

func (o Options) withDefaults() Options {
	o.Vision = cmp.Or(o.Vision, VisionAuto)
	o.MaxImageSide = cmp.Or(o.MaxImageSide, 2048)
	o.MaxText = cmp.Or(o.MaxText, 20000)
	o.MaxFiles = cmp.Or(o.MaxFiles, 20)
	if o.Pictures == nil {
		o.Pictures = media.NewPreparer(2)
	}
	return o
}

// Pictures readies a shared picture for the model (media.Preparer): fetched, decoded, scaled to
// maxSide and encoded within one of a few slots for the process; an error wrapping
// media.ErrTooLarge when its header declares more than can be read, fetch's error as it is.
type Pictures interface {
	Prepare(ctx context.Context, fetch media.Fetch, maxSide int) (media.Image, error)
}

// Notes the model reads next to a file's name when its contents are not given.
const (
	notePDF        = "PDFs are not read; ask the person to paste the text that matters"
	noteNoAccess   = "the bot cannot open this file (it may be shared from elsewhere or restricted)"
	noteNotImage   = "could not be read as an image"
	noteBigPicture = "picture too large to read (too many pixels); ask for a smaller one or a crop"
	noteNotText    = "not readable as text"
	noteTooMany    = "not read: too many files in this conversation"
	noteNotRead    = "could not be downloaded"
)

// TextImagesSeen is what an answer says when the model could not see the pictures it was given.
const TextImagesSeen = "The model could not see the images in this conversation."

// fileKind is what the bot makes of a file.
type fileKind int

const (
	kindOther fileKind = iota // noted by name only
	kindImage
	kindText
	kindPDF
)

func kindOf(f slack.File) fileKind {
	mt := strings.ToLower(f.Mimetype)
	switch {
	case mt == "image/png" || mt == "image/jpeg" || mt == "image/gif" || mt == "image/webp":
		return kindImage
	case mt == "application/pdf" || f.Filetype == "pdf":
		return kindPDF
	case strings.HasPrefix(mt, "text/") || textTypes[mt] || textFiletypes[strings.ToLower(f.Filetype)]:
		return kindText
	}
	return kindOther
}

// textTypes and textFiletypes are the files inlined as text besides text/*: data formats, and
// Slack's filetypes of snippets and source code (which Slack often types application/octet-stream).
var (
	textTypes = map[string]bool{"application/json": true, "application/x-yaml": true, "application/yaml": true,
		"application/xml": true, "application/x-sh": true, "application/javascript": true, "application/toml": true,
		"application/x-ndjson": true, "application/sql": true}
	textFiletypes = map[string]bool{"text": true, "json": true, "yaml": true, "csv": true, "tsv": true, "xml": true,
		"markdown": true, "go": true, "python": true, "javascript": true, "typescript": true, "java": true, "c": true,
		"cpp": true, "csharp": true, "rust": true, "ruby": true, "php": true, "shell": true, "sql": true, "diff": true,
		"kotlin": true, "swift": true, "scala": true, "toml": true, "ini": true, "log": true, "html": true, "css": true,
		"dockerfile": true, "terraform": true, "post": true}
)

// Reader reads the files of threads. One is built for the process: its Options' Pictures bound
// the memory all answers' pictures take together.
type Reader struct{ o Options }

// NewReader is a Reader of o, its unset limits defaulted.
func NewReader(o Options) *Reader { return &Reader{o: o.withDefaults()} }

// Vision is channel's setting: its own (ChannelVision) or the bot's.
func (r *Reader) Vision(channel string) Vision {
	if r.o.ChannelVision != nil {
		if v := r.o.ChannelVision(channel); v != "" {
			return v
		}
	}
	return r.o.Vision
}

// Thread is what one answer reads the files of.
type Thread struct {
	Channel  string          // its vision is the channel's
	Messages []slack.Message // the thread, oldest first
	Trigger  slack.Message   // the message answered; only messages before it are read
	// Skip says which messages' files are left out: the bot's own (an assistant message carries no
	// picture), and other bots' when the answer's context leaves them out.
	Skip func(slack.Message) bool
}

// fileRef is one file to read: the message it came with (an index into the thread, or -1: the
// trigger) and its place there.
type fileRef struct {
	msg, idx int
	file     slack.File
}

// Read reads the files of the trigger and of the thread's messages before it, newest first, up to
// MaxFiles: text files, and pictures unless vision is off. Files known only by id are looked up
// (files.info), and the messages returned get the whole objects, so that their names show; the
// contents are by file id. Failures become notes to the model, never the answer's failure. log
// is the answer's.
func (r *Reader) Read(ctx context.Context, log *zap.Logger, t Thread) ([]slack.Message, slack.Message, map[string]convo.FileContent) {
	thread, trigger := t.Messages, t.Trigger
	if r.o.Files == nil {
		return thread, trigger, nil
	}
	refs := fileRefs(t)
	if len(refs) == 0 {
		return thread, trigger, nil
	}
	rd := reading{Reader: r, log: log, channel: t.Channel}
	thread = slices.Clone(thread)
	out := make(map[string]convo.FileContent, len(refs))
	contents := make([]convo.FileContent, len(refs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, fileReaders)
	for i := range refs {
		if i >= r.o.MaxFiles {
			contents[i] = convo.FileContent{Note: noteTooMany}
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			defer rd.unreadable(&contents[i], refs[i].file.ID)
			refs[i].file, contents[i] = rd.readFile(ctx, refs[i].file)
		})
	}
	wg.Wait()
	for i, f := range refs {
		m := &trigger
		if f.msg >= 0 {
			m = &thread[f.msg]
		}
		m.Files = slices.Clone(m.Files)
		m.Files[f.idx] = f.file
		if c := contents[i]; c != (convo.FileContent{}) {
			out[f.file.ID] = c
		}
	}
	return thread, trigger, out
}

// reading is one Read's: the Reader, the answer's log and its channel.
type reading struct {
	*Reader
	log     *zap.Logger
	channel string
}

// unreadable, deferred by a goroutine reading one file, turns its panic (a file whose bytes the
// reading code could not take) into that file's note, with the stack in the log: the answer goes on
// without the file, and the process lives.
func (a reading) unreadable(c *convo.FileContent, id string) {
	if p := recover(); p != nil {
		a.log.Error("reading a file panicked", zap.String("panic", fmt.Sprint(p)), zap.ByteString("stack", debug.Stack()),
			zap.String("file", id))
		*c = convo.FileContent{Note: noteNotRead}
	}
}

// fileReaders is how many files one answer reads at once.
const fileReaders = 4

// fileRefs lists the files to read, the trigger's first, then the thread's newest first, leaving
// out the messages t.Skip names and those at or after the trigger.
func fileRefs(t Thread) []fileRef {
	var refs []fileRef
	add := func(msg int, m slack.Message) {
		for j, f := range m.Files {
			if f.ID != "" && f.Mode != "tombstone" {
				refs = append(refs, fileRef{msg: msg, idx: j, file: f})
			}
		}
	}
	trigger := t.Trigger
	add(-1, trigger)
	for i := len(t.Messages) - 1; i >= 0; i-- {
		m := t.Messages[i]
		if m.Timestamp == trigger.Timestamp || trigger.Timestamp != "" && !convo.TSBefore(m.Timestamp, trigger.Timestamp) ||
			t.Skip != nil && t.Skip(m) {
			continue
		}
		add(i, m)
	}
	return refs
}

// readFile reads one file: its whole object when it came as an id only, and its content or a note.
func (a reading) readFile(ctx context.Context, f slack.File) (slack.File, convo.FileContent) {
	o := a.o
	if f.FileAccess == "check_file_info" || f.URLPrivate == "" && f.URLPrivateDownload == "" && !f.IsExternal {
		full, err := o.Files.Info(ctx, f.ID)
		if err != nil {
			a.log.Debug("files.info; the file is noted, not read", zap.String("file", f.ID), zap.Error(err))
			return f, convo.FileContent{Note: noteNoAccess}
		}
		f = full
	}
	switch kindOf(f) {
	case kindPDF:
		return f, convo.FileContent{Note: notePDF}
	case kindImage:
		if a.Vision(a.channel) == VisionOff {
			return f, convo.FileContent{}
		}
		return f, a.readImage(ctx, f)
	case kindText:
		return f, a.readText(ctx, f)
	}
	return f, convo.FileContent{}
}

// errNotDownloaded is a picture's fetch that failed with a note already (download).
var errNotDownloaded = errors.New("not downloaded")

// download fetches f (its first prefix bytes when prefix > 0: see Files.Download), or says in a
// note why not.
func (a reading) download(ctx context.Context, f slack.File, prefix int64) ([]byte, bool, string) {
	data, _, cut, err := a.o.Files.Download(ctx, f, prefix)
	switch {
	case err == nil:
		return data, cut, ""
	case errors.Is(err, ErrFileTooLarge):
		return nil, false, tooLargeNote(f.Size, a.o.MaxBytes)
	case errors.Is(err, ErrFileNoAccess):
		a.log.Debug("file not readable", zap.String("file", f.ID), zap.Error(err))
		return nil, false, noteNoAccess
	}
	a.log.Warn("file download failed; the model is told", zap.String("file", f.ID), zap.Error(err))
	return nil, false, noteNotRead
}

func tooLargeNote(size int, limit int64) string {
	mb := func(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB" }
	if size > 0 {
		return "too large to read (" + mb(int64(size)) + "; the limit is " + mb(limit) + ")"
	}
	return "too large to read (the limit is " + mb(limit) + ")"
}

// readImage downloads and readies a picture within one of the process's picture slots, so that
// the bytes of pictures being read are bounded however many answers read them.
func (a reading) readImage(ctx context.Context, f slack.File) convo.FileContent {
	var note string
	img, err := a.o.Pictures.Prepare(ctx, func(ctx context.Context) ([]byte, error) {
		data, _, n := a.download(ctx, f, 0)
		if note = n; n != "" {
			return nil, errNotDownloaded
		}
		return data, nil
	}, a.o.MaxImageSide)
	switch {
	case note != "":
		return convo.FileContent{Note: note}
	case errors.Is(err, media.ErrTooLarge):
		a.log.Debug("picture too large to decode", zap.String("file", f.ID), zap.Error(err))
		return convo.FileContent{Note: noteBigPicture}
	case err != nil:
		a.log.Debug("picture not decoded", zap.String("file", f.ID), zap.Error(err))
		return convo.FileContent{Note: noteNotImage}
	}
	return convo.FileContent{
		Image:  "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
		Tokens: media.Tokens(img.Width, img.Height),
	}
}

// readText reads a text file's start only: MaxText characters take at most 4 bytes each in UTF-8,
// so a file longer than that has more characters than are kept.
func (a reading) readText(ctx context.Context, f slack.File) convo.FileContent {
	max := a.o.MaxText
	data, cut, note := a.download(ctx, f, int64(4*max))
	if note != "" {
		return convo.FileContent{Note: note}
	}
	if cut {
		data = dropPartialRune(data)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return convo.FileContent{Note: noteNotText}
	}
	if cut {
		return convo.FileContent{Text: capStart(string(data), max, f.Size)}
	}
	return convo.FileContent{Text: capText(string(data), max)}
}

// dropPartialRune drops the bytes of a character cut in two at the end of b.
func dropPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// capStart keeps the first max characters of s, the start of a file of size bytes that was not
// read to its end, and says so.
func capStart(s string, max, size int) string {
	i := 0
	for k := range s {
		if i == max {
			s = s[:k]
			break
		}
		i++
	}
	note := "\n[cut here: only the first " + strconv.Itoa(i) + " characters are included"
	if size > 0 {
		note += " of its " + strconv.FormatFloat(float64(size)/(1<<20), 'f', 1, 64) + " MB"
	}
	return s + note + "]"
}

// capText keeps the first max characters of s and says how much was cut.
func capText(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	i := 0
	for k := range s {
		if i == max {
			return s[:k] + "\n[cut here: only the first " + strconv.Itoa(max) + " of its " + strconv.Itoa(n) + " characters are included]"
		}
		i++
	}
	return s
}

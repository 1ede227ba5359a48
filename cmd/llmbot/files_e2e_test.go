package main

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// screenshot is a w×h PNG.
func screenshot(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, h/2, color.RGBA{0, 0, 255, 255})
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// requestText is a chat request's messages as "role: text" lines (images left out).
func requestText(r fakellm.ChatRequest) string {
	var lines []string
	for _, m := range r.Messages {
		lines = append(lines, m.Role+": "+m.Content)
	}
	return strings.Join(lines, "\n")
}

// checkNoSlackToken fails the test if the bot token reached the model service or a host other
// than Slack's.
func checkNoSlackToken(t *testing.T, e *e2e) {
	t.Helper()
	for _, r := range e.llm.Requests() {
		if bytes.Contains(r.Body, []byte(botToken)) || strings.Contains(r.Header.Get("Authorization"), botToken) {
			t.Errorf("the bot token is in a request to the model service")
		}
	}
	if leaks := e.slack.TokenLeaks(); len(leaks) > 0 {
		t.Errorf("the bot token reached a host other than Slack's: %v", leaks)
	}
}

// TestE2EFilesAndImages: a thread with a screenshot (behind a redirect to another host), a log
// (behind a redirect on Slack's host), a PDF and a picture too large to read, then a mention with a
// large screenshot of its own. The model gets both pictures as images (the mention's scaled to
// IMAGE_INPUT_MAX_SIDE), the log as text, and notes on the PDF and the large picture; the bot
// token goes nowhere but Slack.
func TestE2EFilesAndImages(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"MAX_FILE_BYTES": "300000", "IMAGE_INPUT_MAX_SIDE": "512", "FOLLOW_UPS": "false"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("The button moved to the left.") })
	parent := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "before the deploy",
		Files: []fakeslack.UserFile{{Name: "before.png", Bytes: screenshot(400, 300), Redirect: fakeslack.RedirectOtherHost}}})
	e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: parent, Text: "the deploy log and the spec",
		Files: []fakeslack.UserFile{
			{Name: "deploy.log", Bytes: []byte("12:01 rollout started\n12:02 rollout finished\n"), Redirect: fakeslack.RedirectSameHost},
			{Name: "spec.pdf", Bytes: []byte("%PDF-1.7\n...")},
		}})
	e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: parent, Text: "a photo of the screen",
		Files: []fakeslack.UserFile{{Name: "photo.png", Bytes: bytes.Repeat([]byte{0x89}, 400000)}}})
	e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: parent, Text: "<@UBOT> what changed?",
		Files: []fakeslack.UserFile{{Name: "after.png", Bytes: screenshot(2000, 1000)}}})
	e.final(t, "C1", parent, 1, 1)

	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	images := reqs[0].Images()
	if len(images) != 2 {
		t.Fatalf("%d images in the request, want 2 (the parent's and the mention's)", len(images))
	}
	for i, want := range []image.Point{{400, 300}, {512, 256}} {
		data, ok := strings.CutPrefix(images[i], "data:image/png;base64,")
		raw, err := base64.StdEncoding.DecodeString(data)
		cfg, err2 := png.DecodeConfig(bytes.NewReader(raw))
		if !ok || err != nil || err2 != nil || cfg.Width != want.X || cfg.Height != want.Y {
			t.Errorf("image %d: %.40s… decodes to %dx%d (%v, %v), want a PNG data URL of %dx%d", i, images[i], cfg.Width, cfg.Height, err, err2, want.X, want.Y)
		}
	}
	text := requestText(reqs[0])
	for _, want := range []string{
		// A file's contents are fenced as data from it (the boundary is random per request).
		" data from the file \"deploy.log\" shared by the person asking>>>\n12:01 rollout started\n12:02 rollout finished\n",
		`["spec.pdf": PDFs are not read`,
		`["photo.png": too large to read`,
		"what changed?",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the request lacks %q:\n%s", want, text)
		}
	}
	checkNoSlackToken(t, e)
}

// TestE2ETextOnlyModel: with VISION=auto, a model that refuses pictures, in the words and status
// of each server the fake imitates, is asked again without them; the answer says the model could not
// see them, and the next question to that model goes without pictures at once. VISION=on keeps them
// (the refusal is shown), VISION=off never downloads them.
func TestE2ETextOnlyModel(t *testing.T) {
	t.Parallel()
	for _, server := range fakellm.TextServers {
		t.Run(string(server), func(t *testing.T) {
			e := startE2E(t, fakeslack.Config{}, nil)
			e.llm.SetChat(fakellm.TextOnly(server, func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("It looks like a chart.") }))
			ask := func() string {
				return e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> what is this?",
					Files: []fakeslack.UserFile{{Name: "chart.png", Bytes: screenshot(64, 64)}}})
			}
			first := ask()
			msgs := e.final(t, "C1", first, 1, 1)
			if note := markOf(t, msgs[0]).Note; !strings.Contains(note, "could not see the images") ||
				!strings.Contains(msgs[0].Text, "It looks like a chart.") {
				t.Errorf("answer %q (note %q), want the answer and the note that the model could not see the images", msgs[0].Text, note)
			}
			second := ask()
			e.final(t, "C1", second, 1, 2)
			reqs := e.llm.ChatRequests()
			if len(reqs) != 3 || len(reqs[0].Images()) != 1 || len(reqs[1].Images()) != 0 || len(reqs[2].Images()) != 0 {
				t.Fatalf("%d chat requests, want 3: with the picture, again without, and the next question without", len(reqs))
			}
			if text := requestText(reqs[1]); !strings.Contains(text, `["chart.png": this model cannot see images`) {
				t.Errorf("the request without the picture does not say it is left out:\n%s", text)
			}
			checkNoSlackToken(t, e)
		})
	}
	t.Run("VISION=on", func(t *testing.T) {
		e := startE2E(t, fakeslack.Config{}, map[string]string{"VISION": "on"})
		e.llm.SetChat(fakellm.TextOnly(fakellm.OpenAI, func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("unreachable") }))
		ts := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> what is this?",
			Files: []fakeslack.UserFile{{Name: "chart.png", Bytes: screenshot(64, 64)}}})
		msgs := e.final(t, "C1", ts, 1, 1)
		if reqs := e.llm.ChatRequests(); len(reqs) != 1 || !strings.Contains(msgs[0].Text+markOf(t, msgs[0]).Note, "image_url is only supported") {
			t.Errorf("%d requests, answer %q: want one request and the refusal shown", len(reqs), msgs[0].Text)
		}
	})
	t.Run("VISION=off", func(t *testing.T) {
		e := startE2E(t, fakeslack.Config{}, map[string]string{"VISION": "off"})
		e.llm.SetChat(fakellm.TextOnly(fakellm.OpenAI, func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("A file named chart.png.") }))
		ts := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> what is this?",
			Files: []fakeslack.UserFile{{Name: "chart.png", Bytes: screenshot(64, 64)}}})
		msgs := e.final(t, "C1", ts, 1, 1)
		reqs := e.llm.ChatRequests()
		if len(reqs) != 1 || len(reqs[0].Images()) != 0 || !strings.Contains(requestText(reqs[0]), `[shared an image: "chart.png"`) {
			t.Errorf("%d requests: want one, naming the picture without it", len(reqs))
		}
		if note := markOf(t, msgs[0]).Note; strings.Contains(note, "could not see") {
			t.Errorf("note %q: with VISION=off nothing was refused", note)
		}
	})
}

// TestE2EFileSharedFromElsewhere: a file the event carries only by id is looked up with
// files.info and read; one the bot may not see is named with a note, and the answer comes.
func TestE2EFileSharedFromElsewhere(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Disk full.") })
	ts := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> why did it fail?",
		Files: []fakeslack.UserFile{
			{Name: "ci.log", Bytes: []byte("error: no space left on device"), CheckInfo: true},
			{Name: "secret.txt", Bytes: []byte("hidden"), CheckInfo: true, NoAccess: true},
		}})
	e.final(t, "C1", ts, 1, 1)
	text := requestText(e.llm.ChatRequests()[0])
	if !strings.Contains(text, "no space left on device") || !strings.Contains(text, "the bot cannot open this file") ||
		strings.Contains(text, "hidden") {
		t.Errorf("request:\n%s\nwant ci.log's text and a note on the file the bot cannot open", text)
	}
	checkNoSlackToken(t, e)
}

package imagine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/route"
)

var pngBytes = []byte("\x89PNG\r\n\x1a\n fake image bytes")

func newImagineTest(t *testing.T, img *llmtest.Imager) (*Imagine, *gatewaytest.Slack) {
	fs := gatewaytest.NewSlack()
	return New(img, fs, fs, zaptest.NewLogger(t), Options{BotName: "llmbot", Model: "gpt-image-1"}), fs
}

func imagineReq(text string) Request {
	return Request{Channel: "C1", User: "U1", Team: "T1", Text: text, ResponseURL: "https://hooks.slack.test/r/1"}
}

func TestImagineUploadsToChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Wait: 5 * time.Second, Img: &llm.Image{Data: pngBytes, Format: "png", MIMEType: "image/png",
			RevisedPrompt: "A watercolour lighthouse at dawn, soft light"}}
		im, fs := newImagineTest(t, img)
		req := imagineReq("  a lighthouse at dawn <b>  ")
		ack, start := im.Accept(req)
		if !start || ack != "Generating an image for: a lighthouse at dawn &lt;b&gt;…" {
			t.Errorf("Accept = %q, %v; want the generating ack and start", ack, start)
		}
		if long, _ := im.Accept(imagineReq(strings.Repeat("word ", 100))); !strings.HasSuffix(long, "word…") {
			t.Errorf("Accept of a long prompt = %q, want it cut with one ellipsis", long)
		}
		mustNoErr(t, im.Run(t.Context(), req))
		ups := fs.CallsOf("upload")
		if len(ups) != 1 {
			t.Fatalf("uploads = %d, want 1", len(ups))
		}
		u := ups[0].Upload
		if u.Channel != "C1" || u.ThreadTS != "" || u.Filename != "image.png" || !bytes.Equal(u.Data, pngBytes) {
			t.Errorf("upload = %+v, want the exact bytes as image.png at the channel's top level", u)
		}
		for _, want := range []string{"<@U1>", "a lighthouse at dawn &lt;b&gt;", "Revised prompt: A watercolour lighthouse"} {
			if !strings.Contains(u.Comment, want) {
				t.Errorf("comment %q lacks %q", u.Comment, want)
			}
		}
		if u.AltText != "a lighthouse at dawn <b>" {
			t.Errorf("alt text = %q, want the prompt", u.AltText)
		}
		if r := img.Requests()[0]; r.Prompt != "a lighthouse at dawn <b>" || r.Model != "gpt-image-1" || r.User == "" || strings.Contains(r.User, "U1") {
			t.Errorf("image request = %+v, want the prompt, the model and a hashed user", r)
		}
		if n := len(fs.CallsOf("respond")); n != 0 {
			t.Errorf("responses = %d, want none on success", n)
		}
	})
}

func TestImagineEmptyPromptGetsUsage(t *testing.T) {
	img := &llmtest.Imager{}
	im, _ := newImagineTest(t, img)
	ack, start := im.Accept(imagineReq("   "))
	if start || !strings.Contains(ack, "Usage: `/imagine") {
		t.Errorf("Accept = %q, %v; want usage help and no start", ack, start)
	}
	if err := im.Run(context.Background(), imagineReq("")); !errors.Is(err, route.ErrIgnored) || len(img.Requests()) != 0 {
		t.Errorf("Run on empty prompt = %v with %d image calls, want route.ErrIgnored and none", err, len(img.Requests()))
	}
}

func TestImagineAltTextBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Img: &llm.Image{Data: pngBytes, Format: "jpeg"}}
		im, fs := newImagineTest(t, img)
		mustNoErr(t, im.Run(t.Context(), imagineReq(strings.Repeat("é", 1500))))
		u := fs.CallsOf("upload")[0].Upload
		if n := len([]rune(u.AltText)); n != 1000 {
			t.Errorf("alt text = %d runes, want 1000", n)
		}
		if u.Filename != "image.jpeg" {
			t.Errorf("filename = %q, want image.jpeg", u.Filename)
		}
	})
}

func TestImagineErrorsArePrivate(t *testing.T) {
	tests := []struct {
		name      string
		imgErr    error
		imgWait   time.Duration
		uploadErr error // Slack's answer to the upload (nil: it goes through)
		want      string
	}{
		{"safety rejection", &llm.Error{Kind: llm.KindContentPolicy, Status: 400, Message: "Your request was rejected by the safety system."},
			0, nil, "The image service refused this prompt: Your request was rejected by the safety system."},
		{"timeout", nil, time.Hour, nil, "The image took too long to make. Please try again."},
		{"service busy", &llm.Error{Kind: llm.KindServer, Status: 503}, 0, nil, "The image service is busy right now"},
		{"bad key", &llm.Error{Kind: llm.KindAuth, Status: 401, Message: "Incorrect API key sk-abc"}, 0, nil, notes.Auth},
		{"not in channel", nil, 0, slack.SlackErrorResponse{Err: "not_in_channel"}, "Invite me with `/invite @llmbot`"},
		{"upload refused", nil, 0, slack.SlackErrorResponse{Err: "file_uploads_disabled"}, "couldn't post it: Slack said file_uploads_disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				img := &llmtest.Imager{Wait: tt.imgWait, Err: tt.imgErr, Img: &llm.Image{Data: pngBytes, Format: "png"}}
				im, fs := newImagineTest(t, img)
				fs.UploadErr = func(int, gatewaytest.Call) error { return tt.uploadErr }
				if err := im.Run(t.Context(), imagineReq("a cat")); err == nil {
					t.Error("Run = nil, want the error")
				}
				rs := fs.CallsOf("respond")
				if len(rs) != 1 || !strings.Contains(rs[0].Text, tt.want) || rs[0].Thread != "https://hooks.slack.test/r/1" {
					t.Fatalf("responses = %+v, want one via the response_url containing %q", rs, tt.want)
				}
				if strings.Contains(rs[0].Text, "sk-abc") {
					t.Error("the API key reached Slack")
				}
			})
		})
	}
}

func TestImaginePerUserBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Wait: time.Minute, Img: &llm.Image{Data: pngBytes, Format: "png"}}
		im, fs := newImagineTest(t, img)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { mustNoErr(t, im.Run(t.Context(), imagineReq("a cat"))) })
		}
		synctest.Wait() // both jobs are running
		if ack, start := im.Accept(imagineReq("a third cat")); start || !strings.Contains(ack, "already have 2 images") {
			t.Errorf("Accept over the bound = %q, %v; want a friendly refusal", ack, start)
		}
		if _, start := im.Accept(Request{User: "U2", Text: "a dog"}); !start {
			t.Error("another user was refused")
		}
		if err := im.Run(t.Context(), imagineReq("a third cat")); !errors.Is(err, route.ErrIgnored) {
			t.Errorf("Run over the bound = %v, want route.ErrIgnored", err)
		}
		if rs := fs.CallsOf("respond"); len(rs) != 1 || !strings.Contains(rs[0].Text, "already have 2 images") {
			t.Errorf("responses = %+v, want one refusal", rs)
		}
		wg.Wait()
		if _, start := im.Accept(imagineReq("a fourth cat")); !start {
			t.Error("refused after the jobs finished")
		}
	})
}

// TestImagineAcceptHoldsThePlace: rapid repeated /imagine commands are bounded by Accept itself
// (before any job has begun), Run takes over the place Accept holds, and a place no Run takes is
// freed after a while.
func TestImagineAcceptHoldsThePlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Wait: time.Minute, Img: &llm.Image{Data: pngBytes, Format: "png"}}
		im, _ := newImagineTest(t, img)
		var starts int
		for range 3 { // three commands before any job begins
			if _, start := im.Accept(imagineReq("a cat")); start {
				starts++
			}
		}
		if starts != 2 {
			t.Fatalf("%d of 3 rapid commands accepted, want 2 (MaxPerUser)", starts)
		}
		var wg sync.WaitGroup
		for range starts {
			wg.Go(func() { mustNoErr(t, im.Run(t.Context(), imagineReq("a cat"))) })
		}
		synctest.Wait() // both jobs run, on the places Accept took
		if _, start := im.Accept(imagineReq("a cat")); start {
			t.Error("accepted a third job while two run")
		}
		wg.Wait()
		if n := len(img.Requests()); n != 2 {
			t.Errorf("%d image requests, want 2", n)
		}

		// Accepted, never run: the places are freed after acceptTTL.
		for range 2 {
			if _, start := im.Accept(imagineReq("a dog")); !start {
				t.Fatal("refused after the jobs finished")
			}
		}
		if _, start := im.Accept(imagineReq("a dog")); start {
			t.Error("accepted over the bound")
		}
		time.Sleep(acceptTTL + time.Second)
		if _, start := im.Accept(imagineReq("a dog")); !start {
			t.Error("places accepted but never run were not freed")
		}
	})
}

func TestImagineShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Wait: time.Minute, Img: &llm.Image{Data: pngBytes, Format: "png"}}
		im, fs := newImagineTest(t, img)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(route.ErrShutdown) })
		if err := im.Run(ctx, imagineReq("a cat")); err == nil {
			t.Error("Run = nil, want the error")
		}
		if rs := fs.CallsOf("respond"); len(rs) != 1 || !strings.Contains(rs[0].Text, "the bot is restarting") {
			t.Errorf("responses = %+v, want the restart notice (sent after cancellation)", rs)
		}
	})
}

// TestImagineUploadWaitsOutRateLimit: files.getUploadURLExternal and files.completeUploadExternal
// are Tier 4; a 429 with Retry-After on the upload must be waited out and the upload tried again
// within the job's time, not end the job: the picture is already made (and billed).
func TestImagineUploadWaitsOutRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Img: &llm.Image{Data: pngBytes, Format: "png"}}
		im, fs := newImagineTest(t, img)
		fs.UploadErr = func(n int, _ gatewaytest.Call) error {
			if n == 1 {
				return fmt.Errorf("files.upload: GetUploadURLExternal: %w", &slack.RateLimitedError{RetryAfter: 5 * time.Second})
			}
			return nil
		}
		start := time.Now()
		err := im.Run(t.Context(), imagineReq("a cat"))
		ups := fs.CallsOf("upload")
		if err != nil || len(ups) != 2 {
			t.Fatalf("Run = %v with %d uploads, want nil after a second upload once Retry-After passed", err, len(ups))
		}
		if d := ups[1].At.Sub(start); d < 5*time.Second {
			t.Errorf("second upload %v after the first, want at least Retry-After (5s)", d)
		}
		if rs := fs.CallsOf("respond"); len(rs) != 0 {
			t.Errorf("responses = %+v, want none: the picture was posted", rs)
		}
	})
}

// TestImagineNotInDMNoInviteAdvice: /imagine typed in a direct message between people (a D…
// channel the bot is not part of) cannot be shared there, and no one can /invite a bot into a
// DM: the person must be told where /imagine works instead of an impossible /invite.
func TestImagineNotInDMNoInviteAdvice(t *testing.T) {
	for _, code := range []string{"channel_not_found", "not_in_channel"} {
		t.Run(code, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				img := &llmtest.Imager{Img: &llm.Image{Data: pngBytes, Format: "png"}}
				im, fs := newImagineTest(t, img)
				fs.UploadErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: code} }
				req := imagineReq("a cat")
				req.Channel = "D0123ABCD"
				if err := im.Run(t.Context(), req); err == nil {
					t.Error("Run = nil, want the error")
				}
				rs := fs.CallsOf("respond")
				if len(rs) != 1 {
					t.Fatalf("responses = %+v, want one", rs)
				}
				if strings.Contains(rs[0].Text, "/invite") {
					t.Errorf("response %q tells the person to /invite the bot into a direct message, which Slack does not allow", rs[0].Text)
				}
			})
		})
	}
}

// blockingUploader is an Uploader whose upload lasts until ctx ends, then fails as slack-go does
// (the HTTP client reports ctx.Err(), not its cause).
type blockingUploader struct{}

func (blockingUploader) UploadImage(ctx context.Context, u gateway.Upload) error {
	<-ctx.Done()
	return fmt.Errorf("files.upload: UploadToURL: %w", &url.Error{Op: "Post", URL: "https://files.slack.com/upload/v1/x", Err: ctx.Err()})
}

// TestImagineShutdownDuringUploadIsShutdown: a job the shutdown interrupts while the picture is
// being uploaded ends with route.ErrShutdown (as one interrupted while the picture is made does, and as
// Reply does), so the bot logs it as "interrupted" and counts it as outcome "shutdown", not as a
// failed job at error level on every deploy.
func TestImagineShutdownDuringUploadIsShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Img: &llm.Image{Data: pngBytes, Format: "png"}}
		fs := gatewaytest.NewSlack()
		im := New(img, blockingUploader{}, fs, zaptest.NewLogger(t), Options{BotName: "llmbot"})
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(route.ErrShutdown) })
		err := im.Run(ctx, imagineReq("a cat"))
		if rs := fs.CallsOf("respond"); len(rs) != 1 || !strings.Contains(rs[0].Text, "the bot is restarting") {
			t.Errorf("responses = %+v, want the restart notice", rs)
		}
		if !errors.Is(err, route.ErrShutdown) {
			t.Errorf("Run = %v, want an error that is route.ErrShutdown", err)
		}
	})
}

// TestImagineUploadFailureTexts: what the person is told when the picture was made but could not be
// shared, by the upload's error and channel.
func TestImagineUploadFailureTexts(t *testing.T) {
	im, _ := newImagineTest(t, &llmtest.Imager{})
	for _, tc := range []struct {
		name    string
		channel string
		err     error
		want    string
	}{
		{"not in a channel", "C1", slack.SlackErrorResponse{Err: "not_in_channel"}, "Invite me with `/invite @llmbot`"},
		{"not in a DM between people", "D1", slack.SlackErrorResponse{Err: "channel_not_found"}, "in a direct message with me, or in a channel I'm in"},
		{"missing scope", "C1", slack.SlackErrorResponse{Err: "missing_scope", ResponseMetadata: slack.ResponseMetadata{}}, "missing a Slack permission"},
		{"429 with Retry-After", "C1", fmt.Errorf("files.upload: %w", &slack.RateLimitedError{RetryAfter: time.Minute}), "Slack is rate limiting the bot"},
		{"429 without Retry-After", "C1", fmt.Errorf("files.upload: %w", slack.StatusCodeError{Code: 429, Status: "429 Too Many Requests"}), "Slack is rate limiting the bot"},
		{"Slack 503", "C1", fmt.Errorf("files.upload: %w", slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}), "Slack is having trouble (HTTP 503)"},
		{"timeout", "C1", fmt.Errorf("files.upload: %w", context.DeadlineExceeded), "Slack did not answer in time"},
		{"network", "C1", fmt.Errorf("files.upload: %w", &url.Error{Op: "Post", URL: "https://files.slack.com/…", Err: errors.New("connection refused")}), "Slack could not be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := im.uploadFailure(t.Context(), tc.channel, tc.err); !strings.Contains(got, tc.want) {
				t.Errorf("uploadFailure = %q, want it to say %q", got, tc.want)
			}
		})
	}
}

// TestImagineUploadRateLimitBeyondTheJob: a Retry-After longer than the job has left is not waited
// for: the person is told at once that Slack is rate limiting the bot.
func TestImagineUploadRateLimitBeyondTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Img: &llm.Image{Data: pngBytes, Format: "png"}}
		fs := gatewaytest.NewSlack()
		im := New(img, fs, fs, zaptest.NewLogger(t), Options{BotName: "llmbot", Timeout: time.Minute})
		fs.UploadErr = func(int, gatewaytest.Call) error { return &slack.RateLimitedError{RetryAfter: 2 * time.Minute} }
		start := time.Now()
		if err := im.Run(t.Context(), imagineReq("a cat")); err == nil {
			t.Error("Run = nil, want the rate limit")
		}
		if ups, took := len(fs.CallsOf("upload")), time.Since(start); ups != 1 || took > 0 {
			t.Errorf("%d uploads over %v, want one and no wait", ups, took)
		}
		if rs := fs.CallsOf("respond"); len(rs) != 1 || !strings.Contains(rs[0].Text, "rate limiting") {
			t.Errorf("responses = %+v, want the rate limit explained", rs)
		}
	})
}

func mustNoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestButtonsImagineAnotherOne(t *testing.T) {
	tests := []struct {
		name    string
		prompt  string
		buttons bool
		want    string // buttonKey of the upload
		value   string // the value of its button ("": no button)
	}{
		{"button with the prompt", "a fox in the snow", true, ActionImagineAgain, "a fox in the snow"},
		{"prompt too long for a button value", strings.Repeat("fox ", 501), true, "", ""},
		{"buttons off", "a fox in the snow", false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := gatewaytest.NewSlack()
			img := &llmtest.Imager{Img: &llm.Image{Data: []byte("png"), Format: "png"}}
			im := New(img, fs, fs, zaptest.NewLogger(t), Options{Buttons: tt.buttons})
			mustNoErr(t, im.Run(t.Context(), Request{Channel: "C1", User: "U2", Team: "T1", Text: tt.prompt}))
			ups := fs.CallsOf("upload")
			if len(ups) != 1 {
				t.Fatalf("uploads = %d, want 1", len(ups))
			}
			b := ups[0].Upload.Buttons
			if buttonKey(b) != tt.want {
				t.Fatalf("buttons = %+v, want %q", b, tt.want)
			}
			var value string // of the one button buttonKey found, if any
			for _, x := range b {
				value = x.Value
			}
			if value != tt.value || utf8.RuneCountInString(value) > gateway.MaxButtonValue {
				t.Errorf("button value = %q, want %q", value, tt.value)
			}
		})
	}
}

// buttonKey identifies a set of buttons, to tell whether a message shows the wanted ones.
func buttonKey(bs []gateway.Button) string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.ActionID
	}
	return strings.Join(ids, ",")
}

// Text the bot writes outside the renderers can come from the model too: an image model's revised
// prompt under the picture. It mentions no one, however it writes the mention.
func TestRevisedPromptMentionsNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &llmtest.Imager{Wait: time.Second, Img: &llm.Image{Data: pngBytes, Format: "png", MIMEType: "image/png",
			RevisedPrompt: "A lighthouse, @here and &#64;channel"}}
		im, fs := newImagineTest(t, img)
		mustNoErr(t, im.Run(t.Context(), imagineReq("a lighthouse")))
		ups := fs.CallsOf("upload")
		if len(ups) != 1 {
			t.Fatalf("uploads = %d, want 1", len(ups))
		}
		if c := ups[0].Upload.Comment; !strings.Contains(c, "@\u2060here and &amp;#64;\u2060channel") {
			t.Errorf("comment %q: want the revised prompt's mentions neutralised", c)
		}
	})
}

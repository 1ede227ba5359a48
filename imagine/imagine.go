// Package imagine is the /imagine use case: a picture made by the image model for a prompt and
// uploaded to the channel, crediting the person who asked, and the "Another one" button under it
// (ActionImagineAgain: the same prompt, a new picture, for and counted against the person who
// pressed it: per-user bound and daily quota). Failures are told privately (response_url).
package imagine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// Imager generates images (llm.Client).
type Imager interface {
	Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error)
}

// Request is an /imagine command, or a click on "Another one".
type Request struct {
	Channel, User, Team, Text, ResponseURL string
}

// Options configure Imagine. Zero values get the documented defaults.
type Options struct {
	BotName    string        // for "/invite @<bot name>"
	Model      string        // image model; "": the client's default
	MaxPerUser int           // image jobs one person may have running; default 2
	Timeout    time.Duration // whole job (generation and upload); default 4 min
	// Buttons puts an "Another one" button on each picture (same prompt, a new picture). Prompts
	// longer than a button value (2,000 characters) get none.
	Buttons bool
	// ShutdownTimeout bounds the private note of a job interrupted by route.ErrShutdown, so it fits the
	// bot's grace period (bot.CloseReserve). Default 2 s.
	ShutdownTimeout time.Duration
}

// Limits of what Imagine writes.
const (
	maxAltText     = 1000
	maxTitle       = 100
	respondTimeout = 10 * time.Second
)

// Command is the slash command Imagine serves (with ActionImagineAgain); access rules and metrics
// call both access.FeatureImagine, the feature the daily quota counts.
const Command = "/imagine"

// ActionImagineAgain is the "Another one" button under a picture. Its value is the prompt.
const ActionImagineAgain = "llmbot_imagine_again"

const labelAnother = "Another one"

// Imagine makes a picture for /imagine and uploads it to the channel.
type Imagine struct {
	img  Imager
	up   gateway.Uploader
	resp gateway.Responder
	log  *zap.Logger
	opt  Options

	mu   sync.Mutex
	jobs map[string]*userJobs // user -> jobs accepted or running
}

// userJobs are one person's image jobs: running (in Run) and accepted (Accept said "Generating…",
// Run has not begun yet). Both count against MaxPerUser, so rapid repeated commands cannot all be
// accepted before the first job starts.
type userJobs struct {
	running  int
	accepted []time.Time // when each was accepted, oldest first
}

// acceptTTL is how long an accepted job holds its place without Run beginning. The bot runs every
// accepted job, but maybe only after a wait for a place among the answers in progress (its queue);
// this frees the place only when a caller accepted and then did not run it, so it is longer than
// any such wait.
const acceptTTL = 15 * time.Minute

// prune drops accepted places older than acceptTTL.
func (u *userJobs) prune(now time.Time) {
	i := 0
	for i < len(u.accepted) && now.Sub(u.accepted[i]) > acceptTTL {
		i++
	}
	u.accepted = u.accepted[i:]
}

func (u *userJobs) count() int { return u.running + len(u.accepted) }

// New returns Imagine over the given image, upload and response_url interfaces.
func New(img Imager, up gateway.Uploader, r gateway.Responder, log *zap.Logger, opt Options) *Imagine {
	if opt.MaxPerUser <= 0 {
		opt.MaxPerUser = 2
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 4 * time.Minute
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = 2 * time.Second
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Imagine{img: img, up: up, resp: r, log: log, opt: opt, jobs: make(map[string]*userJobs)}
}

// Accept returns the text of the command's ack (shown only to the user) and whether Run should follow.
// It does no I/O, so the ack goes out at once. An empty prompt gets usage help; a user already at the
// per-user bound is told to wait. When it says start, the job holds its place in the per-user bound
// from now on: Run takes the place over (a place Run does not take within acceptTTL is freed).
func (i *Imagine) Accept(req Request) (ackText string, start bool) {
	prompt := strings.TrimSpace(req.Text)
	if prompt == "" {
		return usageText, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	u := i.userLocked(req.User)
	if u.count() >= i.opt.MaxPerUser {
		return i.busyText(), false
	}
	u.accepted = append(u.accepted, time.Now())
	shown := notes.OneLine(prompt, 300)
	if !strings.HasSuffix(shown, "…") { // a cut prompt ends in one already
		shown += "…"
	}
	return "Generating an image for: " + slackmd.EscapeMrkdwn(shown), true
}

// userLocked returns user's jobs (made on first use), with stale accepted places dropped.
func (i *Imagine) userLocked(user string) *userJobs {
	u := i.jobs[user]
	if u == nil {
		u = &userJobs{}
		i.jobs[user] = u
	}
	u.prune(time.Now())
	return u
}

const usageText = "Usage: `/imagine <what to draw>` — for example `/imagine a lighthouse at dawn, watercolour`. " +
	"I'll post the picture in this channel."

func (i *Imagine) busyText() string {
	return fmt.Sprintf("You already have %d images in progress. Please wait for one to finish, then try again.", i.opt.MaxPerUser)
}

// Run generates the image and uploads it to the channel, crediting the user. Failures are told to the
// user privately (response_url) and returned for the caller to log; a job over the per-user bound is
// refused with a private message and route.ErrIgnored.
func (i *Imagine) Run(ctx context.Context, req Request) error {
	prompt := strings.TrimSpace(req.Text)
	if prompt == "" {
		return route.ErrIgnored
	}
	log := i.log.With(zap.String("channel", req.Channel), zap.String("user", req.User))
	if !i.acquire(req.User) {
		i.respond(ctx, log, req, i.busyText())
		return route.ErrIgnored
	}
	defer i.release(req.User)

	start := time.Now()
	jctx, cancel := context.WithTimeout(ctx, i.opt.Timeout)
	defer cancel()
	img, err := i.img.Image(jctx, llm.ImageRequest{Model: i.opt.Model, Prompt: prompt, User: safetyID(req.Team, req.User)})
	if err != nil {
		i.respond(ctx, log, req, imageFailure(ctx, err))
		return fmt.Errorf("image: %w", err)
	}
	genTime := time.Since(start)
	ext := img.Format
	if ext == "" {
		ext = "png"
	}
	comment := fmt.Sprintf("<@%s> asked for: %s", req.User, slackmd.EscapeMrkdwn(prompt))
	if rp := strings.TrimSpace(img.RevisedPrompt); rp != "" && rp != prompt {
		comment += "\n_Revised prompt: " + slackmd.EscapeMrkdwn(notes.OneLine(slackmd.Neutralise(rp), 1000)) + "_"
	}
	var buttons []gateway.Button
	if i.opt.Buttons && len([]rune(prompt)) <= gateway.MaxButtonValue {
		buttons = []gateway.Button{{ActionID: ActionImagineAgain, Text: labelAnother, Value: prompt}}
	}
	err = i.upload(jctx, log, gateway.Upload{
		Channel:  req.Channel,
		Filename: "image." + ext,
		Title:    truncateRunes(notes.OneLine(prompt, maxTitle), maxTitle),
		Data:     img.Data,
		Comment:  comment,
		AltText:  truncateRunes(prompt, maxAltText),
		Buttons:  buttons,
	})
	if err != nil {
		i.respond(ctx, log, req, i.uploadFailure(ctx, req.Channel, err))
		if cause := context.Cause(ctx); ctx.Err() != nil && errors.Is(cause, route.ErrShutdown) {
			// slack-go reports ctx.Err(), not its cause: the caller tells a shutdown by route.ErrShutdown.
			return fmt.Errorf("upload image: %w: %w", cause, err)
		}
		return fmt.Errorf("upload image: %w", err)
	}
	log.Info("image done", zap.Duration("image_time", genTime), zap.Duration("duration", time.Since(start)),
		zap.Int("bytes", len(img.Data)), zap.String("format", img.Format))
	log.Debug("image prompt", zap.String("prompt", prompt))
	return nil
}

// maxUploadAttempts bounds the uploads of one picture that Slack rate-limits (429).
const maxUploadAttempts = 3

// upload shares the picture, waiting out a 429's Retry-After (the picture is made, and paid for)
// while the job's time allows.
func (i *Imagine) upload(ctx context.Context, log *zap.Logger, u gateway.Upload) error {
	for attempt := 1; ; attempt++ {
		err := i.up.UploadImage(ctx, u)
		ra, limited := gateway.RateLimited(err)
		if !limited || attempt == maxUploadAttempts {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < ra {
			return err // the job would end first
		}
		log.Debug("image upload rate limited; waiting", zap.Duration("retry_after", ra), zap.Int("attempt", attempt))
		if watch.Sleep(ctx, ra) != nil {
			return err
		}
	}
}

// acquire starts a job of user's: it takes over the oldest place Accept holds, or else takes a new
// one within the bound (a Run without Accept). false: the user is at the bound.
func (i *Imagine) acquire(user string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	u := i.userLocked(user)
	switch {
	case len(u.accepted) > 0:
		u.accepted = u.accepted[1:]
	case u.count() >= i.opt.MaxPerUser:
		i.forgetLocked(user, u)
		return false
	}
	u.running++
	return true
}

func (i *Imagine) release(user string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	u := i.jobs[user]
	u.running--
	i.forgetLocked(user, u)
}

// forgetLocked drops a user with no jobs, so the map holds only people with jobs.
func (i *Imagine) forgetLocked(user string, u *userJobs) {
	if u.count() == 0 {
		delete(i.jobs, user)
	}
}

// respond tells the user privately, on a context that outlives a cancelled job. A failure here is only
// logged: the job's own error is what Run returns.
func (i *Imagine) respond(ctx context.Context, log *zap.Logger, req Request, text string) {
	if req.ResponseURL == "" {
		return
	}
	timeout := respondTimeout
	if errors.Is(context.Cause(ctx), route.ErrShutdown) {
		timeout = min(timeout, i.opt.ShutdownTimeout)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := i.resp.Respond(rctx, req.ResponseURL, text); err != nil {
		log.Warn("response_url", zap.Error(err))
	}
}

// imageFailure is what the user is told when the image call failed.
func imageFailure(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), route.ErrShutdown) {
			return "Your image was interrupted: the bot is restarting. Please try `/imagine` again in a moment."
		}
		return "Your image was cancelled."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "The image took too long to make. Please try again."
	}
	var le *llm.Error
	if errors.As(err, &le) {
		switch le.Kind {
		case llm.KindContentPolicy:
			if msg := notes.OneLine(le.Message, 300); msg != "" {
				return "The image service refused this prompt: " + slackmd.EscapeMrkdwn(msg)
			}
			return "The image service refused this prompt."
		case llm.KindBadRequest:
			if msg := notes.OneLine(le.Message, 300); msg != "" {
				return "The image service refused the request: " + slackmd.EscapeMrkdwn(msg)
			}
			return "The image service refused the request."
		case llm.KindTimeout:
			return "The image took too long to make. Please try again."
		case llm.KindRateLimit, llm.KindServer, llm.KindConnection:
			return "The image service is busy right now, please try again in a minute."
		case llm.KindQuota:
			return notes.Quota
		case llm.KindAuth:
			return notes.Auth
		}
	}
	return "Something went wrong while making your image, please try again."
}

// uploadFailure is what the user is told when the upload failed.
func (i *Imagine) uploadFailure(ctx context.Context, channel string, err error) string {
	switch gateway.SlackErr(err) {
	case "not_in_channel", "channel_not_found":
		if strings.HasPrefix(channel, "D") { // a DM between people: no one can add an app to it
			return "I can't post in this conversation: apps can only post in direct messages with themselves. " +
				"Try `/imagine` in a direct message with me, or in a channel I'm in."
		}
		name := i.opt.BotName
		if name == "" {
			name = "the bot"
		} else {
			name = "@" + name
		}
		return fmt.Sprintf("I can't post in this channel because I'm not a member. Invite me with `/invite %s` and try again.", name)
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), route.ErrShutdown) {
		return "Your image was interrupted: the bot is restarting. Please try `/imagine` again in a moment."
	}
	return "The image was made but I couldn't post it: " + notes.Slack(err) + "."
}

// safetyID is the user identifier sent to the image service: a hash, never the raw Slack id.
func safetyID(team, user string) string {
	sum := sha256.Sum256([]byte(team + ":" + user))
	return hex.EncodeToString(sum[:12])
}

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// Jobs runs /imagine jobs (*Imagine): Accept says at once whether one starts, and its text.
type Jobs interface {
	Accept(req Request) (ackText string, start bool)
	Run(ctx context.Context, req Request) error
}

// Handler serves /imagine and ActionImagineAgain with i (JobsHandler).
func (i *Imagine) Handler() route.Handler { return JobsHandler(i) }

// JobsHandler serves /imagine and ActionImagineAgain (the same prompt again, for the person who
// pressed it) with j: Accept's text is the command's ack, or is told privately to the clicker.
func JobsHandler(j Jobs) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			text, start := j.Accept(imagineRequest(req))
			return route.Decision{Run: start, Say: text}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error { return j.Run(ctx, imagineRequest(req)) },
	}
}

func imagineRequest(req *route.Request) Request {
	return Request{Channel: req.Channel, User: req.User, Team: req.Team, Text: req.Text, ResponseURL: req.ResponseURL}
}

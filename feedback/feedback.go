// Package feedback is the feedback use case: 👍/👎 (Slack's feedback buttons, route.ActionFeedback)
// under a final answer's last message, which the answers put there (handlers' ReplyOptions.Feedback,
// with Buttons), and the comment modal. Every rating is counted (Options.Rated, by place
// and model: no channel ids, no text); a 👎 opens a short modal asking, optionally, what was wrong,
// and with Options.Channel set each 👎, and then its comment, is posted there with a link
// to the answer, for the people who run the bot. No comment is ever logged above debug.
package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// Feedback's action, modal and input ids.
const (
	// Action is the buttons' action id, which the answers that put them name in route.
	Action = route.ActionFeedback
	View   = "llmbot_feedback_comment"
	// CommentInput is the action_id of the modal's comment input.
	CommentInput = "comment"
	// Feature is what access rules and metrics call the buttons and the modal.
	Feature = "feedback"
)

// Feedback's labels and texts.
const (
	labelGood            = "Good answer"
	labelBad             = "Bad answer"
	feedbackTitle        = "What went wrong?"
	feedbackPrompt       = "Thanks, that helps. If you like, say what was wrong or missing: the people who run this bot read it."
	feedbackInputLabel   = "Comment (optional)"
	feedbackSubmit       = "Send"
	feedbackCommentLimit = 2000 // characters of a comment kept
	feedbackTimeout      = 10 * time.Second
)

// feedbackValue is a feedback button's value: the rating and the answer it is on.
type feedbackValue struct {
	Good bool `json:"good"`
	route.ReplyRef
}

// Values are the values of the 👍 and 👎 of a feedback Button (its Value a route.ReplyRef's).
func Values(refValue string) (good, bad string) {
	ref, err := route.ParseReplyRef(refValue)
	if err != nil {
		return "", ""
	}
	g, _ := json.Marshal(feedbackValue{Good: true, ReplyRef: ref}) // strings and a bool: cannot fail
	b, _ := json.Marshal(feedbackValue{Good: false, ReplyRef: ref})
	return string(g), string(b)
}

// Labels are the 👍 and 👎 labels (their accessibility text).
func Labels() (good, bad string) { return labelGood, labelBad }

// Parse reads a feedback click's value.
func Parse(value string) (good bool, ref route.ReplyRef, err error) {
	var v feedbackValue
	if err := json.Unmarshal([]byte(value), &v); err != nil || v.TS == "" {
		return false, route.ReplyRef{}, fmt.Errorf("feedback value: %w", route.ErrBadValue)
	}
	return v.Good, v.ReplyRef, nil
}

// Views opens modals (views.open).
type Views interface {
	OpenModal(ctx context.Context, triggerID string, m gateway.Modal) error
}

// Permalinks finds a message's permalink (chat.getPermalink).
type Permalinks interface {
	Permalink(ctx context.Context, channel, ts string) (string, error)
}

// Options configure Feedback.
type Options struct {
	// Channel, when set, is where each 👎 and its comment are posted (FEEDBACK_CHANNEL).
	Channel string
	// Model returns the chat model that answers in a channel (its override, else the default).
	Model func(channel string) string
	// Rated, when set, counts a rating (metrics): place is "dm" or "channel". It must not block.
	Rated func(good bool, place, model string)
}

// Feedback serves the feedback buttons and the 👎 modal.
type Feedback struct {
	views Views
	msgs  gateway.Messenger
	links Permalinks
	log   *zap.Logger
	opt   Options
}

// New returns Feedback over Slack's modals, messages and permalinks.
func New(v Views, m gateway.Messenger, l Permalinks, log *zap.Logger, opt Options) *Feedback {
	if log == nil {
		log = zap.NewNop()
	}
	return &Feedback{views: v, msgs: m, links: l, log: log, opt: opt}
}

// Handler serves Action: the rating is counted at once; a 👎 then opens the comment modal
// (with the click's trigger, which Slack honours for 3 seconds) and, with a feedback channel,
// is posted there.
func (f *Feedback) Handler() route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			good, _, err := Parse(req.Text)
			if err != nil {
				f.log.Warn("feedback click ignored", zap.Error(err))
				return route.Decision{}
			}
			if f.opt.Rated != nil {
				f.opt.Rated(good, place(req.Channel), f.model(req.Channel))
			}
			f.log.Info("feedback", zap.String("channel", req.Channel), zap.String("user", req.User), zap.Bool("good", good))
			// Now: the modal must open within the trigger's 3 seconds, however many answers wait.
			return route.Decision{Run: !good, Now: !good}
		},
		RunFunc: f.bad,
	}
}

// bad opens the comment modal for a 👎 and posts the 👎 to the feedback channel.
func (f *Feedback) bad(ctx context.Context, req *route.Request) error {
	_, ref, err := Parse(req.Text)
	if err != nil {
		return nil // Accept ran nothing for it
	}
	ctx, cancel := context.WithTimeout(ctx, feedbackTimeout)
	defer cancel()
	var errs []error
	if req.TriggerID != "" && f.views != nil {
		where := route.ViewPlace{Channel: req.Channel, ThreadTS: ref.ThreadTS, MessageTS: req.MessageTS}
		err := f.views.OpenModal(ctx, req.TriggerID, gateway.Modal{CallbackID: View, Title: feedbackTitle,
			Text: feedbackPrompt, Submit: feedbackSubmit, InputLabel: feedbackInputLabel,
			InputActionID: CommentInput, Metadata: where.Metadata()})
		if err != nil {
			errs = append(errs, fmt.Errorf("views.open: %w", err))
		}
	}
	if f.opt.Channel != "" {
		// The person by id, not a mention: a mention would notify them of the feedback channel.
		text := "👎 from user " + req.User + " on " + f.link(ctx, req.Channel, req.MessageTS) + " (" + f.model(req.Channel) + ")."
		if err := f.post(ctx, text); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("feedback: %w", errors.Join(errs...))
	}
	return nil
}

// CommentHandler serves View, the 👎 modal submitted: its comment, if any, is posted to
// the feedback channel (nothing is kept without one).
func (f *Feedback) CommentHandler() route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			comment := strings.TrimSpace(req.Values[CommentInput])
			f.log.Debug("feedback comment", zap.String("channel", req.Channel), zap.String("text", comment))
			return route.Decision{Run: comment != "" && f.opt.Channel != ""}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error {
			ctx, cancel := context.WithTimeout(ctx, feedbackTimeout)
			defer cancel()
			comment := clip(slackmd.StripControls(strings.TrimSpace(req.Values[CommentInput])), feedbackCommentLimit)
			quoted := "> " + strings.ReplaceAll(slackmd.EscapeMrkdwn(comment), "\n", "\n> ")
			return f.post(ctx, "Comment on a 👎 from user "+req.User+" on "+f.link(ctx, req.Channel, req.MessageTS)+":\n"+quoted)
		},
	}
}

// link is a link to the message ts in channel, or the channel's name when its permalink cannot
// be had.
func (f *Feedback) link(ctx context.Context, channel, ts string) string {
	if f.links != nil && ts != "" {
		l, err := f.links.Permalink(ctx, channel, ts)
		if err == nil {
			return "<" + l + "|an answer> in <#" + channel + ">"
		}
		f.log.Info("feedback: no permalink", zap.Error(err))
	}
	return "an answer in <#" + channel + ">"
}

// post posts text in the feedback channel.
func (f *Feedback) post(ctx context.Context, text string) error {
	if _, err := f.msgs.Post(ctx, f.opt.Channel, "", gateway.Msg{Text: text}); err != nil {
		return fmt.Errorf("post to the feedback channel: %w", err)
	}
	return nil
}

func (f *Feedback) model(channel string) string {
	if f.opt.Model == nil {
		return ""
	}
	return f.opt.Model(channel)
}

// place is a bounded name of where an answer was: "dm" or "channel" (never the channel's id, which
// would make a metric label without bound).
func place(channel string) string {
	if route.ChannelType(channel) == "im" {
		return "dm"
	}
	return "channel"
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

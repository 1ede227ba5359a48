package bot

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/feedback"
	"github.com/llmbot/llmbot/gateway"
)

// Compile-time checks: SlackAPI is what the handlers need.
var (
	_ gateway.Thread           = (*SlackAPI)(nil)
	_ gateway.Messenger        = (*SlackAPI)(nil)
	_ gateway.Streamer         = (*SlackAPI)(nil)
	_ gateway.Uploader         = (*SlackAPI)(nil)
	_ gateway.Responder        = (*SlackAPI)(nil)
	_ gateway.PrivateResponder = (*SlackAPI)(nil)
	_ gateway.Users            = (*SlackAPI)(nil)
	_ Notifier                 = (*SlackAPI)(nil)
)

// SlackAPI adapts the Slack Web API (a *slack.Client) to the gateway's interfaces (and to a few of
// the use cases' own: modals, permalinks, users for the access guard). Errors are
// wrapped with the method name and keep slack-go's types reachable with errors.As
// (*slack.RateLimitedError, slack.SlackErrorResponse, slack.StatusCodeError). Tokens never
// appear in its errors (slack-go sends them in headers or bodies, not URLs).
//
// Retries: none here. Reads (conversations.replies/history, users.info) and writes are paced by
// the handlers (package pace; gateway.Budgets: Reads, Lookups, Edits, Posts...), which must see
// each 429 to slow everyone down, so a 429 comes back at once, typed, and slack.OptionRetry must not
// be set on the client.
type SlackAPI struct {
	// Assistant is the same client's calls to Slack's assistant and agent surfaces.
	Assistant *SlackAssistant

	c           *slack.Client
	hc          *http.Client // for response_url posts, which slack-go writes without the unfurl flags
	threadBytes int          // what Replies keeps of a thread (0: all); see ThreadBytes
}

// NewSlackAPI wraps c (built without slack.OptionRetry and without slack.OptionDebug); hc is the
// HTTP client c was built with (nil: http.DefaultClient), for the posts to a response_url. Replies
// keeps a thread's parent and its newest messages within threadBytes (0: the whole thread).
func NewSlackAPI(c *slack.Client, hc *http.Client, threadBytes int) *SlackAPI {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &SlackAPI{Assistant: &SlackAssistant{c: c}, c: c, hc: hc, threadBytes: threadBytes}
}

// Identify calls auth.test: who the bot token belongs to.
func (a *SlackAPI) Identify(ctx context.Context) (Identity, error) {
	r, err := a.c.AuthTestContext(ctx)
	if err != nil {
		return Identity{}, fmt.Errorf("auth.test: %w", err)
	}
	return Identity{UserID: r.UserID, BotID: r.BotID, TeamID: r.TeamID, Name: r.User, TeamName: r.Team,
		EnterpriseID: r.EnterpriseID}, nil
}

// AppID returns the Slack app a bot belongs to (bots.info, with users:read), or "" when Slack does
// not say.
func (a *SlackAPI) AppID(ctx context.Context, botID string) string {
	bot, err := a.c.GetBotInfoContext(ctx, slack.GetBotInfoParameters{Bot: botID})
	if err != nil {
		return ""
	}
	return bot.AppID
}

// IdentifyRetrying is Identify, each attempt bounded by attempt, tried again while Slack cannot be
// reached or fails on its side (network, timeout, 5xx, 429), after a growing wait (1 s, 2 s, ... 30 s,
// or a 429's Retry-After), each failure reported to retrying: a bot that starts during a Slack
// incident, or before its pod's network is up, waits instead of exiting (and being restarted with
// Kubernetes' growing back-off). Slack's own answers (invalid_auth, ...) and other HTTP errors (a
// wrong SLACK_API_URL) return at once, and so does ctx's end.
func (a *SlackAPI) IdentifyRetrying(ctx context.Context, attempt time.Duration, retrying func(err error, wait time.Duration)) (Identity, error) {
	wait := time.Second
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		id, err := a.Identify(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !identifyTransient(err) {
			return id, err
		}
		d := wait
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			d = max(d, rl.RetryAfter)
		}
		retrying(err, d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Identity{}, err
		case <-t.C:
		}
		wait = min(2*wait, maxIdentifyWait)
	}
}

// maxIdentifyWait bounds the wait between IdentifyRetrying's attempts.
const maxIdentifyWait = 30 * time.Second

// identifyTransient reports whether an auth.test failure may go away by itself: no answer (a
// refused or reset connection, a timeout, a DNS failure: a sidecar or DNS server not ready yet may
// say "no such host" too), a 5xx, a 429, or a certificate out of its dates (a clock not yet synced
// at boot). Slack's answers (ok: false), other statuses, a certificate nobody trusts or for another
// host, a proxy refusing the bot's credentials and a web page instead of the API need someone to
// fix the settings.
func identifyTransient(err error) bool {
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &se):
		return se.Err == "ratelimited" || se.Err == "fatal_error" || se.Err == "internal_error" || se.Err == "service_unavailable"
	case errors.As(err, new(*slack.RateLimitedError)):
		return true
	case errors.As(err, &sc):
		return sc.Code >= 500 || sc.Code == 429
	case errors.As(err, new(*net.DNSError)):
		return true
	case errors.As(err, &invalid):
		return invalid.Reason == x509.Expired
	case errors.As(err, new(*tls.CertificateVerificationError)), errors.As(err, new(x509.UnknownAuthorityError)),
		errors.As(err, new(x509.HostnameError)):
		return false
	case errors.As(err, new(*json.SyntaxError)), errors.As(err, new(*json.UnmarshalTypeError)):
		return false // a 200 that is not the Web API: SLACK_API_URL names a web site
	case strings.Contains(err.Error(), "Proxy Authentication Required"): // net/http's CONNECT error is a bare string
		return false
	}
	return true
}

// maxThreadPages bounds conversations.replies pagination (200 messages a page).
const maxThreadPages = 50

// Replies returns a thread's parent, the beginning of its replies and its newest ones, oldest
// first, with metadata (gateway.ThreadWindow: the newest within the byte budget the SlackAPI was
// made with, all when it is 0; the beginning within half of it), and how many replies it left out
// between them. Slack pages a thread oldest first, so the whole thread is paged through, but the
// replies between the beginning and the newest are dropped as pages arrive: what is held is the
// parent, the window and a page. gateway.ThreadReads reads page by page instead (RepliesPage),
// each page within the read budget.
func (a *SlackAPI) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	w := gateway.NewThreadWindow(a.threadBytes)
	cursor := ""
	for range maxThreadPages {
		msgs, next, err := a.RepliesPage(ctx, channel, threadTS, cursor)
		if err != nil {
			return nil, 0, err
		}
		w.Add(msgs)
		if next == "" {
			break
		}
		cursor = next // past maxThreadPages (10,000 messages), the newest of those read are enough
	}
	msgs, leftOut := w.Messages()
	return msgs, leftOut, nil
}

// RepliesPage returns the page of a thread after cursor ("": the first), 200 messages with
// metadata, oldest first, and the next page's cursor ("": none).
func (a *SlackAPI) RepliesPage(ctx context.Context, channel, threadTS, cursor string) ([]slack.Message, string, error) {
	msgs, hasMore, next, err := a.c.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
		ChannelID: channel, Timestamp: threadTS, Cursor: cursor, Limit: 200, IncludeAllMetadata: true,
	})
	if err != nil {
		return nil, "", fmt.Errorf("conversations.replies: %w", err)
	}
	if !hasMore {
		next = ""
	}
	return msgs, next, nil
}

// ThreadBytes bounds the newest replies a read keeps (0: all): see gateway.ThreadWindow.
func (a *SlackAPI) ThreadBytes() int { return a.threadBytes }

// ThreadBytes is the budget of a thread read's newest messages for a context of contextTokens
// tokens: 4 bytes a token of text, twice (gateway.MessageBytes counts the text twice), and room for the
// fixed parts of the messages, so that the read always holds more than the context can take. The
// read keeps the thread's beginning too, within half as much (gateway.ThreadWindow).
func ThreadBytes(contextTokens int) int {
	return 2*4*contextTokens + 256<<10
}

// ThreadHeldBytes is what a thread read holds at most for a context of contextTokens tokens: its
// newest messages (ThreadBytes) and its beginning (half as much), in gateway.MessageBytes.
func ThreadHeldBytes(contextTokens int) int {
	return ThreadBytes(contextTokens) * 3 / 2
}

// History returns the latest limit messages of a channel, oldest first, with metadata.
func (a *SlackAPI) History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	var newestFirst []slack.Message
	cursor := ""
	for len(newestFirst) < limit {
		resp, err := a.c.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Cursor: cursor, Limit: min(limit-len(newestFirst), 200), IncludeAllMetadata: true,
			Latest: latest, Inclusive: latest != "",
		})
		if err != nil {
			return nil, fmt.Errorf("conversations.history: %w", err)
		}
		newestFirst = append(newestFirst, resp.Messages...)
		cursor = resp.ResponseMetaData.NextCursor
		if !resp.HasMore || cursor == "" || len(resp.Messages) == 0 {
			break
		}
	}
	if len(newestFirst) > limit {
		newestFirst = newestFirst[:limit]
	}
	slices.Reverse(newestFirst)
	return newestFirst, nil
}

// noUnfurl turns off both of Slack's previews of the links in a message: of pages
// (unfurl_links) and of pictures and media (unfurl_media). Slack fetches a link to preview it
// without anyone clicking it, so a link the model wrote could carry the thread's text out in
// its query string. Every call that writes text sends it: Slack documents the flags for
// chat.postMessage and message payloads; the other methods are sent them too (Slack ignores
// arguments a method does not take), so no write depends on which ones preview links.
var noUnfurl = []slack.MsgOption{slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}

// withText is opts followed by noUnfurl: the options of a call that writes text.
func withText(opts ...slack.MsgOption) []slack.MsgOption {
	return append(opts, noUnfurl...)
}

// msgOptions are the options every message the bot writes carries: mrkdwn text as is (already
// escaped by convo), the mark as metadata, and no link previews (noUnfurl). With
// buttons, Slack shows the blocks (the text in sections, then the buttons) and text is the
// notification fallback; an empty, non-nil Buttons sends "blocks=[]" to take earlier buttons off.
// Blocks (a table's, package tables) take the sections' place.
func msgOptions(m gateway.Msg) []slack.MsgOption {
	opts := withText(slack.MsgOptionText(m.Text, false))
	if m.Mark.Kind != "" {
		opts = append(opts, slack.MsgOptionMetadata(m.Mark.Metadata()))
	}
	switch {
	case m.Blocks != nil:
		opts = append(opts, slack.MsgOptionBlocks(append(slices.Clip(m.Blocks), controlBlocks(m.Buttons)...)...))
	case m.Buttons != nil:
		opts = append(opts, slack.MsgOptionBlocks(buttonBlocks(m.Text, m.Buttons)...))
	}
	return opts
}

// sectionLimit is the most characters a section block's text may have.
const sectionLimit = 3000

// buttonBlocks shows text (mrkdwn) in section blocks, cut at line ends to fit sectionLimit (the
// handlers keep a part with buttons within one), followed by an actions block with the buttons.
// No buttons: no blocks at all.
func buttonBlocks(text string, buttons []gateway.Button) []slack.Block {
	if len(buttons) == 0 {
		return nil
	}
	var blocks []slack.Block
	for _, t := range cutRunes(text, sectionLimit) {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, t, false, false), nil, nil))
	}
	return append(blocks, controlBlocks(buttons)...)
}

// controlBlocks are the buttons' blocks: an actions block with the buttons, and the feedback pair
// (feedback.Action) as Slack's feedback_buttons in a context_actions block below it.
func controlBlocks(buttons []gateway.Button) []slack.Block {
	var elems []slack.BlockElement
	var blocks []slack.Block
	for _, b := range buttons {
		if b.ActionID == feedback.Action {
			blocks = append(blocks, feedbackBlock(b))
			continue
		}
		btn := slack.NewButtonBlockElement(b.ActionID, b.Value, slack.NewTextBlockObject(slack.PlainTextType, b.Text, false, false))
		btn.Style = slack.Style(b.Style)
		elems = append(elems, btn)
	}
	if len(elems) > 0 {
		blocks = append([]slack.Block{slack.NewActionBlock("llmbot_buttons", elems...)}, blocks...)
	}
	return blocks
}

// feedbackBlock is the 👍/👎 of the feedback Button b, each side carrying its rating.
func feedbackBlock(b gateway.Button) *slack.ContextActionsBlock {
	good, bad := feedback.Values(b.Value)
	goodLabel, badLabel := feedback.Labels()
	side := func(emoji, label, value string) *slack.FeedbackButton {
		return slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, emoji, true, false), value).
			WithAccessibilityLabel(label)
	}
	return slack.NewContextActionsBlock("llmbot_feedback",
		slack.NewFeedbackButtonsBlockElement(b.ActionID, side("👍", goodLabel, good), side("👎", badLabel, bad)))
}

// cutRunes cuts s into pieces of at most limit characters, at line ends when it can; none for "".
func cutRunes(s string, limit int) []string {
	var out []string
	for s != "" {
		end, n := len(s), 0
		for i := range s { // i: the byte offset of each character
			if n == limit {
				end = i
				break
			}
			n++
		}
		if end < len(s) {
			if nl := strings.LastIndexByte(s[:end], '\n'); nl > 0 {
				end = nl + 1
			}
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// Post posts m in channel (in the thread threadTS unless "") and returns its ts.
func (a *SlackAPI) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	opts := msgOptions(m)
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	_, ts, err := a.c.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return "", fmt.Errorf("chat.postMessage: %w", err)
	}
	return ts, nil
}

// Update replaces the text and metadata of message ts.
func (a *SlackAPI) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	if _, _, _, err := a.c.UpdateMessageContext(ctx, channel, ts, msgOptions(m)...); err != nil {
		return fmt.Errorf("chat.update: %w", err)
	}
	return nil
}

// Delete deletes the bot's message ts (chat.delete).
func (a *SlackAPI) Delete(ctx context.Context, channel, ts string) error {
	if _, _, err := a.c.DeleteMessageContext(ctx, channel, ts); err != nil {
		return fmt.Errorf("chat.delete: %w", err)
	}
	return nil
}

// Ephemeral shows text to user only, in channel (and thread threadTS unless "").
func (a *SlackAPI) Ephemeral(ctx context.Context, channel, user, threadTS, text string) error {
	opts := withText(slack.MsgOptionText(text, false))
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	if _, err := a.c.PostEphemeralContext(ctx, channel, user, opts...); err != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// StartStream calls chat.startStream, always with the recipient user and team (Slack requires
// them in channels), and returns the message's ts.
func (a *SlackAPI) StartStream(ctx context.Context, s gateway.StreamStart) (string, error) {
	opts := withText(
		slack.MsgOptionRecipientUserID(s.RecipientUserID),
		slack.MsgOptionRecipientTeamID(s.RecipientTeamID),
	)
	if s.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(s.ThreadTS))
	}
	if s.Markdown != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(s.Markdown))
	}
	_, ts, err := a.c.StartStreamContext(ctx, s.Channel, opts...)
	if err != nil {
		return "", fmt.Errorf("chat.startStream: %w", err)
	}
	return ts, nil
}

// AppendStream appends markdown to the streamed message ts.
func (a *SlackAPI) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if _, _, err := a.c.AppendStreamContext(ctx, channel, ts, withText(slack.MsgOptionMarkdownText(markdown))...); err != nil {
		return fmt.Errorf("chat.appendStream: %w", err)
	}
	return nil
}

// StopStream ends the streamed message ts, appending markdown (unless "") and storing mark;
// buttons are an actions block at the bottom of the finished message.
func (a *SlackAPI) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []gateway.Button) error {
	opts := withText()
	if markdown != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(markdown))
	}
	if mark.Kind != "" {
		opts = append(opts, slack.MsgOptionMetadata(mark.Metadata()))
	}
	if len(buttons) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(controlBlocks(buttons)...))
	}
	if _, _, err := a.c.StopStreamContext(ctx, channel, ts, opts...); err != nil {
		return fmt.Errorf("chat.stopStream: %w", err)
	}
	return nil
}

// FinishStream rewrites with chat.update a streamed message Slack ended by itself: markdown as
// its markdown_text, or, with buttons, in a markdown block above them (markdown_text takes no
// blocks), its beginning as the notification text.
func (a *SlackAPI) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []gateway.Button) error {
	opts := withText()
	if len(buttons) == 0 {
		opts = append(opts, slack.MsgOptionMarkdownText(markdown))
	} else {
		fallback := ""
		if parts := cutRunes(markdown, finishFallbackLimit); len(parts) > 0 {
			fallback = parts[0]
		}
		opts = append(opts, slack.MsgOptionText(fallback, false),
			slack.MsgOptionBlocks(append([]slack.Block{slack.NewMarkdownBlock("", markdown)}, controlBlocks(buttons)...)...))
	}
	if mark.Kind != "" {
		opts = append(opts, slack.MsgOptionMetadata(mark.Metadata()))
	}
	if _, _, _, err := a.c.UpdateMessageContext(ctx, channel, ts, opts...); err != nil {
		return fmt.Errorf("chat.update streamed message: %w", err)
	}
	return nil
}

// finishFallbackLimit is how much of a finished stream's text is its notification text, within
// chat.update's 4,000 characters.
const finishFallbackLimit = 3000

// OpenModal opens m for the person whose interaction gave triggerID (views.open).
func (a *SlackAPI) OpenModal(ctx context.Context, triggerID string, m gateway.Modal) error {
	input := slack.NewPlainTextInputBlockElement(nil, m.InputActionID)
	input.Multiline = true
	block := slack.NewInputBlock("llmbot_input", slack.NewTextBlockObject(slack.PlainTextType, m.InputLabel, false, false), nil, input)
	block.Optional = true
	view := slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           slack.NewTextBlockObject(slack.PlainTextType, m.Title, false, false),
		Submit:          slack.NewTextBlockObject(slack.PlainTextType, m.Submit, false, false),
		CallbackID:      m.CallbackID,
		PrivateMetadata: m.Metadata,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, m.Text, false, false), nil, nil),
			block,
		}},
	}
	if _, err := a.c.OpenViewContext(ctx, triggerID, view); err != nil {
		return fmt.Errorf("views.open: %w", err)
	}
	return nil
}

// Permalink returns the permalink of the message ts in channel (chat.getPermalink).
func (a *SlackAPI) Permalink(ctx context.Context, channel, ts string) (string, error) {
	link, err := a.c.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: channel, Ts: ts})
	if err != nil {
		return "", fmt.Errorf("chat.getPermalink: %w", err)
	}
	return link, nil
}

// AppendTasks shows tasks as task cards on the streamed message ts (task_update chunks of
// chat.appendStream).
func (a *SlackAPI) AppendTasks(ctx context.Context, channel, ts string, tasks []gateway.Task) error {
	chunks := make([]slack.StreamChunk, len(tasks))
	for i, t := range tasks {
		c := slack.NewTaskUpdateChunk(t.ID, t.Title)
		c.Status, c.Details = slack.TaskCardStatus(t.Status), t.Details
		chunks[i] = c
	}
	if _, _, err := a.c.AppendStreamContext(ctx, channel, ts, withText(slack.MsgOptionChunks(chunks...))...); err != nil {
		return fmt.Errorf("chat.appendStream tasks: %w", err)
	}
	return nil
}

// UploadImage shares an image to a channel with the files v2 flow (getUploadURLExternal, the
// bytes, completeUploadExternal). slack-go never retries the upload itself.
func (a *SlackAPI) UploadImage(ctx context.Context, u gateway.Upload) error {
	if len(u.Data) == 0 {
		return errors.New("files.upload: no image data")
	}
	alt := u.AltText
	if r := []rune(alt); len(r) > 1000 {
		alt = string(r[:1000])
	}
	p := slack.UploadFileParameters{
		Filename:        u.Filename,
		FileSize:        len(u.Data),
		Reader:          bytes.NewReader(u.Data),
		Title:           u.Title,
		InitialComment:  u.Comment,
		AltTxt:          alt,
		Channel:         u.Channel,
		ThreadTimestamp: u.ThreadTS,
	}
	if len(u.Buttons) > 0 {
		// Slack ignores blocks when there is an initial_comment: the comment becomes a section.
		p.Blocks = slack.Blocks{BlockSet: buttonBlocks(u.Comment, u.Buttons)}
		p.InitialComment = ""
	}
	_, err := a.c.UploadFileContext(ctx, p)
	if err != nil {
		return fmt.Errorf("files.upload: %w", hideURL(err)) // slack-go prefixes the step that failed
	}
	return nil
}

// Respond posts text privately to the person who ran a slash command, through its response_url
// (works where the bot is not a member; at most 5 uses in 30 minutes).
func (a *SlackAPI) Respond(ctx context.Context, responseURL, text string) error {
	return a.respond(ctx, responseURL, gateway.Private{Text: text})
}

// RespondPrivate shows m to the person a response_url belongs to (see Respond): its text in
// section blocks with the buttons under them, in place of the message the response_url came from
// when m says so.
func (a *SlackAPI) RespondPrivate(ctx context.Context, responseURL string, m gateway.Private) error {
	return a.respond(ctx, responseURL, m)
}

// respond posts m to responseURL as JSON, ephemeral, with both unfurl flags off (slack-go's
// response_url post has no field for them). A refusal comes back as slack-go's types do:
// *slack.RateLimitedError for a 429 with Retry-After, else slack.StatusCodeError (Slack answers
// a used or expired response_url with a 404).
func (a *SlackAPI) respond(ctx context.Context, responseURL string, m gateway.Private) error {
	off := false
	msg := slack.WebhookMessage{Text: m.Text, ResponseType: slack.ResponseTypeEphemeral,
		ReplaceOriginal: m.ReplaceOriginal, UnfurlLinks: &off, UnfurlMedia: &off}
	if len(m.Buttons) > 0 {
		msg.Blocks = &slack.Blocks{BlockSet: buttonBlocks(m.Text, m.Buttons)}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("response_url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, responseURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("response_url: the URL is not usable") // the URL itself is the secret
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("response_url: %w", hideURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusTooManyRequests {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			return fmt.Errorf("response_url: %w", &slack.RateLimitedError{RetryAfter: time.Duration(secs) * time.Second})
		}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("response_url: %w", slack.StatusCodeError{Code: resp.StatusCode, Status: resp.Status})
	}
	return nil
}

// hideURL keeps only the scheme and host of the URL a failed request names in err (a *url.Error,
// as net/http reports a request that got no answer): a response_url lets whoever holds it post in
// the channel for 30 minutes, and an upload URL takes a file, so neither may reach the logs.
func hideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			ue.URL = u.Scheme + "://" + u.Host + "/…"
		} else {
			ue.URL = "(url hidden)"
		}
	}
	return err
}

// UserInfo calls users.info: who a person is (their team, enterprise, guest flags). It does not
// cache (access.Members does) and a 429 comes back at once, typed.
func (a *SlackAPI) UserInfo(ctx context.Context, userID string) (*slack.User, error) {
	u, err := a.c.GetUserInfoContext(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("users.info: %w", err)
	}
	return u, nil
}

// Name returns a user's display name (users.info), else their real name, else their user name. It
// does not cache: the handlers keep the one cache of names, beside the look-up budget that paces
// users.info and owns its 429s (a 429 comes back at once, typed).
func (a *SlackAPI) Name(ctx context.Context, userID string) (string, error) {
	u, err := a.c.GetUserInfoContext(ctx, userID)
	if err != nil {
		return "", fmt.Errorf("users.info: %w", err)
	}
	return cmp.Or(u.Profile.DisplayName, u.RealName, u.Name), nil
}

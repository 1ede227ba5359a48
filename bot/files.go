package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/attach"
)

var _ attach.Files = (*Files)(nil)

// FilesOptions configure Files.
type FilesOptions struct {
	Token string // the bot token, sent only to Slack's hosts
	// APIURL is SLACK_API_URL: its host counts as Slack's (a proxy, or a fake in tests), with
	// its scheme; every other host must be https.
	APIURL   string
	MaxBytes int64         // larger files are refused (attach.ErrFileTooLarge); default 20 MB
	Timeout  time.Duration // for one download, redirects included; default 30 s
	// Transport carries the downloads; nil: http.DefaultTransport.
	Transport http.RoundTripper
}

// Files downloads the files people share from their url_private, with the bot token, and looks
// up those that events carry only as an id (files.info). The token goes only to Slack's own hosts:
// the initial URL and every redirect are checked, and a redirect anywhere else (a CDN's signed
// URL) is followed without an Authorization header. Go's client would keep the header on a
// redirect to the same host name on another port, and drop it on a redirect from files.slack.com
// to slack-edge.com: the rule is set here on each hop instead.
type Files struct {
	c        *slack.Client
	http     *http.Client
	token    string
	api      *url.URL
	maxBytes int64
	timeout  time.Duration
}

// NewFiles returns Files over c (for files.info) and o.
func NewFiles(c *slack.Client, o FilesOptions) (*Files, error) {
	api, err := url.Parse(o.APIURL)
	if err != nil || api.Host == "" {
		return nil, fmt.Errorf("files: SLACK_API_URL %q is not a URL", o.APIURL)
	}
	f := &Files{c: c, token: o.Token, api: api, maxBytes: cmp.Or(o.MaxBytes, 20<<20), timeout: cmp.Or(o.Timeout, 30*time.Second)}
	f.http = &http.Client{Transport: o.Transport, CheckRedirect: f.checkRedirect}
	return f, nil
}

// maxRedirects bounds a chain of redirects (Go's default too).
const maxRedirects = 10

func (f *Files) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return errors.New("too many redirects")
	}
	f.authorize(req)
	return nil
}

// authorize sets the bot token on req when it goes to Slack, and removes it otherwise.
func (f *Files) authorize(req *http.Request) {
	if f.slackHost(req.URL) {
		req.Header.Set("Authorization", "Bearer "+f.token)
	} else {
		req.Header.Del("Authorization")
	}
}

// slackHost reports whether u is one of Slack's hosts: SLACK_API_URL's (scheme and host:port),
// or https on slack.com, slack-edge.com, slack-gov.com and their subdomains.
func (f *Files) slackHost(u *url.URL) bool {
	if u.Scheme == f.api.Scheme && strings.EqualFold(u.Host, f.api.Host) {
		return true
	}
	if u.Scheme != "https" || u.Port() != "" && u.Port() != "443" {
		return false
	}
	h := strings.ToLower(u.Hostname())
	for _, d := range []string{"slack.com", "slack-edge.com", "slack-gov.com"} {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

// Download fetches file's bytes from url_private_download (or url_private) within the size and
// time bounds: with prefix > 0, its first prefix bytes (at most MaxBytes), whatever its size;
// with prefix 0, the whole file, refused over MaxBytes. A file on another service (is_external),
// or whose URL is not Slack's, is refused with ErrFileNoAccess: the bot neither sends its token
// there nor fetches what people only link.
func (f *Files) Download(ctx context.Context, file slack.File, prefix int64) ([]byte, string, bool, error) {
	raw := cmp.Or(file.URLPrivateDownload, file.URLPrivate)
	if prefix <= 0 && file.Size > 0 && int64(file.Size) > f.maxBytes {
		return nil, "", false, fmt.Errorf("download %s: %d bytes: %w", file.ID, file.Size, attach.ErrFileTooLarge)
	}
	u, err := url.Parse(raw)
	if raw == "" || err != nil || file.IsExternal || !f.slackHost(u) {
		return nil, "", false, fmt.Errorf("download %s: not a file on Slack: %w", file.ID, attach.ErrFileNoAccess)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", false, fmt.Errorf("download %s: %w", file.ID, err)
	}
	f.authorize(req)
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, "", false, fmt.Errorf("download %s: %w", file.ID, err)
	}
	defer resp.Body.Close()
	return f.read(file, resp, prefix)
}

// read takes a download's answer: the bytes (the first prefix when prefix > 0), or why not.
func (f *Files) read(file slack.File, resp *http.Response, prefix int64) ([]byte, string, bool, error) {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound:
		return nil, "", false, fmt.Errorf("download %s: HTTP %d: %w", file.ID, resp.StatusCode, attach.ErrFileNoAccess)
	case resp.StatusCode != http.StatusOK:
		return nil, "", false, fmt.Errorf("download %s: HTTP %d", file.ID, resp.StatusCode)
	case mt == "text/html" && !strings.Contains(file.Mimetype, "html"):
		// Slack answers a token it will not serve (no files:read) with its sign-in page.
		return nil, "", false, fmt.Errorf("download %s: Slack sent a sign-in page (is the files:read scope granted?): %w", file.ID, attach.ErrFileNoAccess)
	case prefix <= 0 && resp.ContentLength > f.maxBytes:
		return nil, "", false, fmt.Errorf("download %s: %d bytes: %w", file.ID, resp.ContentLength, attach.ErrFileTooLarge)
	}
	keep := f.maxBytes
	if prefix > 0 {
		keep = min(prefix, f.maxBytes)
	}
	// One byte more than kept tells a longer file from one of exactly that size.
	data, err := io.ReadAll(io.LimitReader(resp.Body, keep+1))
	if err != nil {
		return nil, "", false, fmt.Errorf("download %s: %w", file.ID, err)
	}
	over := int64(len(data)) > keep
	if over && prefix <= 0 {
		return nil, "", false, fmt.Errorf("download %s: over %d bytes: %w", file.ID, f.maxBytes, attach.ErrFileTooLarge)
	}
	if over {
		data = data[:keep]
	}
	return data, cmp.Or(mt, file.Mimetype), over, nil
}

// Info calls files.info.
func (f *Files) Info(ctx context.Context, id string) (slack.File, error) {
	file, _, _, err := f.c.GetFileInfoContext(ctx, id, 0, 0)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && (se.Err == "file_not_found" || se.Err == "file_deleted" || se.Err == "access_denied") {
			return slack.File{}, fmt.Errorf("files.info %s: %w: %w", id, err, attach.ErrFileNoAccess)
		}
		return slack.File{}, fmt.Errorf("files.info %s: %w", id, err)
	}
	return *file, nil
}

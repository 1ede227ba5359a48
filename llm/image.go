package llm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// imageBody is the images/generations request: model and prompt, the safety identifier
// when given, and Config.ImageOptions as they are. Nothing else (no response_format or
// style unless configured: GPT image models reject them).
func (c *Client) imageBody(model string, req ImageRequest) ([]byte, error) {
	fields := make(map[string]any, len(c.cfg.ImageOptions)+3)
	for k, v := range c.cfg.ImageOptions {
		fields[k] = v
	}
	fields["model"] = model
	fields["prompt"] = req.Prompt
	if req.User != "" {
		fields["user"] = req.User
	}
	return json.Marshal(fields)
}

// wireImages is the part of an ImagesResponse the client reads.
type wireImages struct {
	Data []struct {
		B64JSON       string `json:"b64_json"`
		URL           string `json:"url"`
		RevisedPrompt string `json:"revised_prompt"`
	} `json:"data"`
}

// Image generates one image and returns its bytes, downloaded (url) or decoded (b64_json).
// The whole call, including retries and the download, is bounded by Config.ImageTimeout and
// is not retried after a timeout (generation is billed).
func (c *Client) Image(ctx context.Context, req ImageRequest) (*Image, error) {
	model := cmp.Or(req.Model, c.cfg.ImageModel)
	switch {
	case model == "":
		return nil, &Error{Kind: KindBadRequest, Message: "no image model configured"}
	case strings.TrimSpace(req.Prompt) == "":
		return nil, &Error{Kind: KindBadRequest, Message: "empty image prompt"}
	}
	body, err := c.imageBody(model, req)
	if err != nil {
		return nil, &Error{Kind: KindBadRequest, Message: "encode image request: " + err.Error()}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.ImageTimeout, errImageTimeout)
	defer cancel()
	ctx, cancelBody := context.WithCancelCause(ctx) // ends a body that stalls (imageBodyIdle)
	defer cancelBody(nil)

	resp, e := c.send(ctx, c.imageHTTP, "image", "/images/generations", "application/json", body)
	if e != nil {
		return nil, e
	}
	defer resp.Body.Close()
	// Some servers and gateways answer 200 at once and send the body when the picture is ready,
	// padded with white space meanwhile (valid JSON): that wait takes no slot.
	br := bufio.NewReader(resp.Body)
	if err := skipSpace(br); err != nil {
		return nil, c.fail(ctx, err)
	}
	// The response is held whole, then parsed and decoded: about three times the image until it is
	// decoded. At most imageBodiesAtOnce are held at once, whatever the jobs finishing together;
	// a body that stops coming for imageBodyIdle gives its slot up with a timeout, so a stalled
	// response holds up the others for seconds, not for the image timeout.
	select {
	case c.imageMem <- struct{}{}:
	case <-ctx.Done():
		return nil, c.fail(ctx, context.Cause(ctx))
	}
	held := true
	release := func() {
		if held {
			held = false
			<-c.imageMem
		}
	}
	defer release()
	if c.imageHeld != nil {
		c.imageHeld()
	}
	rb := newIdleReader(ctx, br, cancelBody, imageBodyIdle, errImageBodyIdle)
	// base64 is 4/3 of the image; allow for the JSON around it.
	limit := c.cfg.MaxImageBytes/3*4 + 1<<20
	data, err := readBody(rb, resp.ContentLength, limit+1)
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	invalid := func(format string, args ...any) error {
		return (&Error{Kind: KindInvalid, Status: resp.StatusCode, RequestID: requestID(resp.Header),
			Message: fmt.Sprintf(format, args...)}).redact(c.secrets)
	}
	if int64(len(data)) > limit {
		return nil, invalid("the image response is larger than %s", size(limit))
	}
	if e := errorInBody(resp.StatusCode, resp.Header, data, c.secrets); e != nil {
		return nil, e.redact(c.secrets)
	}
	var w wireImages
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, invalid("malformed image response: %s", snippet(redactBytes(data, c.secrets)))
	}
	for _, d := range w.Data {
		var img []byte
		switch {
		case d.B64JSON != "":
			img, err = c.decodeImage(d.B64JSON)
		case d.URL != "":
			data, w = nil, wireImages{} // small, but let go: only the download is held now
			release()
			img, err = c.download(ctx, d.URL)
		default:
			continue
		}
		if err != nil {
			if e, ok := err.(*Error); ok {
				e.RequestID = cmp.Or(e.RequestID, requestID(resp.Header))
				return nil, e.redact(c.secrets)
			}
			return nil, invalid("%v", err)
		}
		format, mime := detectImage(img)
		if format == "" {
			return nil, invalid("the service sent %s that is not a PNG, JPEG, WebP or GIF image", size(int64(len(img))))
		}
		return &Image{Data: img, Format: format, MIMEType: mime, RevisedPrompt: d.RevisedPrompt}, nil
	}
	return nil, invalid("no image in the response")
}

// imageBodiesAtOnce bounds the image responses held in memory at once (Client.imageMem). One
// holds about three times its image while it is read, parsed and decoded (the base64 body, the
// string parsed from it, the picture), briefly, but /imagine jobs that finish together would add
// that up: 20 jobs with 4 MiB pictures at once reach 256 MiB, a container limit. Jobs beyond it
// wait for a slot as long as one response takes to read and decode, or imageBodyIdle for one that
// stalls.
const imageBodiesAtOnce = 2

// imageBodyIdle is the longest silence in an image response's body while it holds a slot
// (imageBodiesAtOnce): servers send the body at once when the picture is ready.
const imageBodyIdle = 10 * time.Second

// errImageBodyIdle ends an image response whose body stops coming for imageBodyIdle.
var errImageBodyIdle = fmt.Errorf("the image response stopped coming for %v", imageBodyIdle)

// skipSpace reads past the JSON white space at the start of br, waiting for the first other
// byte (or the end of the body, which the caller reports).
func skipSpace(br *bufio.Reader) error {
	for {
		b, err := br.Peek(1)
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		case b[0] != ' ' && b[0] != '\t' && b[0] != '\n' && b[0] != '\r':
			return nil
		}
		_, _ = br.Discard(1)
	}
}

// readBody reads up to limit bytes of r, a body of size bytes (-1: unknown), into a buffer sized
// once when the size is known (io.ReadAll would grow it by doubling: up to twice the body).
func readBody(r io.Reader, size, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if size > 0 && size <= limit {
		buf.Grow(int(size) + bytes.MinRead) // ReadFrom wants MinRead free before each read, the one seeing EOF too
	}
	_, err := buf.ReadFrom(io.LimitReader(r, limit))
	return buf.Bytes(), err
}

// decodeImage decodes standard base64 (padded or not, wrapped in lines or not; a data: URL
// prefix is tolerated), refusing images over MaxImageBytes before decoding them.
func (c *Client) decodeImage(s string) ([]byte, error) {
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ","); i >= 0 {
			s = s[i+1:]
		}
	}
	s = strings.Map(dropASCIISpace, s) // MIME and Python's base64.encodebytes wrap lines at 76
	enc := base64.StdEncoding
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	if int64(enc.DecodedLen(len(s))) > c.cfg.MaxImageBytes+3 {
		return nil, fmt.Errorf("the image is larger than %s", size(c.cfg.MaxImageBytes))
	}
	img, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("the image's base64 is corrupt")
	}
	if int64(len(img)) > c.cfg.MaxImageBytes {
		return nil, fmt.Errorf("the image is larger than %s", size(c.cfg.MaxImageBytes))
	}
	return img, nil
}

// dropASCIISpace is a strings.Map function that drops ASCII white space.
func dropASCIISpace(r rune) rune {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return -1
	}
	return r
}

// download fetches an image URL at once (LocalAI and dall-e answer with URLs that expire),
// over http(s) only, without the API key, up to MaxImageBytes.
func (c *Client) download(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the image URL is not an http(s) URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("the image URL is not usable")
	}
	req.Header.Set("User-Agent", "llmbot")
	resp, err := c.downloadHTTP.Do(req)
	if err != nil {
		e := errorFromTransport(ctx, err)
		e.Message = "image download: " + e.Message
		return nil, e
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, downloadError(resp.StatusCode)
	}
	img, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxImageBytes+1))
	if err != nil {
		e := errorFromTransport(ctx, err)
		e.Message = "image download: " + e.Message
		return nil, e
	}
	if int64(len(img)) > c.cfg.MaxImageBytes {
		return nil, fmt.Errorf("the image is larger than %s", size(c.cfg.MaxImageBytes))
	}
	return img, nil
}

// downloadError reports an image URL that answered status. The image host is not the model
// service and gets no API key, so its 401 or 403 never means the key was rejected: like 404 and
// 410, it mostly means a signed URL expired, and the image is lost (KindInvalid). 408, 429 and
// 5xx are the host being busy (KindServer). The download is not retried, whatever the status.
func downloadError(status int) *Error {
	e := &Error{Kind: KindInvalid, Status: status,
		Message: fmt.Sprintf("image download: %d %s", status, http.StatusText(status))}
	switch {
	case status == 401 || status == 403 || status == 404 || status == 410:
		e.Message += " (the image URL may have expired)"
	case status == 408 || status == 429 || status >= 500:
		e.Kind = KindServer
	}
	return e
}

// detectImage names the format of img from its first bytes.
func detectImage(img []byte) (format, mime string) {
	switch {
	case bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")):
		return "png", "image/png"
	case bytes.HasPrefix(img, []byte("\xff\xd8\xff")):
		return "jpeg", "image/jpeg"
	case len(img) >= 12 && string(img[:4]) == "RIFF" && string(img[8:12]) == "WEBP":
		return "webp", "image/webp"
	case bytes.HasPrefix(img, []byte("GIF87a")) || bytes.HasPrefix(img, []byte("GIF89a")):
		return "gif", "image/gif"
	}
	return "", ""
}

// size formats a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

package fakeslack

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Redirect is how a private file's url_private answers the bot.
type Redirect int

const (
	// NoRedirect serves the bytes at url_private.
	NoRedirect Redirect = iota
	// RedirectSameHost answers with a 302 to another path of the same host, which also wants the
	// bot token.
	RedirectSameHost
	// RedirectOtherHost answers with a 302 to another host (a stand-in for a CDN with a signed
	// URL), which serves the bytes to anyone and records any Authorization header it is sent
	// (TokenLeaks): a client must not carry Slack's token off Slack's hosts.
	RedirectOtherHost
)

// cdn is the other host of RedirectOtherHost.
type cdn struct {
	srv   *httptest.Server
	mu    sync.Mutex
	leaks []string // the paths requested with an Authorization header
}

func newCDN(s *Server) *cdn {
	c := &cdn{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			c.mu.Lock()
			c.leaks = append(c.leaks, r.URL.Path)
			c.mu.Unlock()
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/cdn/"), "/")
		s.mu.Lock()
		f := s.files[id]
		var data []byte
		if f != nil {
			data = f.Bytes
		}
		s.mu.Unlock()
		if data == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.mimeType())
		_, _ = w.Write(data)
	}))
	return c
}

// TokenLeaks lists the requests that reached the other host of RedirectOtherHost with an
// Authorization header. A test of a client that follows Slack's redirects wants none.
func (s *Server) TokenLeaks() []string {
	s.cdn.mu.Lock()
	defer s.cdn.mu.Unlock()
	return append([]string(nil), s.cdn.leaks...)
}

// redirectFile answers a url_private request for f with its redirect, if it has one; it reports
// whether it did.
func (s *Server) redirectFile(w http.ResponseWriter, r *http.Request, f *File) bool {
	switch {
	case f.Redirect == RedirectSameHost && r.URL.Query().Get("hop") == "":
		http.Redirect(w, r, r.URL.Path+"?hop=1", http.StatusFound)
		return true
	case f.Redirect == RedirectOtherHost:
		http.Redirect(w, r, s.cdn.srv.URL+"/cdn/"+f.ID+"/"+f.Name, http.StatusFound)
		return true
	}
	return false
}

// filesInfo answers files.info: the whole file object, which events and messages of files shared
// from elsewhere lack ("file_access": "check_file_info").
func (s *Server) filesInfo(p params, _ time.Time) (map[string]any, apiError) {
	f := s.files[p.Get("file")]
	if f == nil || f.NoAccess || !f.Shared {
		return nil, "file_not_found"
	}
	return map[string]any{"file": s.fileJSON(f)}, ""
}

// fileRef is a file as a message or an event carries it: whole, or only its id when the bot
// must ask files.info (CheckInfo).
func (s *Server) fileRef(f *File) map[string]any {
	if f.CheckInfo {
		return map[string]any{"id": f.ID, "mode": "file_access", "file_access": "check_file_info"}
	}
	return s.fileJSON(f)
}

func (f *File) mimeType() string {
	if f.Mimetype != "" {
		return f.Mimetype
	}
	return mimeType(f.Name)
}

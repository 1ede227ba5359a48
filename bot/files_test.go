package bot

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// sharedFile posts a message with uf in the fake and returns its file as conversations.replies
// shows it.
func sharedFile(t *testing.T, fs *fakeslack.Server, c *slack.Client, uf fakeslack.UserFile) slack.File {
	t.Helper()
	ts := fs.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "look", Files: []fakeslack.UserFile{uf}})
	msgs, _, _, err := c.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: ts})
	if err != nil || len(msgs) != 1 || len(msgs[0].Files) != 1 {
		t.Fatalf("conversations.replies: %v, %d messages", err, len(msgs))
	}
	return msgs[0].Files[0]
}

// TestFilesDownload: private files come with the bot token, through Slack's redirects; the token
// never reaches another host, a file over the limit is refused before or while it is read, and a
// file the bot may not see, or that lives elsewhere, is ErrFileNoAccess.
func TestFilesDownload(t *testing.T) {
	picture := bytes.Repeat([]byte("P"), 1000)
	for _, tc := range []struct {
		name     string
		file     fakeslack.UserFile
		maxBytes int64
		edit     func(*slack.File)
		want     error // nil: the bytes
	}{
		{"plain", fakeslack.UserFile{Name: "a.png", Bytes: picture}, 0, nil, nil},
		{"same-host redirect", fakeslack.UserFile{Name: "a.png", Bytes: picture, Redirect: fakeslack.RedirectSameHost}, 0, nil, nil},
		{"redirect to another host", fakeslack.UserFile{Name: "a.png", Bytes: picture, Redirect: fakeslack.RedirectOtherHost}, 0, nil, nil},
		{"size known too large", fakeslack.UserFile{Name: "a.png", Bytes: picture}, 999, nil, attach.ErrFileTooLarge},
		{"size unknown, body too large", fakeslack.UserFile{Name: "a.png", Bytes: picture}, 999, func(f *slack.File) { f.Size = 0 }, attach.ErrFileTooLarge},
		{"no access", fakeslack.UserFile{Name: "a.png", Bytes: picture, NoAccess: true}, 0, nil, attach.ErrFileNoAccess},
		{"external", fakeslack.UserFile{Name: "a.png", Bytes: picture}, 0, func(f *slack.File) { f.IsExternal = true }, attach.ErrFileNoAccess},
		{"not Slack's URL", fakeslack.UserFile{Name: "a.png", Bytes: picture}, 0, func(f *slack.File) {
			f.URLPrivateDownload, f.URLPrivate = "https://evil.example/a.png", ""
		}, attach.ErrFileNoAccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := fakeslack.New(fakeslack.Config{})
			t.Cleanup(fs.Close)
			c := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()))
			files, err := NewFiles(c, FilesOptions{Token: "xoxb-test", APIURL: fs.URL(), MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			f := sharedFile(t, fs, c, tc.file)
			if tc.edit != nil {
				tc.edit(&f)
			}
			data, mt, _, err := files.Download(t.Context(), f, 0)
			switch {
			case tc.want == nil && (err != nil || !bytes.Equal(data, picture) || mt != "image/png"):
				t.Errorf("Download = %d bytes, %q, %v; want the picture", len(data), mt, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("Download = %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "xoxb-test") {
				t.Errorf("error names the token: %v", err)
			}
			if leaks := fs.TokenLeaks(); len(leaks) > 0 {
				t.Errorf("the bot token reached another host: %v", leaks)
			}
		})
	}
}

// TestFilesDownloadPrefix: a text file is read only as far as it is kept: a 20 MB log (over the
// download limit, too) gives its first bytes and says it was cut; a file within the prefix comes
// whole and uncut.
func TestFilesDownloadPrefix(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{})
	t.Cleanup(fs.Close)
	c := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()))
	files, err := NewFiles(c, FilesOptions{Token: "xoxb-test", APIURL: fs.URL(), MaxBytes: 10 << 20})
	if err != nil {
		t.Fatal(err)
	}
	log := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
	for _, tc := range []struct {
		name    string
		bytes   []byte
		prefix  int64
		want    []byte
		wantCut bool
	}{
		{"20 MB log", log, 80_001, log[:80_001], true},
		{"short file", log[:100], 80_001, log[:100], false},
		{"exactly the prefix", log[:100], 100, log[:100], false},
	} {
		f := sharedFile(t, fs, c, fakeslack.UserFile{Name: "app.log", Bytes: tc.bytes})
		data, _, cut, err := files.Download(t.Context(), f, tc.prefix)
		if err != nil || cut != tc.wantCut || !bytes.Equal(data, tc.want) {
			t.Errorf("%s: Download = %d bytes, cut %v, %v; want %d bytes, cut %v", tc.name, len(data), cut, err, len(tc.want), tc.wantCut)
		}
		if cap(data) > int(tc.prefix)+4096 {
			t.Errorf("%s: %d bytes held for a prefix of %d", tc.name, cap(data), tc.prefix)
		}
	}
}

// TestFilesInfo: a file shared from elsewhere comes in events and threads as its id only;
// files.info has the rest, or says the bot may not see it.
func TestFilesInfo(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{})
	t.Cleanup(fs.Close)
	c := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()))
	files, _ := NewFiles(c, FilesOptions{Token: "xoxb-test", APIURL: fs.URL()})

	ref := sharedFile(t, fs, c, fakeslack.UserFile{Name: "b.png", Bytes: []byte("x"), CheckInfo: true})
	if ref.FileAccess != "check_file_info" || ref.URLPrivate != "" {
		t.Fatalf("file in the thread = %+v, want only its id", ref)
	}
	got, err := files.Info(t.Context(), ref.ID)
	if err != nil || got.Name != "b.png" || got.URLPrivateDownload == "" {
		t.Errorf("Info = %+v, %v; want the whole file", got, err)
	}
	hidden := sharedFile(t, fs, c, fakeslack.UserFile{Name: "c.png", Bytes: []byte("x"), CheckInfo: true, NoAccess: true})
	if _, err := files.Info(t.Context(), hidden.ID); !errors.Is(err, attach.ErrFileNoAccess) {
		t.Errorf("Info of a file the bot may not see = %v, want ErrFileNoAccess", err)
	}
}

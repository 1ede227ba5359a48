package handlers

import (
	"context"
	"errors"

	"github.com/slack-go/slack"
)

// Files reads the files people share (implemented by bot.Files over Slack's url_private and
// files.info). Errors wrap ErrFileTooLarge and ErrFileNoAccess where those apply.
type Files interface {
	// Download returns a file's bytes and their Content-Type.
	Download(ctx context.Context, f slack.File) (data []byte, mimeType string, err error)
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

package route

import "errors"

// The outcomes every use case and the loop that runs them agree on: the loop passes ErrShutdown as
// the cause of a request's cancelled context, and a use case returns ErrIgnored when there was
// nothing to do.
var (
	// ErrIgnored: nothing to answer (not a failure; log at debug).
	ErrIgnored = errors.New("ignored")
	// ErrShutdown: the bot is shutting down; what runs closes with an "interrupted" note.
	ErrShutdown = errors.New("bot shutting down")
)

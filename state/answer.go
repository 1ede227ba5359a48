package state

import (
	"errors"
	"time"
)

// Answer is the journal's record of an answer in progress.
type Answer struct {
	ID                                 string // channel + "/" + the asked message's ts
	Team, Channel, ThreadTS, TS, Asker string
	Mode                               string   // "edit" or "stream"
	Messages                           []string // ts of the messages the answer posted, in order
	Owner                              string
	Started, Updated                   time.Time
}

// ErrNoReplica is returned by Send for a replica that cannot be reached.
var ErrNoReplica = errors.New("state: no such replica")

package handlers

import (
	"context"
	"time"
)

// Journal records the messages each answer in progress posts (the state package's journal of
// open answers), named by route.AnswerID, and forgets the answer once its final write is made.
// Package orphans closes, from the same journal, the answers of a replica that died.
type Journal interface {
	AddMessage(ctx context.Context, id, ts string) error
	CloseAnswer(ctx context.Context, id string) error
}

// journalTimeout bounds one journal write. The state package answers from memory when its store is
// slow, so this is a last resort.
const journalTimeout = 3 * time.Second

package threads

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// sealer signs what the cache stores, so that what an answer takes from an entry is what this bot
// put there: with Redis, whoever can write to it could otherwise put into a thread, and so before the
// model, what nobody said, or make a person's message pass for one of the bot's answers. Each part of
// a message (its body, its mark) is stored as the HMAC-SHA256 of the entry's key, the message's ts,
// which part it is and its bytes, followed by the bytes: a part cannot be moved to another message or
// thread either. A part that does not open makes the entry a miss (the thread is read from Slack).
// What is not signed (an entry's epoch, whether it is filled, what it left out) lets such a writer
// drop messages from a thread at most, as it can drop answers.
type sealer struct{ key []byte } // nil: nothing is signed

var errSeal = errors.New("thread cache: an entry's part is not signed by this bot")

// seal returns data signed for entry, ts and part ('m' body, 'k' mark). Empty data stays empty
// (a put without a mark keeps the mark held).
func (s sealer) seal(entry, ts string, part byte, data []byte) []byte {
	if s.key == nil || len(data) == 0 {
		return data
	}
	return append(s.mac(entry, ts, part, data), data...)
}

// open returns the data sealed, or errSeal.
func (s sealer) open(entry, ts string, part byte, sealed []byte) ([]byte, error) {
	if s.key == nil || len(sealed) == 0 {
		return sealed, nil
	}
	if len(sealed) < sha256.Size {
		return nil, errSeal
	}
	sum, data := sealed[:sha256.Size], sealed[sha256.Size:]
	if !hmac.Equal(sum, s.mac(entry, ts, part, data)) {
		return nil, errSeal
	}
	return data, nil
}

func (s sealer) mac(entry, ts string, part byte, data []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(entry))
	m.Write([]byte{0})
	m.Write([]byte(ts))
	m.Write([]byte{0, part, 0})
	m.Write(data)
	return m.Sum(nil)
}

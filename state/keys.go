package state

import (
	"crypto/hmac"
	"crypto/sha256"
)

// DeriveKey is a key for one purpose, derived from a secret every replica of a bot has and the
// shared store never sees (the bot token): HMAC-SHA256 of purpose under secret. What the replicas
// must be able to trust in the store (a hand-over, a grant) is signed or named with such a key, so
// whoever can write to the store cannot make it up; a derived key says nothing of the secret, and
// each purpose gets its own.
func DeriveKey(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

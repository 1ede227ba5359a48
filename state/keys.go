package state

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// macHex is the length of a seal's MAC, hex.
const macHex = 2 * sha256.Size

// Seal signs record id of collection coll, for the replicas to keep in the store: whoever can write
// to the store, but has no key, can neither make up a record nor move one to another id or
// collection (Unseal refuses it). The value is kept readable after the MAC.
func Seal(key []byte, coll, id string, val []byte) []byte {
	out := make([]byte, 0, macHex+len(val))
	out = hex.AppendEncode(out, recordMAC(key, coll, id, val))
	return append(out, val...)
}

// Unseal checks a record sealed by Seal for coll and id under key, and returns its value; false
// when it was not.
func Unseal(key []byte, coll, id string, sealed []byte) ([]byte, bool) {
	if len(sealed) < macHex {
		return nil, false
	}
	mac, err := hex.DecodeString(string(sealed[:macHex]))
	val := sealed[macHex:]
	if err != nil || !hmac.Equal(mac, recordMAC(key, coll, id, val)) {
		return nil, false
	}
	return val, true
}

func recordMAC(key []byte, coll, id string, val []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(coll + "\x00" + id + "\x00"))
	m.Write(val)
	return m.Sum(nil)
}

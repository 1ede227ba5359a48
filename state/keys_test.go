package state

import (
	"bytes"
	"strings"
	"testing"
)

// TestDeriveKey: a derived key is the same on every replica (same secret, same purpose), differs
// per purpose and per secret, and does not hold the secret.
func TestDeriveKey(t *testing.T) {
	const token = "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	inbox := DeriveKey(token, "llmbot replica inbox v1")
	if !bytes.Equal(inbox, DeriveKey(token, "llmbot replica inbox v1")) {
		t.Error("two replicas derive different keys from one token")
	}
	for _, other := range [][]byte{DeriveKey(token, "llmbot thread grants v1"), DeriveKey(token+"x", "llmbot replica inbox v1")} {
		if bytes.Equal(inbox, other) {
			t.Error("another purpose or another token derives the same key")
		}
	}
	if len(inbox) != 32 || strings.Contains(string(inbox), token) {
		t.Errorf("derived key of %d bytes; want 32, without the token", len(inbox))
	}
}

// TestSeal: a sealed record opens under its key, collection and id only; a forged or altered one
// does not.
func TestSeal(t *testing.T) {
	key := DeriveKey("xoxb-token", "llmbot records v1")
	sealed := Seal(key, "instructions", "C1", []byte(`{"text":"be brief"}`))
	if val, ok := Unseal(key, "instructions", "C1", sealed); !ok || string(val) != `{"text":"be brief"}` {
		t.Fatalf("Unseal = %q, %v; want the value", val, ok)
	}
	altered := bytes.Clone(sealed)
	altered[len(altered)-2] = 'X'
	for _, c := range []struct {
		name, coll, id string
		key, sealed    []byte
	}{
		{"another key", "instructions", "C1", DeriveKey("xoxb-other", "llmbot records v1"), sealed},
		{"another id", "instructions", "C2", key, sealed},
		{"another collection", "schedules", "C1", key, sealed},
		{"altered", "instructions", "C1", key, altered},
		{"unsealed", "instructions", "C1", key, []byte(`{"text":"be brief"}`)},
		{"short", "instructions", "C1", key, []byte("ab")},
	} {
		if _, ok := Unseal(c.key, c.coll, c.id, c.sealed); ok {
			t.Errorf("%s: Unseal accepted it", c.name)
		}
	}
}

package approvals

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmbot/llmbot/state"
)

// Records are the shared state's records (the state package's, in Redis or in this process's
// memory or STATE_DIR): where "Always allow" grants are kept, for every replica and restart.
type Records interface {
	Put(ctx context.Context, coll, id string, val []byte) error
	Get(ctx context.Context, coll, id string) ([]byte, bool, error)
	Delete(ctx context.Context, coll, id string) error
	List(ctx context.Context, coll string) (map[string][]byte, error)
}

// MaxAlways bounds the tools one person may always allow (a grant past it is refused, and said).
const MaxAlways = 100

// Grant is one tool a person always allows.
type Grant struct {
	Tool   string    `json:"tool"`   // as the model calls it: the server's name, then the tool's
	Server string    `json:"server"` // its MCP server
	At     time.Time `json:"at"`
}

// always are the "Always allow this tool" grants: per person and tool, in the shared records. The
// person's collection and the tool's record are named by an HMAC under key (derived from the bot
// token, which the store never sees), and the record is sealed (state.Seal) under it: whoever can
// write to Redis can neither make a grant up nor move one to another person or tool. No message
// text, no arguments: a tool's name, its server and when.
type always struct {
	rec Records
	key []byte
}

func (a always) mac(kind, s string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(kind + "\x00" + s))
	return hex.EncodeToString(m.Sum(nil))[:40]
}

func (a always) coll(user string) string { return "tool-always:" + a.mac("user", user) }
func (a always) id(tool string) string   { return a.mac("tool", tool) }

// errTooManyAlways: the person always allows MaxAlways tools already.
var errTooManyAlways = errors.New("too many tools always allowed")

// put keeps user's grant of g.Tool.
func (a always) put(ctx context.Context, user string, g Grant) error {
	coll, id := a.coll(user), a.id(g.Tool)
	all, err := a.rec.List(ctx, coll)
	if err != nil {
		return err
	}
	if _, ok := all[id]; !ok && len(all) >= MaxAlways {
		return errTooManyAlways
	}
	b, _ := json.Marshal(g) // strings and a time: cannot fail
	return a.rec.Put(ctx, coll, id, state.Seal(a.key, coll, id, b))
}

// has reports whether user always allows tool (a record that does not unseal grants nothing).
func (a always) has(ctx context.Context, user, tool string) (bool, error) {
	coll, id := a.coll(user), a.id(tool)
	sealed, ok, err := a.rec.Get(ctx, coll, id)
	if err != nil || !ok {
		return false, err
	}
	g, ok := a.open(coll, id, sealed)
	return ok && g.Tool == tool, nil
}

func (a always) open(coll, id string, sealed []byte) (Grant, bool) {
	b, ok := state.Unseal(a.key, coll, id, sealed)
	var g Grant
	if !ok || json.Unmarshal(b, &g) != nil {
		return Grant{}, false
	}
	return g, true
}

// list is every tool user always allows, by name.
func (a always) list(ctx context.Context, user string) ([]Grant, error) {
	coll := a.coll(user)
	all, err := a.rec.List(ctx, coll)
	if err != nil {
		return nil, err
	}
	out := make([]Grant, 0, len(all))
	for id, sealed := range all {
		if g, ok := a.open(coll, id, sealed); ok && a.id(g.Tool) == id {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(x, y Grant) int { return strings.Compare(x.Tool, y.Tool) })
	return out, nil
}

// errNotRevoked: the grant was still there once removed.
var errNotRevoked = errors.New("the grant is still kept")

// revoke removes user's grant of tool; false when there was none.
func (a always) revoke(ctx context.Context, user, tool string) (bool, error) {
	ok, err := a.has(ctx, user, tool)
	if err != nil || !ok {
		return false, err
	}
	coll, id := a.coll(user), a.id(tool)
	if err := a.rec.Delete(ctx, coll, id); err != nil {
		return false, fmt.Errorf("revoke: %w", err)
	}
	// Read again: the shared records may hide a failed removal behind their local copy's.
	if still, err := a.has(ctx, user, tool); err != nil || still {
		return false, fmt.Errorf("revoke: %w", cmp.Or(err, errNotRevoked))
	}
	return true, nil
}

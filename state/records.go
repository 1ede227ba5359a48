package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/redis/go-redis/v9"
)

// Bounds of the records, whatever a consumer or a hostile Redis asks: a collection holds at most
// MaxRecords records of at most MaxRecordSize bytes each, so reading one whole is bounded.
const (
	MaxRecords    = 2000
	MaxRecordSize = 16 << 10
)

// ErrFull is returned by Put when a collection holds MaxRecords records already.
var ErrFull = errors.New("state: the collection is full")

// ErrTooMany is returned when a hash in Redis holds more than its bound (Records.List: MaxRecords
// records; Tallies.All: MaxTallyFields fields), written there by someone else than this program:
// it is not read at all.
var ErrTooMany = errors.New("state: more entries than allowed")

// names are what a collection and a record id may be: letters, digits and a few separators, so either is a
// safe part of a Redis key and of a file name.
var names = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func checkRecord(op, coll, id string, val []byte) error {
	switch {
	case !names.MatchString(coll):
		return fmt.Errorf("%s: collection %q: %w", op, coll, errInvalid)
	case id != "" && !names.MatchString(id):
		return fmt.Errorf("%s: id %q: %w", op, id, errInvalid)
	case len(val) > MaxRecordSize:
		return fmt.Errorf("%s: %d bytes: %w", op, len(val), errInvalid)
	}
	return nil
}

// RedisRecords are a Redis store's records: a hash per collection (rec:<collection>), field the id.
type RedisRecords struct{ r *Redis }

// Records are r's records, kept until deleted.
func (r *Redis) Records() RedisRecords { return RedisRecords{r} }

// putLua: KEYS[1] the collection's hash; ARGV id, value, the bound. Writes unless that would make the hash
// hold more than the bound: 1 written, 0 full.
const putLua = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HLEN', KEYS[1]) < tonumber(ARGV[3]) then
	redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
	return 1
end
return 0
`

var putScript = redis.NewScript(putLua)

// Put writes record id of collection coll.
func (k RedisRecords) Put(ctx context.Context, coll, id string, val []byte) error {
	if err := checkRecord("put", coll, id, val); err != nil {
		return err
	}
	n, err := putScript.Run(ctx, k.r.c, []string{k.r.key("rec:", coll)}, id, val, MaxRecords).Int()
	switch {
	case err != nil:
		return fmt.Errorf("put %s: %w", coll, err)
	case n == 0:
		return fmt.Errorf("put %s: %w", coll, ErrFull)
	}
	return nil
}

// Get reads record id of collection coll; false when there is none.
func (k RedisRecords) Get(ctx context.Context, coll, id string) ([]byte, bool, error) {
	if err := checkRecord("get", coll, id, nil); err != nil {
		return nil, false, err
	}
	b, err := k.r.c.HGet(ctx, k.r.key("rec:", coll), id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("get %s: %w", coll, err)
	case len(b) > MaxRecordSize:
		return nil, false, fmt.Errorf("get %s: %d bytes: %w", coll, len(b), ErrTooMany)
	}
	return b, true, nil
}

// Delete removes record id of collection coll, if there is one.
func (k RedisRecords) Delete(ctx context.Context, coll, id string) error {
	if err := checkRecord("delete", coll, id, nil); err != nil {
		return err
	}
	if err := k.r.c.HDel(ctx, k.r.key("rec:", coll), id).Err(); err != nil {
		return fmt.Errorf("delete %s: %w", coll, err)
	}
	return nil
}

// List reads every record of collection coll, by id.
func (k RedisRecords) List(ctx context.Context, coll string) (map[string][]byte, error) {
	if err := checkRecord("list", coll, "", nil); err != nil {
		return nil, err
	}
	key := k.r.key("rec:", coll)
	n, err := k.r.c.HLen(ctx, key).Result()
	switch {
	case err != nil:
		return nil, fmt.Errorf("list %s: %w", coll, err)
	case n > MaxRecords:
		return nil, fmt.Errorf("list %s: %d records: %w", coll, n, ErrTooMany)
	}
	all, err := k.r.c.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", coll, err)
	}
	out := make(map[string][]byte, len(all))
	for id, v := range all {
		if len(v) <= MaxRecordSize && names.MatchString(id) {
			out[id] = []byte(v)
		}
	}
	return out, nil
}

// MemoryRecords are a Memory's records; with a directory each collection is also a JSON file there
// (records/<collection>.json, written whole by rename), read back by the next process on it.
type MemoryRecords struct{ m *Memory }

// Records are m's records.
func (m *Memory) Records() MemoryRecords { return MemoryRecords{m} }

// collection returns coll's records, read from the directory the first time. Called with m.mu held.
func (m *Memory) collection(coll string) (map[string][]byte, error) {
	if c, ok := m.records[coll]; ok {
		return c, nil
	}
	c := map[string][]byte{}
	if m.dir != "" {
		b, err := os.ReadFile(m.recordsFile(coll))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(b, &c); err != nil {
				return nil, fmt.Errorf("read %s: %w", coll, err)
			}
		}
	}
	if len(c) > MaxRecords {
		return nil, fmt.Errorf("read %s: %d records: %w", coll, len(c), ErrTooMany)
	}
	m.records[coll] = c
	return c, nil
}

func (m *Memory) recordsFile(coll string) string {
	return filepath.Join(m.dir, "records", coll+".json")
}

// saveCollection writes coll's file (with a directory). Called with m.mu held.
func (m *Memory) saveCollection(coll string, c map[string][]byte) error {
	if m.dir == "" {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := m.recordsFile(coll)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Put writes record id of collection coll.
func (k MemoryRecords) Put(_ context.Context, coll, id string, val []byte) error {
	if err := checkRecord("put", coll, id, val); err != nil {
		return err
	}
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.collection(coll)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	old, had := c[id]
	if !had && len(c) >= MaxRecords {
		return fmt.Errorf("put %s: %w", coll, ErrFull)
	}
	c[id] = append([]byte(nil), val...)
	if err := m.saveCollection(coll, c); err != nil {
		if had {
			c[id] = old
		} else {
			delete(c, id)
		}
		return fmt.Errorf("put %s: %w", coll, err)
	}
	return nil
}

// Get reads record id of collection coll; false when there is none.
func (k MemoryRecords) Get(_ context.Context, coll, id string) ([]byte, bool, error) {
	if err := checkRecord("get", coll, id, nil); err != nil {
		return nil, false, err
	}
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.collection(coll)
	if err != nil {
		return nil, false, fmt.Errorf("get: %w", err)
	}
	v, ok := c[id]
	return append([]byte(nil), v...), ok, nil
}

// Delete removes record id of collection coll, if there is one.
func (k MemoryRecords) Delete(_ context.Context, coll, id string) error {
	if err := checkRecord("delete", coll, id, nil); err != nil {
		return err
	}
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.collection(coll)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	old, had := c[id]
	if !had {
		return nil
	}
	delete(c, id)
	if err := m.saveCollection(coll, c); err != nil {
		c[id] = old
		return fmt.Errorf("delete %s: %w", coll, err)
	}
	return nil
}

// List reads every record of collection coll, by id.
func (k MemoryRecords) List(_ context.Context, coll string) (map[string][]byte, error) {
	if err := checkRecord("list", coll, "", nil); err != nil {
		return nil, err
	}
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.collection(coll)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	out := make(map[string][]byte, len(c))
	for id, v := range c {
		out[id] = append([]byte(nil), v...)
	}
	return out, nil
}

// FallbackRecords are a Fallback's records: Redis's, written to its Memory as well, so an outage reads
// what this replica knew; what is written during an outage stays in the Memory.
type FallbackRecords struct{ f *Fallback }

// Records are f's records.
func (f *Fallback) Records() FallbackRecords { return FallbackRecords{f} }

// Put writes record id of collection coll.
func (k FallbackRecords) Put(ctx context.Context, coll, id string, val []byte) error {
	f := k.f
	return do(ctx, f, "put", func(c context.Context) error {
		err := f.primary.Records().Put(c, coll, id, val)
		if err == nil {
			_ = f.local.Records().Put(c, coll, id, val)
		}
		return err
	}, func(c context.Context) error { return f.local.Records().Put(c, coll, id, val) })
}

// Get reads record id of collection coll; false when there is none.
func (k FallbackRecords) Get(ctx context.Context, coll, id string) ([]byte, bool, error) {
	f := k.f
	type got struct {
		v  []byte
		ok bool
	}
	g, err := call(ctx, f, "get", func(c context.Context) (got, error) {
		v, ok, err := f.primary.Records().Get(c, coll, id)
		return got{v, ok}, err
	}, func(c context.Context) (got, error) {
		v, ok, err := f.local.Records().Get(c, coll, id)
		return got{v, ok}, err
	})
	return g.v, g.ok, err
}

// Delete removes record id of collection coll, if there is one. Unlike the writes, a removal
// Redis did not make is ErrNotShared: the record comes back once Redis answers again.
func (k FallbackRecords) Delete(ctx context.Context, coll, id string) error {
	f := k.f
	if err := f.local.Records().Delete(ctx, coll, id); err != nil {
		return err
	}
	return do(ctx, f, "delete", func(c context.Context) error { return f.primary.Records().Delete(c, coll, id) },
		func(context.Context) error { return fmt.Errorf("delete: %w", ErrNotShared) })
}

// List reads every record of collection coll, by id.
func (k FallbackRecords) List(ctx context.Context, coll string) (map[string][]byte, error) {
	f := k.f
	return call(ctx, f, "list",
		func(c context.Context) (map[string][]byte, error) { return f.primary.Records().List(c, coll) },
		func(c context.Context) (map[string][]byte, error) { return f.local.Records().List(c, coll) })
}

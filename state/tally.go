package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Tally is one group of counters to add to: the group (a period and what it counts, such as a day's
// usage), the amount to add to each of its fields, and the TTL the group gets when it is created.
// Tallies hold numbers only.
type Tally struct {
	Group  string
	Fields map[string]int64
	TTL    time.Duration
}

// MaxTallyFields bounds a group in memory: a field beyond it is not counted (a Redis hash takes
// them all). A day of a workspace's usage is a few fields per person, channel and model.
const MaxTallyFields = 20000

// maxTallyGroups bounds the groups a Memory keeps (a group per period and kind of count, each
// expiring with its TTL).
const maxTallyGroups = 2000

// tallyFile is where a Memory with a directory keeps its tallies between runs.
const tallyFile = "tallies.json"

// tallySave is how often a Memory with a directory writes its tallies while it runs (and once more
// when Run ends): a crash loses at most this much counting.
const tallySave = time.Minute

// RedisTallies are a Redis store's groups of counters: a hash per group (tally:<group>).
type RedisTallies struct{ r *Redis }

// MemoryTallies are a Memory's groups of counters.
type MemoryTallies struct{ m *Memory }

// FallbackTallies are a Fallback's groups of counters.
type FallbackTallies struct{ f *Fallback }

// Tallies are r's groups of counters.
func (r *Redis) Tallies() RedisTallies { return RedisTallies{r} }

// Tallies are m's groups of counters.
func (m *Memory) Tallies() MemoryTallies { return MemoryTallies{m} }

// Tallies are f's groups of counters.
func (f *Fallback) Tallies() FallbackTallies { return FallbackTallies{f} }

func checkTallies(ts []Tally) error {
	for _, t := range ts {
		if t.Group == "" {
			return fmt.Errorf("tally: empty group: %w", errInvalid)
		}
		if err := positive("tally", t.TTL); err != nil {
			return err
		}
	}
	return nil
}

// Add adds every tally's fields in one round trip (HINCRBY; EXPIRE NX, in whole seconds, sets the TTL when the hash has none).
func (t RedisTallies) Add(ctx context.Context, ts ...Tally) error {
	if err := checkTallies(ts); err != nil {
		return err
	}
	r := t.r
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tl := range ts {
			key := r.key("tally:", tl.Group)
			for f, n := range tl.Fields {
				p.HIncrBy(ctx, key, f, n)
			}
			p.ExpireNX(ctx, key, tl.TTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tally add: %w", err)
	}
	return nil
}

// Get returns the fields' counts in group (0 for a field or a group that is not there).
func (t RedisTallies) Get(ctx context.Context, group string, fields ...string) ([]int64, error) {
	r := t.r
	vals, err := r.c.HMGet(ctx, r.key("tally:", group), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("tally get: %w", err)
	}
	out := make([]int64, len(fields))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			fmt.Sscan(s, &out[i])
		}
	}
	return out, nil
}

// All returns every field of group.
func (t RedisTallies) All(ctx context.Context, group string) (map[string]int64, error) {
	r := t.r
	key := r.key("tally:", group)
	// What Redis holds is read only within the bound a group has in memory: whoever can write
	// there must not make a /usage read take the process's memory.
	n, err := r.c.HLen(ctx, key).Result()
	switch {
	case err != nil:
		return nil, fmt.Errorf("tally all: %w", err)
	case n > MaxTallyFields:
		return nil, fmt.Errorf("tally all %s: %d fields: %w", group, n, ErrTooMany)
	}
	h, err := r.c.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("tally all: %w", err)
	}
	out := make(map[string]int64, len(h))
	for f, s := range h {
		var n int64
		if _, err := fmt.Sscan(s, &n); err == nil {
			out[f] = n
		}
	}
	return out, nil
}

// group is a Memory's group of counters.
type group struct {
	Fields map[string]int64 `json:"fields"`
	Until  time.Time        `json:"until"`
}

// Add adds every tally's fields. A group past MaxTallyFields takes no new field, and no group is
// made past maxTallyGroups (memory stays bounded whatever the ids counted).
func (t MemoryTallies) Add(_ context.Context, ts ...Tally) error {
	if err := checkTallies(ts); err != nil {
		return err
	}
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.writeTime()
	for _, tl := range ts {
		g, ok := m.tallies[tl.Group]
		if !ok || !now.Before(g.Until) {
			if len(m.tallies) >= maxTallyGroups {
				m.sweepTallies(now)
				if len(m.tallies) >= maxTallyGroups {
					continue
				}
			}
			g = &group{Fields: map[string]int64{}, Until: now.Add(tl.TTL)}
			m.tallies[tl.Group] = g
		}
		for f, n := range tl.Fields {
			if _, ok := g.Fields[f]; ok || len(g.Fields) < MaxTallyFields {
				g.Fields[f] += n
			}
		}
	}
	m.talliesChanged = true
	return nil
}

// Get returns the fields' counts in group (0 for a field or a group that is not there).
func (t MemoryTallies) Get(_ context.Context, group string, fields ...string) ([]int64, error) {
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, len(fields))
	g, ok := m.tallies[group]
	if !ok || !time.Now().Before(g.Until) {
		return out, nil
	}
	for i, f := range fields {
		out[i] = g.Fields[f]
	}
	return out, nil
}

// All returns every field of group.
func (t MemoryTallies) All(_ context.Context, group string) (map[string]int64, error) {
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	if g, ok := m.tallies[group]; ok && time.Now().Before(g.Until) {
		for f, n := range g.Fields {
			out[f] = n
		}
	}
	return out, nil
}

// sweepTallies drops the groups past their TTL. m.mu is held.
func (m *Memory) sweepTallies(now time.Time) {
	for k, g := range m.tallies {
		if !now.Before(g.Until) {
			delete(m.tallies, k)
		}
	}
}

// loadTallies reads the tallies a previous run left in the directory; a file that cannot be read
// is logged and left (counting starts again).
func (m *Memory) loadTallies() {
	b, err := os.ReadFile(filepath.Join(m.dir, tallyFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var gs map[string]*group
	if err == nil {
		err = json.Unmarshal(b, &gs)
	}
	if err != nil {
		m.log.Warn("state: reading the usage tallies", zap.Error(err))
		return
	}
	now := time.Now()
	for k, g := range gs {
		if g != nil && g.Fields != nil && now.Before(g.Until) && len(m.tallies) < maxTallyGroups &&
			len(g.Fields) <= MaxTallyFields {
			m.tallies[k] = g
		}
	}
}

// saveTallies writes the tallies to the directory when they changed (a temporary file renamed, so a
// crash leaves the old file or the new one).
func (m *Memory) saveTallies() {
	m.mu.Lock()
	if !m.talliesChanged {
		m.mu.Unlock()
		return
	}
	m.sweepTallies(time.Now())
	b, err := json.Marshal(m.tallies)
	m.talliesChanged = false
	m.mu.Unlock()
	if err == nil {
		path := filepath.Join(m.dir, tallyFile)
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		m.log.Warn("state: writing the usage tallies", zap.Error(err))
	}
}

// keepTallies saves the tallies every tallySave until ctx ends, and once more then.
func (m *Memory) keepTallies(ctx context.Context) {
	tick := time.NewTicker(tallySave)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			m.saveTallies()
			return
		case <-tick.C:
			m.saveTallies()
		}
	}
}

// Add adds to Redis (and to this replica's memory, which serves while Redis cannot be reached).
func (t FallbackTallies) Add(ctx context.Context, ts ...Tally) error {
	f := t.f
	return do(ctx, f, "tally add", func(c context.Context) error {
		err := f.primary.Tallies().Add(c, ts...)
		if err == nil {
			_ = f.local.Tallies().Add(c, ts...)
		}
		return err
	}, func(c context.Context) error { return f.local.Tallies().Add(c, ts...) })
}

// Get returns the fields' counts in group.
func (t FallbackTallies) Get(ctx context.Context, group string, fields ...string) ([]int64, error) {
	f := t.f
	return call(ctx, f, "tally get",
		func(c context.Context) ([]int64, error) { return f.primary.Tallies().Get(c, group, fields...) },
		func(c context.Context) ([]int64, error) { return f.local.Tallies().Get(c, group, fields...) })
}

// All returns every field of group.
func (t FallbackTallies) All(ctx context.Context, group string) (map[string]int64, error) {
	f := t.f
	return call(ctx, f, "tally all",
		func(c context.Context) (map[string]int64, error) { return f.primary.Tallies().All(c, group) },
		func(c context.Context) (map[string]int64, error) { return f.local.Tallies().All(c, group) })
}

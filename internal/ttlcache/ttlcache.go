// Package ttlcache is a small bounded map with per-entry expiry, shared by the use cases that
// remember a little for a while (names, marks, refusals).
package ttlcache

import (
	"container/list"
	"sync"
	"time"
)

// Cache is a bounded map with per-entry expiry, evicting the least recently used entry when full.
// Safe for concurrent use.
type Cache[V any] struct {
	max int
	ttl time.Duration

	mu sync.Mutex
	ll *list.List // front = most recently used; values are *entry[V]
	m  map[string]*list.Element
}

type entry[V any] struct {
	key string
	v   V
	exp time.Time
}

// New returns a Cache of at most max entries, each kept for ttl.
func New[V any](max int, ttl time.Duration) *Cache[V] {
	if max < 1 {
		max = 1
	}
	return &Cache[V]{max: max, ttl: ttl, ll: list.New(), m: make(map[string]*list.Element)}
}

func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*entry[V])
	if time.Now().After(e.exp) {
		c.ll.Remove(el)
		delete(c.m, key)
		var zero V
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.v, true
}

func (c *Cache[V]) Put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp := time.Now().Add(c.ttl)
	if el, ok := c.m[key]; ok {
		e := el.Value.(*entry[V])
		e.v, e.exp = v, exp
		c.ll.MoveToFront(el)
		return
	}
	c.m[key] = c.ll.PushFront(&entry[V]{key: key, v: v, exp: exp})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*entry[V]).key)
	}
}

func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

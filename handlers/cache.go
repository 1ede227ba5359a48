package handlers

import (
	"container/list"
	"sync"
	"time"
)

// ttlCache is a bounded map with per-entry expiry, evicting the least recently used entry when full.
// Safe for concurrent use.
type ttlCache[V any] struct {
	max int
	ttl time.Duration

	mu sync.Mutex
	ll *list.List // front = most recently used; values are *ttlEntry[V]
	m  map[string]*list.Element
}

type ttlEntry[V any] struct {
	key string
	v   V
	exp time.Time
}

func newTTLCache[V any](max int, ttl time.Duration) *ttlCache[V] {
	if max < 1 {
		max = 1
	}
	return &ttlCache[V]{max: max, ttl: ttl, ll: list.New(), m: make(map[string]*list.Element)}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*ttlEntry[V])
	if time.Now().After(e.exp) {
		c.ll.Remove(el)
		delete(c.m, key)
		var zero V
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp := time.Now().Add(c.ttl)
	if el, ok := c.m[key]; ok {
		e := el.Value.(*ttlEntry[V])
		e.v, e.exp = v, exp
		c.ll.MoveToFront(el)
		return
	}
	c.m[key] = c.ll.PushFront(&ttlEntry[V]{key: key, v: v, exp: exp})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*ttlEntry[V]).key)
	}
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

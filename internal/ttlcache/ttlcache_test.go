package ttlcache

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestTTLCacheEvictsOldestAndExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int](3, time.Minute)
		for i := range 3 {
			c.Put(fmt.Sprint(i), i)
		}
		c.Get("0")     // 0 is now the most recently used
		c.Put("3", 3)  // evicts 1, the least recently used
		c.Put("2", 20) // an update does not grow the cache
		got := []string{}
		for i := range 4 {
			v, ok := c.Get(fmt.Sprint(i))
			got = append(got, fmt.Sprint(v, ok))
		}
		if want := "[0 true 0 false 20 true 3 true]"; fmt.Sprint(got) != want {
			t.Errorf("after eviction: %v, want %s", got, want)
		}
		if n := c.Len(); n != 3 {
			t.Errorf("len = %d, want 3", n)
		}
		time.Sleep(time.Minute + time.Second)
		if _, ok := c.Get("3"); ok {
			t.Error("entry still there after its TTL")
		}
	})
}

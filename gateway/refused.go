package gateway

import (
	"sync"
	"time"
)

// DefaultRefusal is how long a refusal by Slack of something the bot may do without is remembered
// (native streaming, agent sessions, assistant statuses): Slack refuses them for the app or the
// place, not for one call, so asking again at once would only be refused again.
const DefaultRefusal = 10 * time.Minute

// Refused remembers that Slack refused something the bot may do without, so that it is not tried
// again for a while. The zero value allows it. Safe for concurrent use.
type Refused struct {
	mu    sync.Mutex
	until time.Time
}

// Allowed reports whether it may be tried: not refused in the last while.
func (f *Refused) Allowed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !time.Now().Before(f.until)
}

// Refuse records a refusal: it is not tried again for d.
func (f *Refused) Refuse(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = time.Now().Add(d)
}

package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"
)

// Times of the Redis store's own calls.
const (
	beatTimeout  = 2 * time.Second        // one heartbeat
	leaveTimeout = time.Second            // removing the liveness key when Run ends
	pollBlock    = 500 * time.Millisecond // one BLPOP of Receive: how late Receive sees its ctx end
	popMargin    = 500 * time.Millisecond // a BLPOP's answer after its block time
	leaseTries   = 3                      // Lease's reads when the holder changes under it
)

// Redis is the state shared by every replica through one Redis (or Valkey) server. Safe for concurrent use.
type Redis struct {
	c    *redis.Client
	ns   string
	self string
	log  *zap.Logger
	s    scripts
	// url (its password redacted) and password, for errors that must never show the password.
	url, password string

	// Liveness and polling times, fields so tests can shorten them.
	aliveTTL  time.Duration
	heartbeat time.Duration
	pollBlock time.Duration

	// beaten is when the last heartbeat that reached Redis began (Unix ns; 0: none yet), book what the
	// fence knows of this replica's answers. See Fence.
	beaten atomic.Int64
	book   fenceBook
}

// NewRedis connects to the server at rawURL (redis:// or rediss://, with a password and TLS as the URL says)
// and PINGs it. Every key is under namespace. Errors never show the URL's password.
func NewRedis(ctx context.Context, rawURL, namespace, self string, log *zap.Logger) (*Redis, error) {
	r, err := OpenRedis(rawURL, namespace, self, log)
	if err != nil {
		return nil, err
	}
	if err := r.Ping(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenRedis is NewRedis without the PING: the URL is checked, nothing is sent. A bot that starts
// while Redis is down opens it so, and a Fallback serves from memory until it answers (Degrade).
func OpenRedis(rawURL, namespace, self string, log *zap.Logger) (*Redis, error) {
	if self == "" {
		return nil, fmt.Errorf("new redis: empty replica id: %w", errInvalid)
	}
	if log == nil {
		log = zap.NewNop()
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, parseError(rawURL, err)
	}
	// Deadlines of the callers' contexts reach the socket, so a Fallback's short timeouts hold for a server
	// that stopped answering (otherwise only the client's 5 s read timeout would).
	opt.ContextTimeoutEnabled = true
	// Maintenance notifications are Redis Cloud's; a Redis 7 or Valkey server only refuses them.
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return &Redis{
		c: redis.NewClient(opt), ns: namespace, self: self, log: log, s: newScripts(), url: redact(rawURL),
		password: opt.Password, aliveTTL: AliveTTL, heartbeat: heartbeat, pollBlock: pollBlock,
	}, nil
}

// Ping asks the server PING. Its error never shows the URL's password.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return &redactedError{
			msg: scrub(fmt.Sprintf("new redis: PING %s: %v", r.url, err), r.password),
			err: err,
		}
	}
	return nil
}

// Self is this replica's id.
func (r *Redis) Self() string { return r.self }

// Run renews this replica's liveness (and its inbox's TTL) every few seconds until ctx ends, then deletes its
// liveness key, so its leases are free at once, and returns nil. A failing heartbeat is logged, not returned:
// the replica goes on, and comes back to life when Redis answers again.
func (r *Redis) Run(ctx context.Context) error {
	r.run(ctx, true)
	return nil
}

// run is Run; without graceful it ends as a crash would, leaving the liveness key to expire.
func (r *Redis) run(ctx context.Context, graceful bool) {
	tick := time.NewTicker(r.heartbeat)
	defer tick.Stop()
	failing := false
	for {
		bctx, cancel := context.WithTimeout(ctx, beatTimeout)
		err := r.beat(bctx)
		cancel()
		if ctx.Err() == nil {
			failing = r.logBeat(err, failing)
		}
		select {
		case <-ctx.Done():
			if graceful {
				r.leave(ctx)
			}
			return
		case <-tick.C:
		}
	}
}

// logBeat logs a heartbeat's failure once until it works again, and says when it does.
func (r *Redis) logBeat(err error, failing bool) bool {
	switch {
	case err != nil && !failing:
		r.log.Warn("state: Redis heartbeat failed; other replicas will take this one for dead until it works", zap.Error(err))
	case err == nil && failing:
		r.log.Info("state: Redis heartbeat works again")
	}
	return err != nil
}

// beat renews this replica's liveness and its inbox's TTL, and learns whether the liveness key had
// expired (or been lost) since the previous beat: then the liveness lapsed, whatever the local clocks say.
func (r *Redis) beat(ctx context.Context) error {
	start := time.Now()
	existed, err := r.s.beat.Run(ctx, r.c, []string{r.key("alive:", r.self), r.key("inbox:", r.self)},
		r.aliveTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	r.beatAt(start, time.Now(), existed == 0)
	return nil
}

// leave deletes this replica's liveness key, on a context of its own: ctx has ended.
func (r *Redis) leave(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	if err := r.c.Del(lctx, r.key("alive:", r.self)).Err(); err != nil {
		r.log.Warn("state: removing this replica's liveness from Redis; it expires by itself", zap.Error(err))
	}
}

// Close closes the connections to Redis, once Run has returned.
func (r *Redis) Close() error { return r.c.Close() }

// Claim is true the first time key is claimed within ttl.
func (k RedisKeys) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	r := k.r
	if err := positive("claim", ttl); err != nil {
		return false, err
	}
	_, err := r.c.SetArgs(ctx, r.key("claim:", key), "1", redis.SetArgs{Mode: "NX", TTL: ttl}).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	return true, nil
}

// Mark sets a flag on key for ttl.
func (k RedisKeys) Mark(ctx context.Context, key string, ttl time.Duration) error {
	r := k.r
	if err := positive("mark", ttl); err != nil {
		return err
	}
	if err := r.c.Set(ctx, r.key("mark:", key), "1", ttl).Err(); err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	return nil
}

// Marked reports whether key's flag is set.
func (k RedisKeys) Marked(ctx context.Context, key string) (bool, error) {
	r := k.r
	n, err := r.c.Exists(ctx, r.key("mark:", key)).Result()
	if err != nil {
		return false, fmt.Errorf("marked: %w", err)
	}
	return n == 1, nil
}

// Add adds delta to counter key and returns its new value; ttl is set when the key is created.
func (k RedisKeys) Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	r := k.r
	if err := positive("add", ttl); err != nil {
		return 0, err
	}
	n, err := r.s.add.Run(ctx, r.c, []string{r.key("count:", key)}, delta, ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("add: %w", err)
	}
	return n, nil
}

// Take takes a token of bucket name if one is there now and returns 0, or returns how long until one will be.
// The bucket's time is Redis's, so the replicas' clocks do not matter.
func (k RedisKeys) Take(ctx context.Context, name string, perMinute float64, burst int) (time.Duration, error) {
	r := k.r
	interval, err := emission(perMinute, burst)
	if err != nil {
		return 0, err
	}
	keys := []string{r.key("bucket:", name), r.key("pause:", name)}
	us, err := r.s.take.Run(ctx, r.c, keys, interval.Microseconds(), burst).Int64()
	if err != nil {
		return 0, fmt.Errorf("take: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Pause stops bucket name until until; an earlier pause than the one in force is ignored. until is turned
// into a time from now here, and back into a time on Redis's clock there.
func (k RedisKeys) Pause(ctx context.Context, name string, until time.Time) error {
	r := k.r
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	if err := r.s.pause.Run(ctx, r.c, []string{r.key("pause:", name)}, d.Microseconds()).Err(); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Holder returns the replica holding the lease key, "" when none does (a holder that died is
// returned until its lease is taken again: the caller checks Alive when it matters).
func (r *Redis) Holder(ctx context.Context, key string) (string, error) {
	holder, err := r.c.Get(ctx, r.key("lease:", key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("holder: %w", err)
	}
	return holder, nil
}

// Lease takes key for this replica if it is free, already this replica's, or held by a replica that is not
// alive, and returns the holder.
func (r *Redis) Lease(ctx context.Context, key string) (string, error) {
	lk := r.key("lease:", key)
	seen, err := r.c.Get(ctx, lk).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("lease: %w", err)
	}
	// The script checks the liveness of the holder read here (a key must be named to the script); when the
	// holder changed in between, it is read again.
	for range leaseTries {
		holder, err := r.s.lease.Run(ctx, r.c, []string{lk, r.key("alive:", seen)},
			r.self, seen, LeaseTTL.Milliseconds()).Text()
		if err != nil {
			return "", fmt.Errorf("lease: %w", err)
		}
		if holder == r.self || holder == seen {
			return holder, nil
		}
		seen = holder
	}
	return seen, nil
}

// Release frees key if this replica holds it.
func (r *Redis) Release(ctx context.Context, key string) error {
	if err := r.s.release.Run(ctx, r.c, []string{r.key("lease:", key)}, r.self).Err(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// Alive reports whether replica is alive (this one always is).
func (r *Redis) Alive(ctx context.Context, replica string) (bool, error) {
	if replica == r.self {
		return true, nil
	}
	n, err := r.c.Exists(ctx, r.key("alive:", replica)).Result()
	if err != nil {
		return false, fmt.Errorf("alive: %w", err)
	}
	return n == 1, nil
}

// Open records a as in progress, owned by this replica (an answer with the same ID is replaced).
func (j RedisAnswers) Open(ctx context.Context, a Answer) error {
	r := j.r
	a, err := opened(a, r.self)
	if err != nil {
		return err
	}
	k := r.key("answer:", a.ID)
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k)
		p.HSet(ctx, k, toHash(a)...)
		p.PExpire(ctx, k, answerTTL)
		p.SAdd(ctx, r.key("answers", ""), a.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("open answer: %w", err)
	}
	r.book.opened(a)
	return nil
}

// AddMessage appends ts to the messages of answer id, once. An answer that is not open is left alone.
func (j RedisAnswers) AddMessage(ctx context.Context, id, ts string) error {
	r := j.r
	if err := validTS(ts); err != nil {
		return err
	}
	err := r.s.addMessage.Run(ctx, r.c, []string{r.key("answer:", id)},
		ts, now().Format(time.RFC3339Nano), answerTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("add message: %w", err)
	}
	return nil
}

// CloseAnswer removes answer id from the journal unless another replica owns it; closing an answer
// that is not open does nothing.
func (j RedisAnswers) CloseAnswer(ctx context.Context, id string) error {
	r := j.r
	err := r.s.closeAnswer.Run(ctx, r.c, []string{r.key("answer:", id), r.key("answers", "")}, id, r.self).Err()
	if err != nil {
		return fmt.Errorf("close answer: %w", err)
	}
	r.book.closed(id)
	return nil
}

// Abandon hands answer id, if this replica owns it, over for adoption: it becomes nobody's, an orphan
// that the next sweep of any replica (this one included) adopts and closes. For an answer whose closing
// write did not land, or whose adopter could not write its close.
func (j RedisAnswers) Abandon(ctx context.Context, id string) error {
	r := j.r
	err := r.s.abandon.Run(ctx, r.c, []string{r.key("answer:", id)},
		r.self, now().Format(time.RFC3339Nano), answerTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("abandon answer: %w", err)
	}
	r.book.closed(id)
	return nil
}

// Get returns open answer id.
func (j RedisAnswers) Get(ctx context.Context, id string) (Answer, bool, error) {
	r := j.r
	h, err := r.c.HGetAll(ctx, r.key("answer:", id)).Result()
	if err != nil {
		return Answer{}, false, fmt.Errorf("get answer: %w", err)
	}
	if len(h) == 0 {
		return Answer{}, false, nil
	}
	a, err := fromHash(h)
	if err != nil {
		return Answer{}, false, fmt.Errorf("get answer: %w", err)
	}
	return a, true, nil
}

// Orphans returns the open answers whose owner is not alive (never this replica's), oldest first.
func (j RedisAnswers) Orphans(ctx context.Context) ([]Answer, error) {
	r := j.r
	ids, err := r.c.SMembers(ctx, r.key("answers", "")).Result()
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	others, err := j.othersAnswers(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	cmds := make([]*redis.IntCmd, len(others))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, a := range others {
			cmds[i] = p.Exists(ctx, r.key("alive:", a.Owner))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	var out []Answer
	for i, a := range others {
		if cmds[i].Val() == 0 {
			out = append(out, a)
		}
	}
	sortAnswers(out)
	return out, nil
}

// othersAnswers reads the open answers ids that other replicas own. Ids whose answer has expired are taken
// out of the set of open answers on the way.
func (j RedisAnswers) othersAnswers(ctx context.Context, ids []string) ([]Answer, error) {
	r := j.r
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, r.key("answer:", id))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Answer
	var gone []any
	for i, cmd := range cmds {
		if len(cmd.Val()) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		a, err := fromHash(cmd.Val())
		if err != nil {
			r.log.Warn("state: skipping an answer in Redis", zap.String("id", ids[i]), zap.Error(err))
			continue
		}
		if a.Owner != r.self {
			out = append(out, a)
		}
	}
	if len(gone) > 0 {
		if err := r.c.SRem(ctx, r.key("answers", ""), gone...).Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Adopt makes this replica the owner of orphan id; ok is false when it is not open or its owner is alive
// (another replica adopted it first, or it was not orphaned).
func (j RedisAnswers) Adopt(ctx context.Context, id string) (Answer, bool, error) {
	r := j.r
	k := r.key("answer:", id)
	owner, err := r.c.HGet(ctx, k, fOwner).Result()
	if errors.Is(err, redis.Nil) {
		return Answer{}, false, nil
	}
	if err != nil {
		return Answer{}, false, fmt.Errorf("adopt: %w", err)
	}
	if owner == r.self {
		return Answer{}, false, nil
	}
	// The script adopts only if the owner is still the one read here, so of two replicas adopting at once
	// the second finds the first as owner, alive.
	fields, err := r.s.adopt.Run(ctx, r.c, []string{k, r.key("alive:", owner), r.key("adopted:", id)},
		owner, r.self, now().Format(time.RFC3339Nano), answerTTL.Milliseconds()).StringSlice()
	if errors.Is(err, redis.Nil) {
		return Answer{}, false, nil
	}
	if err != nil {
		return Answer{}, false, fmt.Errorf("adopt: %w", err)
	}
	h := make(map[string]string, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		h[fields[i]] = fields[i+1]
	}
	a, err := fromHash(h)
	if err != nil {
		return Answer{}, false, fmt.Errorf("adopt: %w", err)
	}
	return a, true, nil
}

// Send queues msg in replica's inbox; a replica that is not alive is ErrNoReplica.
func (i RedisInbox) Send(ctx context.Context, replica string, msg []byte) error {
	r := i.r
	own := "0"
	if replica == r.self {
		own = "1" // alive by definition, even before Run's first heartbeat
	}
	keys := []string{r.key("inbox:", replica), r.key("alive:", replica)}
	n, err := r.s.send.Run(ctx, r.c, keys, msg, r.aliveTTL.Milliseconds(), own).Int()
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if n == 0 {
		return ErrNoReplica
	}
	return nil
}

// Receive returns the next message for this replica, waiting for one until ctx ends (it notices within
// about half a second).
func (i RedisInbox) Receive(ctx context.Context) ([]byte, error) {
	r := i.r
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msg, ok, err := i.pop(ctx, r.pollBlock)
		if err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		if ok {
			return msg, nil
		}
	}
}

// pop waits up to block for a message in this replica's inbox. It ignores ctx's end and deadline (not its
// values) for a deadline of its own, after the server's: a BLPOP cut short on our side may still pop a
// message on the server's, which would be lost.
func (i RedisInbox) pop(ctx context.Context, block time.Duration) ([]byte, bool, error) {
	r := i.r
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), block+popMargin)
	defer cancel()
	secs := strconv.FormatFloat(block.Seconds(), 'f', 3, 64)
	kv, err := r.c.Do(pctx, "blpop", r.key("inbox:", r.self), secs).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(kv) != 2 {
		return nil, false, fmt.Errorf("blpop answered %d values", len(kv))
	}
	return []byte(kv[1]), true, nil
}

// ping is the Fallback's probe.
func (r *Redis) ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

func (r *Redis) key(kind, name string) string { return r.ns + kind + name }

// redactedError is an error whose text was cleaned of a password; it still unwraps to its cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// parseError says why rawURL is not a Redis URL without repeating it: url.Parse's errors quote the whole
// URL, password included, so only their reason is kept, and none of them is wrapped.
func parseError(rawURL string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("new redis: REDIS_URL is not a URL: %v", ue.Err)
	}
	u, _ := url.Parse(rawURL) // it parsed: ParseURL's own checks failed
	pw, _ := u.User.Password()
	return errors.New(scrub(fmt.Sprintf("new redis: REDIS_URL %s: %v", u.Redacted(), err), pw))
}

// redact is rawURL without its password.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(REDIS_URL)"
	}
	return u.Redacted()
}

// scrub removes password from s, wherever a library may have put it.
func scrub(s, password string) string {
	if password == "" {
		return s
	}
	return strings.ReplaceAll(s, password, "xxxxx")
}

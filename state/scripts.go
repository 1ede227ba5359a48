package state

import "github.com/redis/go-redis/v9"

// scripts are the Redis store's check-then-set operations, each one Lua script so that no other client's
// command comes between its check and its write. Times are Redis's own (TIME, in microseconds) wherever
// replicas compare them.
type scripts struct {
	add, take, pause, lease, release, addMessage, adopt, send, closeAnswer, beat, abandon *redis.Script
}

func newScripts() scripts {
	return scripts{
		add:        redis.NewScript(addLua),
		take:       redis.NewScript(takeLua),
		pause:      redis.NewScript(pauseLua),
		lease:      redis.NewScript(leaseLua),
		release:    redis.NewScript(releaseLua),
		addMessage: redis.NewScript(addMessageLua),
		adopt:      redis.NewScript(adoptLua),
		send:       redis.NewScript(sendLua),

		closeAnswer: redis.NewScript(closeAnswerLua),
		beat:        redis.NewScript(beatLua),
		abandon:     redis.NewScript(abandonLua),
	}
}

// closeAnswerLua: KEYS[1] answer hash, KEYS[2] the set of open ids; ARGV id, self. Removes the record unless
// another replica owns it (it adopted the answer, or opened the same id again): a late close, replayed after
// an outage, must not remove a record that is someone else's now.
const closeAnswerLua = `
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[2] then
	return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
`

// addLua: KEYS[1] counter; ARGV delta, ttl ms. The TTL is set when the counter has none (it was just made).
const addLua = `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) == -1 then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return n
`

// takeLua: KEYS[1] bucket, KEYS[2] pause; ARGV emission interval µs, burst. Returns 0 when a token was taken,
// else the µs until one will be. GCRA: the bucket stores the theoretical arrival time (tat) of the next
// token; a token may be taken when tat + interval lies within burst intervals of now. Numbers are written
// with %.0f: Lua's default formatting of a µs time loses digits.
const takeLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local paused = tonumber(redis.call('GET', KEYS[2]) or '0')
if paused > now then
	return paused - now
end
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
	tat = now
end
local nexttat = tat + interval
local allow = nexttat - tonumber(ARGV[2]) * interval
if allow > now then
	return allow - now
end
redis.call('SET', KEYS[1], string.format('%.0f', nexttat), 'PX', string.format('%.0f', math.ceil((nexttat - now) / 1000) + 1))
return 0
`

// pauseLua: KEYS[1] pause; ARGV duration µs from now. A pause ending later than the one in force wins.
const pauseLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local d = tonumber(ARGV[1])
local untl = now + d
if tonumber(redis.call('GET', KEYS[1]) or '0') >= untl then
	return 0
end
redis.call('SET', KEYS[1], string.format('%.0f', untl), 'PX', string.format('%.0f', math.ceil(d / 1000) + 1))
return 1
`

// leaseLua: KEYS[1] lease, KEYS[2] the liveness key of ARGV[2]; ARGV self, the holder the caller read ("" for
// none), ttl ms. Takes the lease when it is free, self's, or still held by that holder and the holder is not
// alive. Returns the holder.
const leaseLua = `
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] or (cur == ARGV[2] and redis.call('EXISTS', KEYS[2]) == 0) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
	return ARGV[1]
end
return cur
`

// releaseLua: KEYS[1] lease; ARGV self. Compare and delete.
const releaseLua = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`

// addMessageLua: KEYS[1] answer; ARGV ts, updated, ttl ms. Appends ts to the comma-separated messages unless
// it is there; an answer that is not open is left alone.
const addMessageLua = `
if redis.call('EXISTS', KEYS[1]) == 0 then
	return 0
end
local msgs = redis.call('HGET', KEYS[1], 'messages') or ''
if string.find(',' .. msgs .. ',', ',' .. ARGV[1] .. ',', 1, true) then
	return 0
end
if msgs == '' then
	msgs = ARGV[1]
else
	msgs = msgs .. ',' .. ARGV[1]
end
redis.call('HSET', KEYS[1], 'messages', msgs, 'updated', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

// abandonLua: KEYS[1] answer; ARGV self, updated, ttl ms. Makes the answer nobody's if it is self's.
const abandonLua = `
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'owner', '', 'updated', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

// beatLua: KEYS[1] this replica's liveness key, KEYS[2] its inbox; ARGV ttl ms. Renews both, and returns 1
// when the liveness key was still there, 0 when it had expired or been lost (a lapse, see Fence).
const beatLua = `
local existed = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return existed
`

// adoptLua: KEYS[1] answer, KEYS[2] the liveness key of ARGV[1], KEYS[3] the answer's tombstone; ARGV the
// owner the caller read, self, updated, ttl ms. Makes self the owner if the owner is still that one and not
// alive; returns the answer's fields, or nil. The tombstone names the adopter for as long as the record
// could have lived: the replica cut off learns from it, once the adopter has closed the record, that its
// answer was taken rather than lost by Redis.
const adoptLua = `
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
	return false
end
if redis.call('EXISTS', KEYS[2]) == 1 then
	return false
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'updated', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4])
return redis.call('HGETALL', KEYS[1])
`

// sendLua: KEYS[1] inbox, KEYS[2] the receiver's liveness key; ARGV message, ttl ms, "1" when the receiver is
// the sender (alive by definition). Returns 0 when the receiver is not alive: nobody would read it.
const sendLua = `
if ARGV[3] ~= '1' and redis.call('EXISTS', KEYS[2]) == 0 then
	return 0
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

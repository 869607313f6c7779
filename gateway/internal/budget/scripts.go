package budget

import "github.com/redis/rueidis"

// Script replies are arrays of integers; the first is one of these codes.
const (
	codeRefused   = 0  // not admitted; for Settle: a repeat, nothing added
	codeAdmitted  = 1  // admitted (Status: ok); for Settle: actual added
	codeDuplicate = 2  // Reserve: a live hold existed
	codeRecreated = 3  // Extend: there was no live hold, one was made
	codeSeed      = -1 // spent is missing: seed it and call again
	codeSettled   = -2 // the request id was settled within the window
)

// prelude is shared by the scripts that purge expired holds.
//
// Numbers cross into Redis as strings; int formats them with %d, which
// Redis's Lua 5.1 formats as a C long (64 bits on every platform Redis
// ships for), exactly for the whole numbers a double holds (below 2^53):
// Lua's default number format keeps only 14 significant digits, fewer than
// a lease end in microseconds has, and %.0f (or a Lua number handed to
// redis.call, which Redis formats with %.17g) takes glibc's floating-point
// path, about three times the CPU of %d (docs/adr/0020-redis-functions.md).
// Constant arguments are strings for the same reason. unpack is batched
// (LUAI_MAXCSTACK is 8000) and so is the work per call of ZRANGEBYSCORE.
const prelude = `
local function int(x) return string.format('%d', x) end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- expire drops the holds whose lease ended at or before at (now, as
-- int made it: formatted once per script call, not once per scope).
local function expire(holds, leases, at)
  local batch, limit = 256, '256'
  repeat
    local ids = redis.call('ZRANGEBYSCORE', leases, '-inf', at, 'LIMIT', '0', limit)
    if #ids > 0 then
      local amounts = redis.call('HMGET', holds, unpack(ids))
      local sum = 0
      for i = 1, #amounts do
        if amounts[i] then sum = sum + tonumber(amounts[i]) end
      end
      redis.call('HDEL', holds, unpack(ids))
      redis.call('ZREM', leases, unpack(ids))
      if sum ~= 0 then redis.call('HINCRBY', holds, '', int(-sum)) end
    end
  until #ids < batch
end

-- purge expires holds and returns the sum of the remaining ones (field ''
-- of the holds hash).
local function purge(holds, leases, now)
  expire(holds, leases, int(now))
  return tonumber(redis.call('HGET', holds, '') or 0)
end
`

// scopesPrelude reads the scopes of a multi-scope call from the first NK
// keys K and the arguments A, locals the script declares before it (KEYS,
// ARGV and #KEYS in a script of its own; set before each call in a
// library, package meterstore, whose calls carry the rate limiter's keys
// and arguments after the budget's). K[1] is the request's settled marker
// and scope i has K[3i-1] spent, K[3i] holds and K[3i+1] leases; n, the
// number of scopes, is set by loadSpent, which every call runs first.
// loadSpent reads the marker and every spent key with one MGET; it
// returns the spent of every scope and whether the marker exists, or nil
// and the reply {codeSeed, i...} naming the scopes whose spent key is
// missing (nothing has been changed then).
const scopesPrelude = prelude + `
local n, pre

-- spentKeys returns the marker and every scope's spent key, the keys
-- loadSpent reads.
local function spentKeys()
  local ks = {K[1]}
  for i = 1, (NK - 1) / 3 do ks[i+1] = K[3*i-1] end
  return ks
end

local function loadSpent()
  n = (NK - 1) / 3
  -- pre: the values of spentKeys() (and any keys after them) that the
  -- caller read with a command of its own just before, in the same call.
  local v = pre
  pre = nil
  if not v then v = redis.call('MGET', unpack(spentKeys())) end
  local spent, missing = {}, {-1}
  for i = 1, n do
    -- MGET reads a key of another type as missing: GET (cold path)
    -- makes that the WRONGTYPE error it is.
    local s = v[i+1] or redis.call('GET', K[3*i-1])
    if s then spent[i] = tonumber(s) else missing[#missing+1] = i end
  end
  if #missing > 1 then return nil, missing end
  return spent, v[1] ~= false
end

-- loadHolds expires the holds of every scope and returns each scope's sum
-- of holds and the request's own hold (nil: none), read with one HMGET.
local function loadHolds(now)
  local reserved, held, at = {}, {}, int(now)
  for i = 1, n do
    expire(K[3*i], K[3*i+1], at)
    local v = redis.call('HMGET', K[3*i], '', A[1])
    reserved[i] = tonumber(v[1] or 0)
    held[i] = v[2] and tonumber(v[2])
  end
  return reserved, held
end

-- reply is {code, refused scope (0: none), spent1, reserved1, ...}.
local function reply(code, refused, spent, reserved)
  local r = {code, refused}
  for i = 1, n do
    r[#r+1] = spent[i]
    r[#r+1] = reserved[i]
  end
  return r
end

-- tightest returns the scope, of those listed in need, where amount does
-- not fit (spent + reserved + amount > limit, A[2+2i]) with the least
-- room, or 0 when it fits in all of them.
local function tightest(need, amount, spent, reserved)
  local worst, room = 0, 0
  for i = 1, n do
    if need[i] then
      local left = tonumber(A[2+2*i]) - spent[i] - reserved[i]
      if amount > left and (worst == 0 or left < room) then worst, room = i, left end
    end
  end
  return worst
end

-- hold adds amount (A[2], as a number) to the hold of A[1] in scope i
-- (held before, reserved the sum before), sets its lease end and, when
-- renew, restarts the key TTL (A[3+2i]); it returns the scope's reserved.
-- The hold and the sum are written with one HSET; a new hold is A[2] as
-- it came (Go formatted it).
local function hold(i, held, reserved, leaseEnd, renew, amount)
  redis.call('HSET', K[3*i], A[1], held and int(held + amount) or A[2], '', int(reserved + amount))
  redis.call('ZADD', K[3*i+1], leaseEnd, A[1])
  if renew then
    redis.call('PEXPIRE', K[3*i], A[3+2*i])
    redis.call('PEXPIRE', K[3*i+1], A[3+2*i])
  end
  return reserved + amount
end
`

// reserveBody is the body of reserve: KEYS as scopesPrelude; ARGV request
// id, amount, lease (µs), then per scope its limit and key TTL (ms); now,
// the server clock in µs, when the caller has read it already (nil: read
// TIME). Replies as reply in scopesPrelude, or {codeSeed, i...}. A scope
// that already has a live hold of the request keeps it as it is; the
// others get one if amount fits in every one of them.
const reserveBody = `
local spent, settled = loadSpent()
if not spent then return settled end
now = now or clock()
local reserved, held = loadHolds(now)
if settled then return reply(-2, 0, spent, reserved) end
local need, missing = {}, false
for i = 1, n do
  if not held[i] then need[i], missing = true, true end
end
if not missing then return reply(2, 0, spent, reserved) end
local amount = tonumber(A[2])
local refused = tightest(need, amount, spent, reserved)
if refused > 0 then return reply(0, refused, spent, reserved) end
local leaseEnd = int(now + tonumber(A[3]))
-- A scope's first hold restarts its keys' TTL: with no hold (the sum 0)
-- the leases key may be gone (an empty set is deleted) or the holds key
-- new, and neither must be left without one. A scope that always has a
-- hold keeps the TTL its keys got then, which outlives the period
-- (KeyTTL); one reserve in 64, by the clock's microseconds, restarts it
-- anyway, for a KeyTTL shorter than a period.
local renew = now % 64 == 0
for i = 1, n do
  if need[i] then reserved[i] = hold(i, nil, reserved[i], leaseEnd, renew or reserved[i] == 0, amount) end
end
return reply(1, 0, spent, reserved)
`

var reserveScript = rueidis.NewLuaScript("local K, A, NK = KEYS, ARGV, #KEYS\nlocal now\n" + scopesPrelude + reserveBody)

// extendScript: as reserveScript, with more for amount. A refusal changes
// nothing; an admission grows (or makes) the hold in every scope and
// renews its lease.
var extendScript = rueidis.NewLuaScript("local K, A, NK = KEYS, ARGV, #KEYS\n" + scopesPrelude + `
local spent, settled = loadSpent()
if not spent then return settled end
local now = clock()
local reserved, held = loadHolds(now)
local all = {}
for i = 1, n do all[i] = true end
if settled then return reply(-2, 0, spent, reserved) end
local more = tonumber(A[2])
local refused = tightest(all, more, spent, reserved)
if refused > 0 then return reply(0, refused, spent, reserved) end
local code = 1
local leaseEnd = int(now + tonumber(A[3]))
for i = 1, n do
  if not held[i] then code = 3 end
  reserved[i] = hold(i, held[i], reserved[i], leaseEnd, true, more)
end
return reply(code, 0, spent, reserved)
`)

// shrinkScript: KEYS holds and leases of each scope; ARGV request id, to.
// Lowers the live hold of every scope to to where it is larger; replies
// {codeAdmitted, scopes that held the request}. It reads no spent key, so
// it never asks for a seed.
var shrinkScript = rueidis.NewLuaScript(prelude + `
local at = int(clock())
local to = tonumber(ARGV[2])
local live = 0
for i = 1, #KEYS, 2 do
  expire(KEYS[i], KEYS[i+1], at)
  local held = redis.call('HGET', KEYS[i], ARGV[1])
  if held then
    live = live + 1
    held = tonumber(held)
    if held > to then
      redis.call('HSET', KEYS[i], ARGV[1], ARGV[2])
      redis.call('HINCRBY', KEYS[i], '', int(to - held))
    end
  end
end
return {1, live}
`)

// settleBody is the body of settle: KEYS as scopesPrelude; ARGV request
// id, actual, settled TTL (ms). The holds are removed either way; then,
// unless the marker exists, actual is added to every scope's spent.
// Replies {codeAdmitted, before1, after1, ...} (spent before and after,
// per scope), {codeRefused, spent1, spent1, ...} for a repeat, or
// {codeSeed, i...}.
const settleBody = `
local spent, seed = loadSpent()
if not spent then return seed end
for i = 1, n do
  -- A hold is a whole number >= 0 as int or Go wrote it, so '-'..held
  -- is its negation without a round trip through a Lua number.
  local held = redis.call('HGET', K[3*i], A[1])
  if held then
    redis.call('HDEL', K[3*i], A[1])
    redis.call('ZREM', K[3*i+1], A[1])
    if held ~= '0' then redis.call('HINCRBY', K[3*i], '', '-' .. held) end
  end
end
local r = {0}
if redis.call('SET', K[1], '1', 'NX', 'PX', A[3]) then
  r[1] = 1
  for i = 1, n do
    r[#r+1] = spent[i]
    r[#r+1] = redis.call('INCRBY', K[3*i-1], A[2])
  end
else
  for i = 1, n do
    r[#r+1] = spent[i]
    r[#r+1] = spent[i]
  end
end
return r
`

// HoldSettleLua defines, over the keys K, of which the first NK are the
// budget's, and arguments A (locals declared before it, which the caller
// sets before each call), the Lua functions
// reserve(now), Reserve's work, whose reply a Hold reads, and settle(),
// Settle's, whose reply a Settlement reads. Package meterstore's library
// runs reserve after the rate limiter's admission, in one call, with the
// admission's now (one TIME for both), and settle after its correction.
const HoldSettleLua = scopesPrelude + "local function reserve(now)\n" + reserveBody + "end\n" +
	"local function settle()\n" + settleBody + "end\n"

var settleScript = rueidis.NewLuaScript("local K, A, NK = KEYS, ARGV, #KEYS\n" + scopesPrelude + settleBody)

// statusScript: KEYS spent, holds, leases of one scope. Replies
// {codeAdmitted, spent, reserved} or {codeSeed}.
var statusScript = rueidis.NewLuaScript(prelude + `
local spent = redis.call('GET', KEYS[1])
if not spent then return {-1, 1} end
local reserved = purge(KEYS[2], KEYS[3], clock())
return {1, tonumber(spent), reserved}
`)

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
// Numbers cross into Redis as strings; int formats them with %.0f because
// Lua's default number format keeps only 14 significant digits, fewer than
// a lease end in microseconds has. unpack is batched (LUAI_MAXCSTACK is
// 8000) and so is the work per call of ZRANGEBYSCORE.
const prelude = `
local function int(x) return string.format('%.0f', x) end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- purge drops the holds whose lease ended at or before now and returns the
-- sum of the remaining holds (field '' of the holds hash).
local function purge(holds, leases, now)
  local batch = 256
  repeat
    local ids = redis.call('ZRANGEBYSCORE', leases, '-inf', int(now), 'LIMIT', 0, batch)
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
  return tonumber(redis.call('HGET', holds, '') or 0)
end
`

// reserveScript: KEYS spent, holds, leases, settled marker; ARGV request
// id, amount, limit, lease (µs), key TTL (ms). Replies {code, spent,
// reserved} or {codeSeed}.
var reserveScript = rueidis.NewLuaScript(prelude + `
local spent = redis.call('GET', KEYS[1])
if not spent then return {-1} end
spent = tonumber(spent)
local now = clock()
local reserved = purge(KEYS[2], KEYS[3], now)
if redis.call('EXISTS', KEYS[4]) == 1 then return {-2, spent, reserved} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {2, spent, reserved} end
if spent + reserved + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return {0, spent, reserved} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
reserved = redis.call('HINCRBY', KEYS[2], '', ARGV[2])
redis.call('ZADD', KEYS[3], int(now + tonumber(ARGV[4])), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return {1, spent, reserved}
`)

// extendScript: as reserveScript, with more for amount. A refusal changes
// nothing; an admission grows (or makes) the hold and renews its lease.
var extendScript = rueidis.NewLuaScript(prelude + `
local spent = redis.call('GET', KEYS[1])
if not spent then return {-1} end
spent = tonumber(spent)
local now = clock()
local reserved = purge(KEYS[2], KEYS[3], now)
if redis.call('EXISTS', KEYS[4]) == 1 then return {-2, spent, reserved} end
if spent + reserved + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return {0, spent, reserved} end
local code = 1
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then code = 3 end
redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
reserved = redis.call('HINCRBY', KEYS[2], '', ARGV[2])
redis.call('ZADD', KEYS[3], int(now + tonumber(ARGV[4])), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return {code, spent, reserved}
`)

// shrinkScript: KEYS holds, leases; ARGV request id, to. Lowers a live hold
// to to when it is larger; replies {codeAdmitted, held after} or
// {codeRefused, 0} when there is no live hold. It reads no spent key, so it
// never asks for a seed.
var shrinkScript = rueidis.NewLuaScript(prelude + `
purge(KEYS[1], KEYS[2], clock())
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then return {0, 0} end
held = tonumber(held)
local to = tonumber(ARGV[2])
if held > to then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HINCRBY', KEYS[1], '', int(to - held))
  held = to
end
return {1, held}
`)

// settleScript: KEYS spent, holds, leases, settled marker; ARGV request id,
// actual, settled TTL (ms). Replies {codeAdmitted, spent} when actual was
// added, {codeRefused, spent} for a repeat, or {codeSeed}. The hold is
// removed either way.
var settleScript = rueidis.NewLuaScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  held = tonumber(held)
  if held ~= 0 then redis.call('HINCRBY', KEYS[2], '', int(-held)) end
end
if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[3]) then
  return {0, tonumber(redis.call('GET', KEYS[1]))}
end
return {1, redis.call('INCRBY', KEYS[1], ARGV[2])}
`)

// statusScript: KEYS spent, holds, leases. Replies {codeAdmitted, spent,
// reserved} or {codeSeed}.
var statusScript = rueidis.NewLuaScript(prelude + `
local spent = redis.call('GET', KEYS[1])
if not spent then return {-1} end
local reserved = purge(KEYS[2], KEYS[3], clock())
return {1, tonumber(spent), reserved}
`)

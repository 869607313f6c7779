package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// AdmitLua defines the Lua function admit(K, A, ko, ao, n, v, vo), which
// checks the n cells and charges all or none:
//
//	K[ko+i]      a cell: its TAT, µs of the server clock
//	A[ao+2i-1]   the cell's cost, µs
//	A[ao+2i]     the cell's tolerance, µs
//	v[vo+i]      the cell's value, when the caller read the cells (in an
//	             MGET of its own, with other keys, just before): else
//	             v is nil and admit reads them
//
// The offsets let a call of several parts (package meterstore) pass its
// KEYS and ARGV as they are: copying them into tables of their own cost
// a tenth of the call's instructions in Redis.
//
// It returns {allowed (1 or 0), now, tat_1, ..., tat_n}: each tat is the
// cell's TAT before this admission, at least now. A key expires a second
// after its TAT (PX), when the cell is full and the key can go. The cells
// are read with one MGET (and a missing one again with GET, which fails
// on a key of another type). Numbers go to redis.call as strings made by
// int, string.format('%d'): every digit of a TAT (16; Lua's tostring keeps
// 14), formatted as a C long, about a third of the CPU of the %.17g Redis
// applies to a Lua number or of '%.0f' (docs/adr/0020-redis-functions.md).
// admitScript calls it on KEYS and ARGV; package meterstore's library
// on the part of its call that holds an Admission's Keys and Args.
const AdmitLua = intLua + `
local function admit(K, A, ko, ao, n, v, vo)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local out = {1, now}
  if not v then
    v, vo = n > 0 and redis.call('MGET', unpack(K, ko + 1, ko + n)) or {}, 0
  end
  local cost = {}
  for i = 1, n do
    -- MGET reads a key of another type as missing: GET makes that the
    -- WRONGTYPE error it is (a missing cell costs the second call).
    local tat = tonumber(v[vo + i] or redis.call('GET', K[ko + i])) or now
    if tat < now then tat = now end
    out[i + 2] = tat
    cost[i] = tonumber(A[ao + 2 * i - 1])
    if tat + cost[i] - now > tonumber(A[ao + 2 * i]) then out[1] = 0 end
  end
  if out[1] == 1 then
    for i = 1, n do
      if cost[i] > 0 then
        local tat = out[i + 2] + cost[i]
        redis.call('SET', K[ko + i], int(tat), 'PX', int(math.floor((tat - now) / 1000) + 1000))
      end
    end
  end
  return out
end
`

var admitScript = rueidis.NewLuaScript(AdmitLua + "return admit(KEYS, ARGV, 0, 0, #KEYS)\n")

// AdjustLua defines the Lua function adjust(K, A, ko, ao, n, v, vo), which
// moves the TATs of n token cells:
//
//	K[ko+i]   a token cell
//	A[ao+i]   how far to move its TAT, µs: positive is debt, negative a
//	          give-back, which stops at now (a full cell, deleted)
//	v[vo+i]   the cell's value, when the caller read it (as in admit);
//	          v nil: adjust reads it
//
// It returns n. Numbers are written as in AdmitLua
// (it needs AdmitLua's int defined before it). adjustScript calls it on
// KEYS and ARGV; package meterstore on an Adjustment's Keys and Args.
const AdjustLua = `
local function adjust(K, A, ko, ao, n, v, vo)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  for i = 1, n do
    local shift = tonumber(A[ao + i])
    -- As in admit: a value the caller read, else (missing, or of another
    -- type) GET.
    local old = tonumber(v and v[vo + i] or redis.call('GET', K[ko + i]))
    if old or shift > 0 then
      local tat = old or now
      if tat < now then tat = now end
      tat = tat + shift
      if tat > now then
        redis.call('SET', K[ko + i], int(tat), 'PX', int(math.floor((tat - now) / 1000) + 1000))
      else
        redis.call('DEL', K[ko + i])
      end
    end
  end
  return n
end
`

var adjustScript = rueidis.NewLuaScript(intLua + AdjustLua + "return adjust(KEYS, ARGV, 0, 0, #KEYS)\n")

// intLua defines int(x), x formatted as a whole number (see AdmitLua).
const intLua = `
local function int(x) return string.format('%d', x) end
`

// redisCall is the reusable memory of one script call.
type redisCall struct {
	plan plan
	adm  Admission // the call as an Admission or an Adjustment
	adj  Adjustment
	buf  []byte
	keys []string // into one string made from buf
	args []string
}

// prepare sets c.keys to the keys of c.plan's cells and c.args to their
// costs, followed by their tolerances when withTol (the admit script). It
// allocates one string for all of them.
func (c *redisCall) prepare(prefix, tenant string, limits []Limit, withTol bool) {
	p := &c.plan
	b := appendHead(c.buf[:0], prefix, tenant)
	head := len(b)
	var ends [3 * 2 * MaxLimits]int
	e := 0
	for i := range p.n {
		if i > 0 {
			b = append(b, b[:head]...)
		}
		b = appendSuffix(b, limits[p.cells[i].limit].Key, p.cells[i].tokens)
		ends[e] = len(b)
		e++
	}
	for i := range p.n {
		b = strconv.AppendInt(b, p.cells[i].cost, 10)
		ends[e] = len(b)
		e++
		if withTol {
			b = strconv.AppendInt(b, p.cells[i].tol, 10)
			ends[e] = len(b)
			e++
		}
	}
	s := string(b)
	c.buf = b
	start := 0
	for i := range e {
		if i < p.n {
			c.keys = append(c.keys, s[start:ends[i]])
		} else {
			c.args = append(c.args, s[start:ends[i]])
		}
		start = ends[i]
	}
}

// appendHead appends "<prefix>{<tenant tag>}:", the start every key of the
// tenant shares.
func appendHead(b []byte, prefix, tenant string) []byte {
	b = append(b, prefix...)
	b = append(b, '{')
	b = appendTenantTag(b, tenant)
	return append(b, '}', ':')
}

// appendTenantTag appends tenant, or '#' and its hex SHA-256 when it
// contains a brace (which would end or split the hash tag) or starts with
// '#' (so no tenant id can pass for another one's hash).
func appendTenantTag(b []byte, tenant string) []byte {
	if !strings.HasPrefix(tenant, "#") && !strings.ContainsAny(tenant, "{}") {
		return append(b, tenant...)
	}
	sum := sha256.Sum256([]byte(tenant))
	b = append(b, '#')
	return hex.AppendEncode(b, sum[:])
}

// appendSuffix appends "<limit key>:r" or "<limit key>:t".
func appendSuffix(b []byte, key string, tokens bool) []byte {
	b = append(b, key...)
	if tokens {
		return append(b, ':', 't')
	}
	return append(b, ':', 'r')
}

// readAdmit reads the admit script's reply into p's cells and returns the
// server's now (µs) and whether the admission was allowed.
func (p *plan) readAdmit(msg rueidis.RedisMessage) (now int64, allowed bool, err error) {
	vals, err := msg.ToArray()
	if err != nil {
		return 0, false, err
	}
	if len(vals) != p.n+2 {
		return 0, false, fmt.Errorf("admit script returned %d values, want %d", len(vals), p.n+2)
	}
	ok, err := vals[0].AsInt64()
	if err != nil {
		return 0, false, fmt.Errorf("admit script reply: %w", err)
	}
	if now, err = vals[1].AsInt64(); err != nil {
		return 0, false, fmt.Errorf("admit script reply: %w", err)
	}
	for i := range p.n {
		tat, err := vals[i+2].AsInt64()
		if err != nil {
			return 0, false, fmt.Errorf("admit script reply: %w", err)
		}
		p.cells[i].tat = max(tat, now)
	}
	return now, ok == 1, nil
}

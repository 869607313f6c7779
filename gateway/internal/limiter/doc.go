// Package limiter is the gateway's rate limiter: requests per minute (RPM)
// and tokens per minute (TPM) per limit key of a tenant, shared by all
// gateway replicas through Redis ([Redis]), or kept in process ([Memory]).
//
// # Algorithm
//
// Every limit is one or two GCRA cells (generic cell rate algorithm, the
// "virtual scheduling" form of a leaky bucket). A cell stores one number,
// the theoretical arrival time (TAT): the time at which the cell would be
// empty again. An admission with cost c is allowed iff
//
//	max(TAT, now) + c − now ≤ τ
//
// and, when allowed, sets TAT to max(TAT, now) + c. All times are integer
// microseconds.
//
//   - Requests: c = T = ⌈60s / RPM⌉ (the emission interval) and τ = RPM × T,
//     which is 60s when T divides a minute exactly. A fresh cell admits
//     exactly RPM requests at once, then one every T. Rounding T up, not
//     down, keeps the long-run rate at or below RPM.
//   - Tokens: c = ⌈n × 60s / TPM⌉ for n tokens and τ = 60s, so a fresh cell
//     admits TPM tokens at once and refills at TPM per minute. A request
//     whose estimate alone exceeds TPM can never be admitted (RetryAfter is
//     a minute). Adjust moves the TAT by the actual minus the estimated
//     tokens: a give-back never moves it below now, a debt may move it past
//     now + 60s, so later requests wait until it is paid off.
//
// A request names up to [MaxLimits] limits (the tenant, its key, the key's
// model, ...). All cells are checked first and charged only if every one
// admits, so a rejection by one limit charges none. Remaining is
// ⌊(τ − (TAT − now)) / c₁⌋ clipped to [0, limit] (c₁ the cost of one
// request or token), and Reset is TAT − now, the time until the cell is
// full again; a Decision reports the cell with the least remaining.
//
// # Redis layout
//
// Each cell is a string key holding its TAT in microseconds of the Redis
// server's clock (TIME), so replicas with skewed clocks agree:
//
//	<prefix>{<tenant>}:<limit key>:r   requests
//	<prefix>{<tenant>}:<limit key>:t   tokens
//
// The prefix defaults to "tollgate:rl:". The braces make the tenant the
// hash tag, so every key of one request lives in one Redis Cluster slot and
// one script can touch them all. A tenant id that contains a brace or
// starts with '#' is replaced by '#' and the hex SHA-256 of the id, which
// no other tenant id can collide with. Each key expires (PX) when its TAT
// is a second in the past: an idle limit is a missing key, and a missing
// key is a full cell.
//
// An admission is one EVALSHA of a Lua script that reads the clock, checks
// every cell and charges them all or none; Redis runs scripts atomically and
// replicates their effects (Redis ≥ 5, so TIME is allowed before writes).
// After NOSCRIPT (a SCRIPT FLUSH, a restarted server) rueidis sends EVAL
// once, which loads the script again. An adjustment is one EVALSHA of a
// second script, and none when there is nothing to move. Both scripts are
// Lua functions over key and argument slices ([AdmitLua], [AdjustLua]),
// so that package meterstore can run a request's admission with its budget
// hold, and its adjustment with its budget settle, in one call of a Redis
// function ([Redis.PrepareAdmit], [Redis.PrepareAdjust]).
//
// # When Redis fails
//
// Each request chooses: [FailClosed] returns an error wrapping
// [ErrUnavailable]; [FailOpen] decides with an in-process [Memory] in which
// every limit is divided (rounded up) by the number of live replicas — the
// count of the last fleet heartbeat that reached Redis (RedisOptions.Fleet,
// package fleet), frozen while Redis is away — or by the request's Replicas
// when that is larger, so the fleet as a whole stays near the configured
// limit (docs/adr/0024-live-replica-count.md states the bound). The fallback's state
// is separate from Redis: it starts full when Redis goes away and is left
// behind when Redis comes back. A reply error (wrong type, a script bug) is
// returned to the caller in both modes, never admitted silently.
package limiter

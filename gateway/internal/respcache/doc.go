// Package respcache is the gateway's exact-match response cache: the key of
// a request, the stored form of a reply, the conversions between a stream
// and a whole reply, and the two-level store (in-process ristretto in front
// of Redis) with per-replica coalescing of concurrent misses.
//
// # Key
//
// Key hashes (SHA-256, lowercase hex) a version tag, the scope and the
// endpoint each preceded by its length as a uvarint, then the canonical form
// of the JSON body: the top-level fields that do not change the reply
// removed ("stream", "stream_options", "user", "metadata", "store",
// "safety_identifier", "prompt_cache_key", "service_tier"), object members
// ordered by key at every depth, no insignificant whitespace, strings
// re-encoded (only '"', '\\' and control characters escaped, as \u00xx for
// controls), numbers written as their exact decimal value ("0" for every
// zero, else sign, significant digits without leading or trailing zeros,
// 'e', exponent: 1, 1.0, 10e-1 are one value; a 20-digit seed keeps every
// digit). A body that is not one JSON object, has a duplicate key, invalid
// UTF-8 or an unpaired surrogate, nests deeper than MaxDepth, has a number
// exponent of more than 15 digits or is over MaxBodyBytes is refused with
// ErrUncacheable.
//
// # Invariants
//
//   - A tenant's entry is only found under its scope. The scope is in the
//     hashed form with its length before it, and so is the endpoint, so no
//     two (scope, endpoint, body) triples that differ share a hashed form:
//     the form is parsed back unambiguously (a length, then that many
//     bytes), and the canonical body is an injective function of the
//     body's JSON value. Finding another tenant's entry takes a SHA-256
//     collision.
//   - Equal requests share a key: the canonical form depends only on the
//     JSON value (member order, whitespace, escapes, the spelling of a
//     number and the removed fields do not enter it).
//   - No expired entry is served. Every entry carries its expiry: the
//     in-process item holds it in nanoseconds by Config.Now, the Redis
//     value in its first 8 bytes as Unix milliseconds rounded down (never
//     later than the true expiry). Get compares with the clock before it
//     returns either (after the Redis round trip), so an entry neither
//     layer has evicted yet is still refused; Redis's own PX and
//     ristretto's TTL only free the memory.
//   - Redis down never fails a request: a Redis error or timeout
//     (Config.Timeout per command) in Get is a miss with an error for the
//     caller to count, in Put an error after the in-process layer has
//     stored the entry. The in-process layer keeps serving.
//   - A Put is visible to the next Get on the same replica (unless 256
//     Puts or LocalMaxBytes/8 of entries come in between): Put keeps the
//     entry in a small map of the latest Puts, which Get reads before
//     ristretto (whose Sets of new keys its own goroutine applies later,
//     in order; Put does not wait for them). (The in-process layer thus
//     holds up to LocalMaxBytes plus that map.)
//   - Flights never leak and no I/O runs under a lock: the flight map's
//     mutex is held only for the map operation; the leader's Done (once)
//     removes its entry and then releases the followers.
//
// Entries returned by Get are shared with the cache: their slices must not
// be written to. Unmarshal's result aliases its input.
package respcache

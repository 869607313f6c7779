// Package pg is the Postgres implementation of tenant.Store, plus the admin
// writes (plans, tenants, keys, prices), the schema migrations (Migrate) and
// the cache-eviction listener (Listen).
//
// # Reads
//
// KeyByHash reads a key, its tenant and the tenant's plan with one statement
// and returns an immutable tenant.Snapshot that carries the statuses and
// expiry as stored: the caller decides usability (Snapshot.Usable). Reads on
// the request path go through the tenant cache, never straight to a Store.
//
// # Writes
//
// Every admin write runs in its own transaction, which also records it in
// admin_audit (actor from WithActor, the row's JSON images before and after,
// hashes left out). Errors wrap
// tenant.ErrNotFound (unknown row, or a reference to one), ErrExists
// (duplicate id) or ErrInvalid (a value the schema rejects), so the admin
// API can map them to 404, 409 and 400 with errors.Is.
//
// API keys are "tg_" followed by 43 base62 characters (32 random bytes from
// crypto/rand). Only their SHA-256 (tenant.HashKey) and a display prefix
// ("tg_" and the next 8 characters) are stored; CreateKey returns the key
// once.
//
// # Eviction notifications
//
// Triggers (migrations/00005_evict_notify.sql) send a notification on
// channel EvictChannel ("tollgate_evict") for every committed write to plans,
// tenants, api_keys or model_prices, whoever the writer is: this package, the
// admin API, psql. The payload is "<kind>:<value>", split at the first colon;
// the value is the rest, verbatim:
//
//	key:<hash>     an api_keys row; <hash> is the lowercase hex SHA-256 of the key
//	               (64 characters), as in hex.EncodeToString(tenant.KeyHash[:])
//	tenant:<id>    a tenants row; evict every snapshot of that tenant
//	plan:<id>      a plans row; evict every snapshot whose tenant is on that plan
//	price:<model>  a model_prices row of that model
//	all            evict everything (PayloadAll)
//
// An UPDATE that changes the identifying column notifies both the old and the
// new value. "all" is sent on TRUNCATE of one of the tables, and by Listen
// itself after each (re)connection, because notifications sent while no
// listener was connected are lost. A consumer must treat any payload it does
// not understand as "all". ParseEviction splits a payload.
//
// # Call log partitions
//
// call_log is partitioned by month. The migration creates the current and the
// next month; Migrate ensures both again on every run, and a long-running
// gateway calls EnsureCallLogPartition ahead of each month (a daily call for
// "now + 1 month" is enough).
package pg

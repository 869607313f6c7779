// Package alerts turns budget threshold crossings into signed webhook
// deliveries through a durable outbox.
//
// A Dispatcher is the budget host's alert sink. Crossed and Exhausted turn
// each budget.Crossing (or refusal of an exhausted budget, which counts as
// reaching 100%) into an Alert and put it on a bounded in-process queue;
// they never wait for the outbox while the queue has room, and wait for
// room when it has none (back-pressure: an alert is never dropped, at worst
// the settle that found it waits). One goroutine moves queued alerts into
// the Outbox: Postgres (table budget_alerts, migration 00010) where a
// unique key per tenant, scope, period and threshold makes a repeat a
// no-op; or, with the memory store, a bounded in-memory outbox that does
// not survive a restart.
//
// The delivery worker, one per gateway, claims due rows (FOR UPDATE SKIP
// LOCKED with a lease, so gateways share the work and a dead one's rows
// return), POSTs each as JSON to the webhook with an HMAC-SHA256 signature
// (Tollgate-Signature: t=<unix seconds>,v1=<hex HMAC of "<t>.<body>">),
// and marks it delivered only after a 2xx: delivery is at least once, and
// receivers deduplicate by the alert's id, which is the same on every
// attempt. Failures are retried with exponential backoff and full jitter
// until the alert is older than the configured max age, then given up
// (counted and logged). The webhook secret is never logged.
//
// Why an outbox, at least once and a lease: docs/adr/0015-budget-alert-outbox.md.
package alerts

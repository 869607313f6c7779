// Package hostsvc holds the host services plugins reach through the ABI's
// `call` (sdk/ABI.md, "Services"): tenant.resolve, ratelimit.admit,
// budget.reserve and budget.extend.
//
// Each service is a typed value (Tenants, RateLimits, Budget) that a Set
// registers under its ABI name. A request's Session binds a Set to the
// request's own meter — what it charged and holds, settled when the
// request ends — and is the wasmhost.Services the plugin host calls, so a
// service reaches its request's state through a typed value, never
// through an untyped owner field. Plugins say what to limit and hold; the
// services do the mechanics natively (reading the tenant's limits,
// formatting the x-ratelimit-* headers, pricing tokens, settling with the
// real usage), so a guest callback stays a few microseconds of Go-in-Wasm.
//
// The Session is also the pipeline's wasmhost.BatchDispatcher: when the
// rate-limit and budget plugins defer their dispatched calls, StartBatch
// serves the admission and then, if admitted, the hold together — one
// Redis script call (package meterstore) — and Settle makes the token
// correction and the budget settle in one more.
package hostsvc

// Package sdk is the Go guest SDK for Tollgate plugins: WebAssembly modules
// that the gateway runs at fixed points of every request (phases) to
// inspect, change, hold back or reject it. The SDK implements the guest side
// of the plugin ABI (sdk/ABI.md): it declares every export the ABI names,
// hides the host's buffer protocol behind typed accessors, and dispatches
// each callback to the handler the plugin registered.
//
// # A complete plugin
//
//	package main
//
//	import (
//		"strings"
//
//		"github.com/tollgate/tollgate/sdk"
//	)
//
//	func main() {} // required, but never run: see "Registering handlers"
//
//	func init() {
//		sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
//			if strings.HasPrefix(r.Model(), "o1") && !r.Stream() {
//				return r.Reject(400, "invalid_request_error", "stream_required",
//					"This gateway serves o1 models only as streams.")
//			}
//			r.SetResponseHeader("X-Checked-By", "example")
//			return sdk.Continue
//		})
//	}
//
// Build it with the standard Go toolchain (Go 1.24 or later; TinyGo is not
// needed):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// -buildmode=c-shared is required: it makes a WASI reactor, whose
// _initialize export sets up the Go runtime and returns, so that the host
// can then call the plugin's exports again and again. A plain build makes a
// command whose runtime exits when main returns.
//
// # Registering handlers
//
// With -buildmode=c-shared, _initialize runs the package init functions but
// never main (the Go runtime documents this for c-archive and c-shared, and
// the SDK's tests with a wazero host confirm it for wasip1). Register the
// handlers ([OnConfigure], [OnRequest], [OnResponseHeaders], [OnChunk],
// [OnEnd]) from an init function; handlers registered in main are never
// registered, and the plugin reports that it takes part in no phase.
//
// The SDK exports every callback. Its tollgate_phases export reports the
// phases that have a handler when the host asks, and the host calls only
// those. The gateway creates each instance by running _initialize and then
// on_configure, and reads tollgate_abi_version (this SDK returns
// [ABIVersion]) and tollgate_phases from its first instance after
// on_configure. So a plugin may also register phase handlers from its
// OnConfigure handler, depending on its configuration; every instance gets
// the same configuration and must end up with the same phases.
//
// # Callbacks and their data
//
// Each phase handler gets a view of the request being served: [*Request],
// [*Response], [*Chunk] or [*End]. All embed [Exchange], which reads what
// every phase may read (model, body, tenant, facts, this plugin's state).
// A view is valid only during the callback it was passed to.
//
// A plugin runs as a pool of instances. Two callbacks of one request may run
// on different instances, and one instance serves many requests, one
// callback at a time. Keep nothing about a request in globals between
// callbacks: use [Exchange.SetState] for this plugin's own per-request data
// and [Exchange.SetFact] for data other plugins read. Globals are for what
// is the same for every request, such as the parsed configuration.
//
// # Calls that wait on the network
//
// A handler holds one of the plugin's few instances while it runs, so it
// must not wait on the network. It dispatches the call instead
// ([Dispatch], [DispatchHTTP]) and returns [Pause]; the host makes the call
// with no instance held and hands the response to the [OnCallResponse]
// handler, on whatever instance is free, whose verdict is the phase's. What
// the response handler needs from the dispatching one goes through
// [Exchange.SetState]. [Fail] leaves a call's failure to the policy's
// on_error.
//
// An on_request handler whose call only answers a question of its own (a
// rate limit's admission, a budget's hold) answers [Defer] instead of
// [Pause]: the plugins after it run their on_request while the call
// waits, and the host may start the calls of several plugins together, in
// one round trip to the store. The response handler runs later, before
// the request goes upstream; what it sets is not seen by those later
// plugins' on_request, and a request a later plugin rejects before the
// calls started never makes them.
//
// When a host service's usual answer needs nothing from the plugin (an
// admission's "allowed"), [ExpectResponse] says so as the call is
// dispatched: such an answer is consumed by the host, with no
// [OnCallResponse] callback, and only the others reach the handler.
//
// # Buffers and allocation
//
// The host never allocates in the guest: values are copied into buffers the
// SDK owns and grows to the largest value seen, retrying when the host
// reports a longer value. Methods returning string copy the value, unless
// it equals one of the last 16 short strings read, which is returned instead (no
// allocation: models, tenant fields and a client's headers repeat from
// request to request). Methods returning []byte ([Exchange.Body],
// [Exchange.State], [Chunk.Bytes]) return the SDK's buffer without
// allocating, valid until the end of the callback or the next call of the
// same method. [AppendCall] and [Request.AppendHeader] append to a buffer
// the plugin reuses; AppendHeader keeps no copy, which is how to read a
// secret such as an API key. In the chunk phase, [Chunk.Bytes] and
// [Chunk.EmitBytes] make no allocation at all in steady state.
//
// Allocation-free handlers matter most at low load: between one request
// and the next, other work evicts the plugin from the CPU's caches, and an
// allocation then runs kilobytes of the runtime's allocator from memory.
// The built-in plugins allocate nothing per request; their callbacks cost
// a third less at one request at a time than when each allocated a few
// strings (docs/BENCHMARKS.md, "Where the time goes at 1 concurrent").
//
// # Errors and failures
//
// Setters and host services return the ABI's negative result codes as
// [Error] values: [ErrAbsent], [ErrInvalid], [ErrNotAllowed] and
// [ErrUnavailable] (and, for dispatched calls, [ErrTimeout], [ErrTooLarge]
// and [ErrBusy]). Getters return the value (with a bool where it may be
// absent); each view only offers the getters the ABI allows in its phase,
// so an error there means the host broke the contract, and the SDK panics
// rather than let a guard act on text it could not read.
//
// A panic in a handler traps the instance: the host discards it and applies
// the plugin's on_error (fail_closed or fail_open). The first line Go
// prints on stderr, "panic: MESSAGE", is part of the callback's error in
// the gateway's log. Go's fatal errors (out of memory, deadlock) trap the
// same way.
//
// # Building and testing on the host
//
// The package compiles for any GOOS/GOARCH so that plugins can be built,
// vetted and unit-tested with plain go build, go vet and go test. Off
// wasip1, every call that would reach the host panics with
// "sdk: only available in a wasm plugin": keep a plugin's logic (parsing,
// matching) in plain functions and test those, and test the whole plugin
// against the gateway's plugin host.
package sdk

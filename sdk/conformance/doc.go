// Package conformance runs a built plugin module (.wasm, from any guest
// language) against the contract of sdk/ABI.md in the real plugin runtime
// and reports, check by check, what the module does that it must not:
//
//   - exports: memory, _initialize, tollgate_abi_version = 1, a
//     tollgate_phases that agrees with the exported callbacks and is the
//     same on every instance, no reserved export, and imports only the
//     host's functions (with their signatures) and WASI;
//   - configure: the given config is accepted; a config that is not JSON
//     is refused with a reason (fail) or accepted, never a trap;
//   - phases: a battery of requests and streams in every phase the module
//     takes, each answered with a verdict valid for the phase and no trap;
//   - state: the same streams give the same output on one instance, on
//     several with the callbacks spread across them, and with two requests
//     interleaved (per-request data kept in guest globals fails this);
//   - limits: instance memory after configure and over many requests,
//     and callback time against the deadline.
//
// Check also measures the module: its size, its cold compile time, its
// instance memory and the time per callback. RunCases runs the
// language-neutral test cases of a plugin folder's plugin_test.json.
package conformance

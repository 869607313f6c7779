// Command badphases is written against the ABI directly, without the
// SDK: its tollgate_phases reports the request and chunk phases, but it
// exports no on_chunk. The conformance suite's exports check must catch
// it.
package main

func main() {}

//go:wasmexport tollgate_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport tollgate_phases
func phases() int32 { return 1 | 4 }

//go:wasmexport on_request
func onRequest(ctx int32) int32 { return 0 }

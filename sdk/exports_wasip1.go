//go:build wasip1

package sdk

// The guest exports of ABI.md. The SDK exports every callback; the phases
// the plugin registered handlers for are reported by tollgate_phases, and
// the host calls only those.

//go:wasmexport tollgate_abi_version
func exportABIVersion() int32 { return ABIVersion }

//go:wasmexport tollgate_phases
func exportPhases() int32 { return int32(registeredPhases()) }

//go:wasmexport on_configure
func exportConfigure(configLen int32) int32 { return dispatchConfigure(configLen) }

//go:wasmexport on_request
func exportRequest(ctx int32) int32 { return int32(dispatchRequest(uint32(ctx))) }

//go:wasmexport on_response_headers
func exportResponseHeaders(ctx, status int32) int32 {
	return int32(dispatchResponseHeaders(uint32(ctx), status))
}

//go:wasmexport on_chunk
func exportChunk(ctx, textLen, flags int32) int32 {
	return int32(dispatchChunk(uint32(ctx), textLen, uint32(flags)))
}

//go:wasmexport on_end
func exportEnd(ctx, flags int32) int32 {
	return int32(dispatchEnd(uint32(ctx), uint32(flags)))
}

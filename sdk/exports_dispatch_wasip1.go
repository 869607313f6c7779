//go:build wasip1

package sdk

//go:wasmexport on_call_response
func exportCallResponse(ctx, call, status, bodyLen, phase, flags int32) int32 {
	return int32(dispatchCallResponse(uint32(ctx), call, status, bodyLen, Phases(phase), uint32(flags)))
}

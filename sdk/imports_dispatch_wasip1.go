//go:build wasip1

package sdk

import "unsafe"

// The imports of dispatched calls (ABI.md, "Dispatched calls").

//go:wasmimport tollgate dispatch
func tgDispatch(service string, req string) int32

//go:wasmimport tollgate expect_response
func tgExpectResponse(call int32, prefix string) int32

//go:wasmimport tollgate call_response
func tgCallResponse(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate call_response_header
func tgCallResponseHeader(name string, buf unsafe.Pointer, cap uint32) int32

func hostDispatch(service string, req []byte) int32      { return tgDispatch(service, str(req)) }
func hostExpectResponse(call int32, prefix string) int32 { return tgExpectResponse(call, prefix) }
func hostCallResponse(buf []byte) int32                  { return tgCallResponse(ptr(buf), uint32(len(buf))) }
func hostCallResponseHeader(name string, buf []byte) int32 {
	return tgCallResponseHeader(name, ptr(buf), uint32(len(buf)))
}

//go:build wasip1

package sdk

import "unsafe"

// The host imports of ABI.md, module "tollgate". A Go string parameter is
// passed as two i32s, (ptr, len); a buffer as (unsafe.Pointer, uint32).

//go:wasmimport tollgate log
func tgLog(level int32, msg string)

//go:wasmimport tollgate config
func tgConfig(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate fail
func tgFail(msg string)

//go:wasmimport tollgate request_header
func tgRequestHeader(name string, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate set_request_header
func tgSetRequestHeader(name, value string) int32

//go:wasmimport tollgate response_header
func tgResponseHeader(name string, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate set_response_header
func tgSetResponseHeader(name, value string) int32

//go:wasmimport tollgate request_field
func tgRequestField(field int32, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate request_int
func tgRequestInt(field int32) int64

//go:wasmimport tollgate tenant_field
func tgTenantField(field int32, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate tenant_int
func tgTenantInt(field int32) int64

//go:wasmimport tollgate fact
func tgFact(key string, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate set_fact
func tgSetFact(key, value string) int32

//go:wasmimport tollgate state_get
func tgStateGet(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate state_set
func tgStateSet(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport tollgate chunk_text
func tgChunkText(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate chunk_tool_calls
func tgChunkToolCalls(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate request_messages
func tgRequestMessages(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate emit
func tgEmit(text string) int32

//go:wasmimport tollgate set_finish_reason
func tgSetFinishReason(reason string) int32

//go:wasmimport tollgate reject
func tgReject(status int32, typ, code, msg string) int32

//go:wasmimport tollgate respond
func tgRespond(status int32, body unsafe.Pointer, n uint32) int32

//go:wasmimport tollgate respond_event
func tgRespondEvent(data unsafe.Pointer, n uint32) int32

//go:wasmimport tollgate usage
func tgUsage(field int32) int64

//go:wasmimport tollgate metric_add
func tgMetricAdd(name string, value int64) int32

//go:wasmimport tollgate call
func tgCall(service string, req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate call_result
func tgCallResult(buf unsafe.Pointer, cap uint32) int32

//go:wasmimport tollgate skip_phases
func tgSkipPhases(mask uint32) int32

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// str views b as a string for an import that only reads it.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func hostLog(level int32, msg string)            { tgLog(level, msg) }
func hostConfig(buf []byte) int32                { return tgConfig(ptr(buf), uint32(len(buf))) }
func hostFail(msg string)                        { tgFail(msg) }
func hostSetRequestHeader(name, v string) int32  { return tgSetRequestHeader(name, v) }
func hostSetResponseHeader(name, v string) int32 { return tgSetResponseHeader(name, v) }
func hostRequestInt(field int32) int64           { return tgRequestInt(field) }
func hostTenantInt(field int32) int64            { return tgTenantInt(field) }
func hostSetFact(key, v string) int32            { return tgSetFact(key, v) }
func hostStateGet(buf []byte) int32              { return tgStateGet(ptr(buf), uint32(len(buf))) }
func hostStateSet(b []byte) int32                { return tgStateSet(ptr(b), uint32(len(b))) }
func hostChunkText(buf []byte) int32             { return tgChunkText(ptr(buf), uint32(len(buf))) }
func hostEmit(text string) int32                 { return tgEmit(text) }
func hostEmitBytes(b []byte) int32               { return tgEmit(str(b)) }
func hostSetFinishReason(reason string) int32    { return tgSetFinishReason(reason) }
func hostUsage(field int32) int64                { return tgUsage(field) }
func hostMetricAdd(name string, v int64) int32   { return tgMetricAdd(name, v) }
func hostCallResult(buf []byte) int32            { return tgCallResult(ptr(buf), uint32(len(buf))) }
func hostSkipPhases(mask uint32) int32           { return tgSkipPhases(mask) }

func hostRequestHeader(name string, buf []byte) int32 {
	return tgRequestHeader(name, ptr(buf), uint32(len(buf)))
}

func hostResponseHeader(name string, buf []byte) int32 {
	return tgResponseHeader(name, ptr(buf), uint32(len(buf)))
}

func hostRequestField(field int32, buf []byte) int32 {
	return tgRequestField(field, ptr(buf), uint32(len(buf)))
}

func hostTenantField(field int32, buf []byte) int32 {
	return tgTenantField(field, ptr(buf), uint32(len(buf)))
}

func hostFact(key string, buf []byte) int32 { return tgFact(key, ptr(buf), uint32(len(buf))) }

func hostReject(status int32, typ, code, msg string) int32 { return tgReject(status, typ, code, msg) }
func hostRespond(status int32, body []byte) int32 {
	return tgRespond(status, ptr(body), uint32(len(body)))
}
func hostRespondEvent(data []byte) int32 { return tgRespondEvent(ptr(data), uint32(len(data))) }

func hostCall(service string, req, buf []byte) int32 {
	return tgCall(service, ptr(req), uint32(len(req)), ptr(buf), uint32(len(buf)))
}

func hostChunkToolCalls(buf []byte) int32 {
	return tgChunkToolCalls(ptr(buf), uint32(len(buf)))
}

func hostRequestMessages(buf []byte) int32 {
	return tgRequestMessages(ptr(buf), uint32(len(buf)))
}

//go:build !wasip1

package sdk

import "unsafe"

// On a non-wasm build the host imports do not exist. The package still
// compiles, so that code importing it can be built, vetted and unit-tested
// on the developer's machine, but every call that would reach the host
// panics, unless this package's own tests installed a fake host.

// hostAPI is the host as this package's tests fake it.
type hostAPI interface {
	log(level int32, msg string)
	config(buf []byte) int32
	fail(msg string)
	requestHeader(name string, buf []byte) int32
	setRequestHeader(name, value string) int32
	responseHeader(name string, buf []byte) int32
	setResponseHeader(name, value string) int32
	requestField(field int32, buf []byte) int32
	requestInt(field int32) int64
	tenantField(field int32, buf []byte) int32
	tenantInt(field int32) int64
	fact(key string, buf []byte) int32
	setFact(key, value string) int32
	stateGet(buf []byte) int32
	stateSet(b []byte) int32
	chunkText(buf []byte) int32
	chunkToolCalls(buf []byte) int32
	requestMessages(buf []byte) int32
	emit(text string) int32
	setFinishReason(reason string) int32
	reject(status int32, typ, code, msg string) int32
	respond(status int32, body []byte) int32
	respondEvent(data []byte) int32
	usage(field int32) int64
	metricAdd(name string, v int64) int32
	call(service string, req, buf []byte) int32
	callResult(buf []byte) int32
	skipPhases(mask uint32) int32
}

// testHost is set by this package's tests; nil everywhere else.
var testHost hostAPI

func host() hostAPI {
	if testHost == nil {
		panic("sdk: only available in a wasm plugin")
	}
	return testHost
}

func hostLog(level int32, msg string)                 { host().log(level, msg) }
func hostConfig(buf []byte) int32                     { return host().config(buf) }
func hostFail(msg string)                             { host().fail(msg) }
func hostRequestHeader(name string, buf []byte) int32 { return host().requestHeader(name, buf) }
func hostSetRequestHeader(name, v string) int32       { return host().setRequestHeader(name, v) }
func hostResponseHeader(name string, buf []byte) int32 {
	return host().responseHeader(name, buf)
}
func hostSetResponseHeader(name, v string) int32     { return host().setResponseHeader(name, v) }
func hostRequestField(field int32, buf []byte) int32 { return host().requestField(field, buf) }
func hostRequestInt(field int32) int64               { return host().requestInt(field) }
func hostTenantField(field int32, buf []byte) int32  { return host().tenantField(field, buf) }
func hostTenantInt(field int32) int64                { return host().tenantInt(field) }
func hostFact(key string, buf []byte) int32          { return host().fact(key, buf) }
func hostSetFact(key, v string) int32                { return host().setFact(key, v) }
func hostStateGet(buf []byte) int32                  { return host().stateGet(buf) }
func hostStateSet(b []byte) int32                    { return host().stateSet(b) }
func hostChunkText(buf []byte) int32                 { return host().chunkText(buf) }
func hostEmit(text string) int32                     { return host().emit(text) }
func hostChunkToolCalls(buf []byte) int32            { return host().chunkToolCalls(buf) }
func hostRequestMessages(buf []byte) int32           { return host().requestMessages(buf) }
func hostEmitBytes(b []byte) int32 {
	return host().emit(unsafe.String(unsafe.SliceData(b), len(b)))
}
func hostSetFinishReason(reason string) int32        { return host().setFinishReason(reason) }
func hostUsage(field int32) int64                    { return host().usage(field) }
func hostMetricAdd(name string, v int64) int32       { return host().metricAdd(name, v) }
func hostCallResult(buf []byte) int32                { return host().callResult(buf) }
func hostSkipPhases(mask uint32) int32               { return host().skipPhases(mask) }
func hostCall(service string, req, buf []byte) int32 { return host().call(service, req, buf) }
func hostReject(status int32, typ, code, msg string) int32 {
	return host().reject(status, typ, code, msg)
}
func hostRespond(status int32, body []byte) int32 { return host().respond(status, body) }
func hostRespondEvent(data []byte) int32          { return host().respondEvent(data) }

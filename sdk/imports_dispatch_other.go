//go:build !wasip1

package sdk

// dispatchHostAPI is the fake host of this package's tests for the
// imports of dispatched calls (a separate interface, so that a fake host
// without them still installs).
type dispatchHostAPI interface {
	dispatch(service string, req []byte) int32
	expectResponse(call int32, prefix string) int32
	callResponse(buf []byte) int32
	callResponseHeader(name string, buf []byte) int32
}

func dispatchHost() dispatchHostAPI {
	d, ok := host().(dispatchHostAPI)
	if !ok {
		panic("sdk: the fake host has no dispatched calls")
	}
	return d
}

func hostDispatch(service string, req []byte) int32 { return dispatchHost().dispatch(service, req) }
func hostExpectResponse(call int32, prefix string) int32 {
	return dispatchHost().expectResponse(call, prefix)
}
func hostCallResponse(buf []byte) int32 { return dispatchHost().callResponse(buf) }
func hostCallResponseHeader(name string, buf []byte) int32 {
	return dispatchHost().callResponseHeader(name, buf)
}

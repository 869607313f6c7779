//go:build wasip1

package main

// Raw imports with plain integer pointers, so the plugin can pass a range
// far outside its memory. The host must trap the guest, not read or write.

//go:wasmimport tollgate log
func rawLog(level int32, ptr, n uint32)

//go:wasmimport tollgate request_field
func rawRequestField(field int32, buf, cap uint32) int32

//go:wasmimport tollgate request_messages
func rawRequestMessages(buf, cap uint32) int32

// messagesCode is request_messages' result for an empty buffer, as
// configure sees it.
func messagesCode() int32 { return rawRequestMessages(0, 0) }

// wildPtr is near the top of the 32-bit space, so that ptr+len wraps
// around in 32-bit arithmetic: a host that adds in 32 bits would see the
// small range [0xF00, ...) and pass the check.
const wildPtr, wildLen = 0xFFFFFF00, 4096

func wildLog()          { rawLog(1, wildPtr, wildLen) }
func wildRequestField() { rawRequestField(1, wildPtr, wildLen) }

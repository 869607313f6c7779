package sdk

import "strconv"

// Log writes a line to the gateway's log with the plugin's name and the
// current phase. The host keeps at most 4 KiB of a line. Log does not
// allocate. It may be called from on_configure and from every phase, but
// not from package initialization (init functions), which runs before the
// host has an instance to log for.
func Log(level Level, msg string) { hostLog(int32(level), msg) }

// Logf is [Log] with printf-style formatting. So that the SDK does not link
// package fmt (about 400 KB of wasm, and its initialization in every
// instance), it understands a subset of fmt's verbs: %v, %s, %d, %q, %x, %t
// and %%, without flags, width or precision, for strings, byte slices,
// errors, fmt.Stringers, booleans, integers and floats; anything else is
// written as %!v(unsupported). Plugins that use fmt anyway can write
// Log(level, fmt.Sprintf(...)). Logf allocates; Log does not.
func Logf(level Level, format string, args ...any) {
	hostLog(int32(level), string(appendf(nil, format, args)))
}

// MetricAdd adds v to the plugin's counter name, exported by the gateway
// as tollgate_plugin_events_total{plugin="…",name="…"}. Names are
// [a-z0-9_]{1,64} and a plugin may use at most 32; otherwise it returns
// [ErrInvalid].
func MetricAdd(name string, v int64) error { return status(hostMetricAdd(name, v)) }

// Call calls the host service named service with a JSON request and returns
// its JSON result. It returns [ErrUnavailable] when the host does not serve
// that name or the service is down. The result belongs to the caller.
// Services are documented with the built-in plugins that use them.
func Call(service string, req []byte) ([]byte, error) {
	return AppendCall(nil, service, req)
}

// AppendCall is [Call] appending the result to dst, for a hot path that
// reuses one buffer: once dst's capacity holds the longest result, a call
// allocates nothing. The host writes the result straight into dst's spare
// capacity.
func AppendCall(dst []byte, service string, req []byte) ([]byte, error) {
	if cap(dst)-len(dst) < firstBuffer {
		dst = grow(dst, 4<<10) // room for the usual result: one host call
	}
	n := hostCall(service, req, dst[len(dst):cap(dst)])
	if n < 0 {
		return dst, status(n)
	}
	if int(n) <= cap(dst)-len(dst) {
		return dst[:len(dst)+int(n)], nil
	}
	// The result did not fit: fetch it without repeating the call.
	dst, n = appendRead(grow(dst, int(n)), hostCallResult)
	return dst, status(n)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

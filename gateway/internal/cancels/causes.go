package cancels

import "errors"

// The causes a request's context is cancelled with (context.Cause), which
// decide how its reply ends.
var (
	// ErrCancelled: cancelled through POST /v1/requests/{id}/cancel (here
	// or on another replica).
	ErrCancelled = errors.New("the request was cancelled")
	// ErrClientGone: the client closed its connection.
	ErrClientGone = errors.New("client closed the connection")
	// ErrShuttingDown: the drain time after SIGTERM ran out with the
	// request still open.
	ErrShuttingDown = errors.New("the gateway is shutting down")
	// ErrPluginStopped: a plugin refused or stopped the reply, so the
	// rest of the upstream's is not wanted.
	ErrPluginStopped = errors.New("stopped by a plugin")
)

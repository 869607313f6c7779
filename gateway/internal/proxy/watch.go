package proxy

import "errors"

// ErrClientGone is the cancel cause of a request whose client closed its
// connection.
var ErrClientGone = errors.New("client closed the connection")

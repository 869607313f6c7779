package proxy

import "github.com/tollgate/tollgate/gateway/internal/cancels"

// ErrClientGone is the cancel cause of a request whose client closed its
// connection.
var ErrClientGone = cancels.ErrClientGone

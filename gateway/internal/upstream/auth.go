package upstream

import (
	"fmt"
	"time"
)

// Authorizer writes a request's credentials when they depend on the request
// or change over time: an AWS SigV4 signature over the method, host, path
// and body; an OAuth bearer token from a cache. Static keys do not need one
// (api_key_env goes into the static headers, see WithKeyHeader).
//
// AppendAuth is called every time a request is written to a connection,
// the retry on a fresh connection included, after the static and the
// request's own header lines and before Content-Length and the body. It
// appends complete header lines, each ending in CRLF, to dst and returns
// the extended slice. It must not retain r or its slices.
//
// It is called on the request's goroutine and so must not wait on the
// network while the credentials it holds are valid: tokens are cached and
// refreshed ahead of expiry in the background. Only the first fetch may
// block, bounded by the upstream's connect timeout. An error fails the
// attempt with ErrCredentials without sending anything; its message must
// name the credential source and never a secret.
type Authorizer interface {
	AppendAuth(dst []byte, r *AuthRequest) ([]byte, error)
}

// AuthRequest is the request an Authorizer signs. Its slices are valid
// during the call only.
type AuthRequest struct {
	Method string
	// Host is the Host header sent (host, with the port unless default).
	Host string
	// Path is the escaped request target as sent: the base URL's path,
	// the request's path and its query ("/v1/model/x/converse?a=b").
	Path []byte
	Body []byte
	// Now is the time the request is written.
	Now time.Time
}

// appendAuth renders the credentials of req for this attempt into
// ex.authLines (empty without an Authorizer).
func (ex *Exchange) appendAuth(req *Request) error {
	c := ex.client
	ex.authLines = ex.authLines[:0]
	if c.auth == nil {
		return nil
	}
	ar := &ex.authReq
	ex.authPath = append(append(ex.authPath[:0], c.basePath...), req.Path...)
	*ar = AuthRequest{Method: req.Method, Host: c.host, Path: ex.authPath, Body: req.Body, Now: time.Now()}
	var err error
	ex.authLines, err = c.auth.AppendAuth(ex.authLines, ar)
	*ar = AuthRequest{}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCredentials, c.name, err)
	}
	return nil
}

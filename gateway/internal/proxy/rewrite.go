package proxy

import (
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Request rewriting (sdk/ABI.md, "Request rewriting"): a plugin's
// set_message_text replaces a text in the request body during the request
// phase. The gateway then reads the new body as it read the client's (the
// request's parsed facts, which the plugins after it, the budget's hold
// and the usage estimate use), and sends it upstream in place of the
// client's: translated for an upstream of another API, with include_usage
// added, like any body. A passthrough request's JSON body (an image
// prompt, a speech input) is rewritten the same way; a form or a
// bodiless request has no texts to rewrite.

// allowRewrites lets the request's plugins rewrite its body: what they
// make is bounded like a client's body, and read again with refacts.
func (x *exchange) allowRewrites(wr *wasmhost.Request) {
	if x.refacts == nil {
		x.refacts = x.reparse
	}
	wr.Refacts = x.refacts
	if x.s != nil && x.s.srv != nil {
		wr.MaxBodyBytes = x.s.srv.MaxRequestBodySize
	}
}

// reparse re-reads the request from the body a plugin rewrote: x.req
// follows the new body (the prompt's size for the usage estimate and
// the budget's bound), and so do the facts plugins read. The body changed
// only in a string's content, so a parse that failed would be a parser
// that reads texts: the rewrite is then refused.
func (x *exchange) reparse(wr *wasmhost.Request) error {
	if err := x.parseBody(wr.Body, x.ep, &x.req); err != nil {
		return err
	}
	wr.SetFacts(pluginFacts(&x.req)) // Model borrowed from the parser, as startPlugins does
	return nil
}

// upstreamBody is the body to send upstream after the request phase: the
// one plugins rewrote, else the client's (body).
func (x *exchange) upstreamBody(body []byte) []byte {
	if x.wr != nil && x.wr.BodyRewritten() {
		return x.wr.Body
	}
	return body
}

// allowPassRewrites lets the plugins of a passthrough request with a JSON
// body rewrite its texts (an image prompt, a speech input): the facts
// plugins read of it (its model) do not depend on them.
func (x *exchange) allowPassRewrites(wr *wasmhost.Request) {
	if x.s != nil && x.s.srv != nil {
		wr.MaxBodyBytes = x.s.srv.MaxRequestBodySize
	}
}

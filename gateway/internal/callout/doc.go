// Package callout is the host's `http` service for plugins' dispatched
// calls (sdk/ABI.md, "Dispatched calls"; ADR 0016): a plugin queues an
// HTTP request in its callback, the host makes it after the callback
// returned, with no plugin instance held during the wait, and hands the
// answer to the plugin's on_call_response.
//
// What a plugin may reach is the policy's Grant for it
// (plugins[].callout): URL prefixes (package allow), a timeout, a cap on
// the response body, a cap on its calls in flight, and headers the host
// adds from the environment (credentials the plugin never sees). A plugin
// without a grant cannot call out at all.
//
// The client is net/http's, over one pooled Transport per Service, rather
// than fasthttp's, which the proxy uses for its upstreams: a call-out is
// cancelled through the call's context (the host abandons calls whose
// answer no longer matters, and a request that ends cancels its calls),
// which net/http honours at every step of the exchange while fasthttp's
// client only takes a deadline; redirects are refused through
// CheckRedirect; and call-outs are few beside the proxied traffic (one
// or two per request), so the allocations of net/http do not show.
//
// 2xx answers are cached per (plugin, key) when the request asks for it
// (its `:cache` line, with its own TTL), in a ristretto cache shared by
// the plugins of one policy state.
package callout

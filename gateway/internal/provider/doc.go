// Package provider is the contract between the proxy and the upstream APIs
// that are not OpenAI's: how a provider's package plugs in, and what the
// proxy asks of it. Why this shape: docs/adr/0010-provider-adapters.md.
//
// # Binding an upstream
//
// Each provider other than openai registers a Factory under its config name
// from an init function in its own file of this package (anthropic.go,
// azure.go, bedrock.go, gemini.go, ...):
//
//	func init() { Register(config.ProviderBedrock, newBedrock) }
//
// When a policy is loaded, the proxy calls Bind for every upstream and
// builds its upstream.Client with the Binding's options. A Binding says:
//
//   - Adapter: how a request is addressed and encoded (nil: the upstream
//     speaks OpenAI's API at OpenAI's paths, and nothing is translated);
//   - Options: upstream.WithKeyHeader for a static key in another header
//     than Authorization (x-api-key, api-key, x-goog-api-key), and
//     upstream.WithAuthorizer for per-request credentials (SigV4, OAuth
//     tokens; see upstream.Authorizer for what an authorizer must do);
//   - Close: what to stop when the policy is replaced (token refreshers);
//   - Withhold: client headers the upstream never gets, whatever
//     forward_headers says, because the adapter writes its own (Bedrock's
//     Content-Type: the client's describes the OpenAI body, not the
//     Converse body).
//
// A Factory reads only its upstream's config (validated by the provider's
// own check in package config) and must not do network I/O: credentials
// are fetched on first use.
//
// # Requests
//
// For every attempt the proxy calls Adapter.Request with the OpenAI request
// body as prepared for an OpenAI upstream (stream_options.include_usage set
// on streams, the model replaced by the upstream's id from model_ids, a
// fallback model's name in place of the client's) and the upstream's model
// id. The adapter fills the Outbound: the path relative to the base URL
// (query included, segments escaped), extra header lines, and the body in
// the provider's format (left empty: the OpenAI body goes as it is). A
// request the provider cannot express is refused with an *openai.Error
// (status 400, Param naming the parameter); the proxy then tries the
// route's other upstreams and answers with that error when none can take
// the request. Endpoints the adapter does not Serve never reach it.
//
// An adapter whose upstream has OpenAI's Responses API (Azure on its v1 and
// preview api-versions) Serves openai.Responses: a POST /v1/responses then
// reaches Request as it is, to be addressed, and its reply passes back
// unchanged; one that also implements ResponseStore addresses the stored
// responses (GET and DELETE /v1/responses/{id}). An adapter that serves
// chat but not the Responses API gets a Responses request as a chat
// request (package responses translates both ways).
//
// # Replies
//
// An adapter whose upstream replies in OpenAI's format (Azure) stops there.
// One that translates replies also implements Translator:
//
//   - IsStream tells a streamed 2xx reply from a whole one by its status
//     and Content-Type (SSE for most; application/vnd.amazon.eventstream
//     for Bedrock);
//   - Reply turns a whole reply (its status, header fields and body) into
//     the OpenAI body and status the client gets: a chat.completion for a
//     2xx, an OpenAI error otherwise (status kept, or the one the
//     provider's error type calls for: Bedrock names it in a header); an
//     error return is the gateway's (502 for a reply it cannot read);
//   - NewStream returns a Stream, pooled per adapter by the proxy: Reset
//     points it at the upstream's body, and reading it yields exactly the
//     chat.completion.chunk SSE an OpenAI upstream would have sent (the
//     usage chunk when includeUsage, then data: [DONE]), so the guards,
//     the chunk phase and the accounting run on it unchanged. A body that
//     ends before the provider's terminal event is io.ErrUnexpectedEOF.
//
// The model passed to Reply and Stream.Reset is the name the client used
// (or the fallback model that served), so the client sees its own model
// name back; created is the reply's Unix time.
//
// Anthropic's native POST /v1/messages is not part of this contract: its
// body and events pass through, and the proxy handles it for the anthropic
// provider only.
package provider

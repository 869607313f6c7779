// Package openai holds the OpenAI wire types the gateway proxies: the error
// body it answers with (Error), the facts it reads from request bodies
// (RequestParser, Request), the include_usage rewrite it applies to
// streaming requests (AppendWithIncludeUsage), and the streamed chunks it
// inspects (ChunkParser, Chunk).
//
// Everything here sits on the hot path and is built to be reused: parsers
// keep their memory across calls and do not allocate in steady state, and
// the byte slices they hand out borrow from the parser (each type documents
// how long they stay valid). Parsers are not safe for concurrent use; pool
// them.
package openai

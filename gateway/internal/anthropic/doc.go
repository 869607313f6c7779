// Package anthropic translates between the OpenAI chat.completions surface
// the gateway serves and Anthropic's Messages API (POST /v1/messages,
// anthropic-version 2023-06-01), and reads native Messages API streams for
// accounting when requests pass through untranslated.
//
//   - AppendRequest: OpenAI request JSON → Anthropic request JSON.
//   - AppendResponse: Anthropic message → OpenAI chat.completion.
//   - StreamTranslator (and StreamReader, an io.Reader around it): Anthropic
//     stream events → OpenAI chat.completion.chunk events.
//   - TranslateError: Anthropic error reply → *openai.Error.
//   - EventParser, ParseStreamUsage, AppendStreamText, ResponseUsage,
//     EventName, AppendUpstreamHeaders: native pass-through helpers.
//   - RequestParser: a native request's model, stream, max_tokens and
//     prompt size, in an openai.Request.
//   - ChunkView: a native stream read event by event as the OpenAI chunks
//     a StreamTranslator would emit, for guards and accounting while the
//     client gets the upstream's bytes.
//   - AppendMessageWithText, StopReason, Append*Event, AppendError,
//     AppendErrorEvent, ErrorType: what the gateway writes itself on the
//     native endpoint (a guard's changes, its own errors).
//
// The package does no I/O of its own and depends only on openai (errors),
// sse (event splitting, in StreamReader) and fastjson.
//
// # Requests
//
//	OpenAI                                   Anthropic
//	model                                    model (as is)
//	max_completion_tokens | max_tokens       max_tokens (max_completion_tokens wins; neither → defaultMaxTokens)
//	messages[role=system|developer]          system: their text joined by "\n", hoisted from wherever they stand
//	messages[role=user] content string       {"role":"user","content":[{"type":"text","text":...}]}
//	  part {"type":"text"}                   {"type":"text","text":...} (empty text dropped)
//	  part {"type":"image_url"} data: URL    {"type":"image","source":{"type":"base64","media_type":...,"data":...}}
//	  part {"type":"image_url"} http(s) URL  {"type":"image","source":{"type":"url","url":...}}
//	messages[role=assistant] content         text blocks ("refusal" parts too)
//	  tool_calls[{id,function{name,arguments}}]  {"type":"tool_use","id","name","input":<arguments parsed>}
//	messages[role=tool]                      user turn {"type":"tool_result","tool_use_id":tool_call_id,"content":...}
//	consecutive turns of one role            merged into one turn (Anthropic requires alternation);
//	                                         in a user turn tool_result blocks come first
//	stop (string | array)                    stop_sequences (empty strings dropped)
//	temperature                              temperature, capped at 1 (as Anthropic's own OpenAI layer does)
//	top_p, top_k                             top_p, top_k
//	stream                                   stream
//	tools[{type:function,function}]          tools[{name,description,input_schema: parameters}]
//	                                         (no parameters → {"type":"object","properties":{}})
//	tool_choice "auto" | "none"              {"type":"auto"} | {"type":"none"}
//	tool_choice "required"                   {"type":"any"}
//	tool_choice {"type":"function",...}      {"type":"tool","name":...}
//	parallel_tool_calls false                tool_choice.disable_parallel_tool_use true
//	user                                     metadata.user_id
//
// Refused with a 400 invalid_request_error naming the parameter, because
// dropping them would change what the client gets: n other than 1,
// logprobs true, top_logprobs, response_format other than {"type":"text"},
// non-empty logit_bias, functions and function_call (deprecated; use
// tools), audio, modalities other than ["text"], web_search_options,
// tools of a type other than "function", tool_choice "required" or naming
// a function without tools, content parts other than text and image_url
// (input_audio, file), images in assistant, system or tool messages, role
// "function", unparseable or non-object tool call arguments, max_tokens
// below 1, and members of the wrong type or out of range (temperature
// below 0, top_p outside [0, 1], top_k below 1).
//
// Ignored (accepted, not sent): frequency_penalty, presence_penalty,
// seed, service_tier, store, metadata (OpenAI's stored-completion tags),
// stream_options (Anthropic always reports usage; the translator emits the
// usage chunk as asked), prediction, reasoning_effort, verbosity,
// prompt_cache_key, safety_identifier, the per-message "name", an image
// part's "detail", a function's "strict", and any member not named here.
//
// Differences the translation cannot hide: a trailing assistant message is
// a prefill Anthropic continues, where OpenAI would start a new message;
// system messages in the middle of a conversation move to the front;
// empty messages are dropped; tool call ids are passed as is (Anthropic
// accepts [a-zA-Z0-9_-]).
//
// Strings are re-escaped on the way out (control characters, U+2028 and
// U+2029 escaped; invalid UTF-8 becomes U+FFFD), numbers are copied as
// written, and tool call arguments are parsed and re-encoded compactly.
//
// # Non-streamed replies
//
//	Anthropic                       OpenAI chat.completion
//	content[type=text]              choices[0].message.content (concatenated; null if only tool calls)
//	content[type=tool_use]          choices[0].message.tool_calls[{id,type:"function",function{name,arguments: input as JSON text}}]
//	content[other types]            dropped (thinking, redacted_thinking, server tool blocks)
//	stop_reason                     choices[0].finish_reason (below)
//	usage                           usage (below); absent → no usage member
//
//	stop_reason                                 finish_reason
//	end_turn, stop_sequence, pause_turn, other  stop
//	max_tokens, model_context_window_exceeded   length
//	tool_use                                    tool_calls
//	refusal                                     content_filter
//
//	usage                                                       OpenAI usage
//	input_tokens + cache_creation_input_tokens + cache_read_input_tokens   prompt_tokens
//	cache_read_input_tokens (when > 0)                          prompt_tokens_details.cached_tokens
//	output_tokens                                               completion_tokens
//	sum of the two                                              total_tokens
//
// # Streams
//
//	Anthropic event                          OpenAI events emitted
//	message_start                            first chunk: delta {"role":"assistant","content":""}
//	content_block_start text (with text)     delta {"content":text}
//	content_block_start tool_use             delta {"tool_calls":[{"index":k,"id","type":"function","function":{"name","arguments":""}}]}
//	content_block_delta text_delta           delta {"content":text}
//	content_block_delta input_json_delta     delta {"tool_calls":[{"index":k,"function":{"arguments":fragment}}]}
//	content_block_stop of a tool_use block   arguments "{}" if no fragment came (a tool without parameters)
//	message_delta with stop_reason           delta {}, finish_reason mapped as above
//	message_stop                             (finish "stop" if none came), usage chunk, data: [DONE]
//	ping, thinking, unknown events           nothing
//	error                                    data: {"error":{...}} (as TranslateError), then the stream ends
//
// k counts tool_use blocks from 0, whatever their content block index.
// With includeUsage every chunk carries "usage":null and the chunk before
// [DONE] has "choices":[] and the usage (message_start's input tokens,
// message_delta's cumulative output tokens); it is left out when the
// upstream reported no usage. A proxy that needs usage for accounting
// whatever the client asked should translate with includeUsage and drop
// the usage chunk itself, as it does for OpenAI upstreams.
//
// StreamReader wraps the translator as an io.Reader over the upstream
// body, so a proxy built for OpenAI streams can read Anthropic ones
// unchanged: it ends with io.ErrUnexpectedEOF when the upstream stops
// before message_stop, passes the source's own errors through, and after
// [DONE] reads the upstream body to its end so the connection can be
// reused.
//
// # Errors
//
//	Anthropic error.type (status)   OpenAI status, type, code
//	invalid_request_error (400)     400 invalid_request_error
//	authentication_error (401)      401 invalid_request_error invalid_api_key
//	billing_error (402)             402 insufficient_quota insufficient_quota
//	permission_error (403)          403 permission_error permission_denied
//	not_found_error (404)           404 not_found_error not_found
//	request_too_large (413)         413 invalid_request_error request_too_large
//	rate_limit_error (429)          429 rate_limit_error rate_limit_exceeded
//	api_error (500)                 500 server_error
//	timeout_error (504)             504 upstream_error upstream_timeout
//	overloaded_error (529)          503 server_error overloaded
//	unknown type, 5xx status        status (529 → 503) server_error
//	unknown type, 4xx status        status invalid_request_error
//	unknown type in a stream        500 server_error
//	neither                         502 upstream_error upstream_bad_response
//
// # Performance
//
// The stream path is built like the openai and sse packages: a
// StreamTranslator parses each event with a reused fastjson parser and
// appends the chunk to a caller-owned buffer, so a text delta costs no
// allocation once buffers have grown (see TestStreamTranslatorAllocs and
// the benchmarks). AppendRequest and AppendResponse run once per request
// and use pooled parsers and buffers: AppendResponse does not allocate,
// AppendRequest makes a few small allocations (more on error paths), which
// is not worth more code.
package anthropic

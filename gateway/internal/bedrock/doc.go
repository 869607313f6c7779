// Package bedrock translates between the OpenAI chat.completions surface
// the gateway serves and Amazon Bedrock's Converse API (POST
// /model/{modelId}/converse and /model/{modelId}/converse-stream), and
// decodes the AWS event-stream framing ConverseStream replies come in.
//
//   - AppendRequest: OpenAI request JSON → Converse request JSON;
//     AppendPath: the model's request path.
//   - AppendResponse: Converse reply → OpenAI chat.completion.
//   - StreamTranslator (and StreamReader, an io.Reader around it and a
//     Decoder): ConverseStream messages → OpenAI chat.completion.chunk
//     events.
//   - TranslateError: Bedrock error reply or stream exception →
//     *openai.Error.
//   - Decoder, ParseMessage: the event-stream framing (prelude, headers,
//     payload, both CRC-32 checks), written here rather than taken from
//     the AWS SDK so that the stream path does not allocate per message.
//
// The package does no I/O of its own (it signs nothing: requests are
// signed by the upstream client's SigV4 authorizer) and depends only on
// openai (errors) and fastjson.
//
// # Requests
//
//	OpenAI                                   Converse
//	model                                    not in the body: the path's {modelId} (AppendPath; the proxy maps it to a Bedrock model id)
//	stream                                   not in the body: /converse-stream instead of /converse
//	max_completion_tokens | max_tokens       inferenceConfig.maxTokens (max_completion_tokens wins; neither → the model's default)
//	temperature                              inferenceConfig.temperature, capped at 1
//	top_p                                    inferenceConfig.topP
//	stop (string | array)                    inferenceConfig.stopSequences (empty strings dropped)
//	messages[role=system|developer]          system: [{"text":...}], one block per message or text part, hoisted from wherever they stand
//	messages[role=user] content string       {"role":"user","content":[{"text":...}]}
//	  part {"type":"text"}                   {"text":...} (empty text dropped)
//	  part {"type":"image_url"} data: URL    {"image":{"format":"png|jpeg|gif|webp","source":{"bytes":<base64 as sent>}}}
//	messages[role=assistant] content         text blocks ("refusal" parts too)
//	  tool_calls[{id,function{name,arguments}}]  {"toolUse":{"toolUseId":id,"name","input":<arguments parsed>}}
//	messages[role=tool]                      user turn {"toolResult":{"toolUseId":tool_call_id,"content":[{"text":...}]}}
//	consecutive turns of one role            merged into one turn (Converse requires alternation);
//	                                         in a user turn toolResult blocks come first
//	tools[{type:function,function}]          toolConfig.tools[{"toolSpec":{name,description,"inputSchema":{"json":parameters}}}]
//	                                         (no parameters → {"type":"object","properties":{}})
//	tool_choice "auto"                       toolConfig.toolChoice {"auto":{}}
//	tool_choice "required"                   toolConfig.toolChoice {"any":{}}
//	tool_choice {"type":"function",...}      toolConfig.toolChoice {"tool":{"name":...}}
//	tool_choice "none"                       no toolConfig (Converse has no "none")
//	a function's "strict": true              toolSpec.strict true
//	response_format {"type":"json_schema"}   outputConfig.textFormat {"type":"json_schema","structure":{"jsonSchema":
//	                                         {"schema":<json_schema.schema as JSON text>,"name","description"}}}
//	response_format {"type":"text"}          nothing
//	service_tier "default"|"flex"|"priority" serviceTier {"type":...} ("auto": nothing)
//
// Refused with a 400 invalid_request_error naming the parameter, because
// dropping them would change what the client gets: n other than 1,
// logprobs true, top_logprobs, response_format json_object (Converse has
// only schemas) or json_schema without a schema object or name, service_tier
// values other than those above, non-empty logit_bias, top_k (no common Converse field), functions and
// function_call (deprecated; use tools), audio, modalities other than
// ["text"], web_search_options, tools of a type other than "function",
// tool_choice "required" or naming a function without tools, tool_choice
// "none" or no tools when the conversation holds tool calls or results
// (Converse then requires toolConfig), image URLs other than base64 data
// URLs (Converse does not fetch URLs) and image types other than png,
// jpeg, gif and webp, content parts other than text and image_url,
// images in assistant, system or tool messages, role "function",
// unparseable or non-object tool call arguments, max_tokens below 1, and
// members of the wrong type or out of range (temperature outside [0, 2],
// top_p outside [0, 1]).
//
// Ignored (accepted, not sent): frequency_penalty, presence_penalty, seed,
// store, metadata, user, stream_options (ConverseStream
// always reports usage; the translator emits the usage chunk as asked),
// parallel_tool_calls (Converse has no switch for it; models may still
// call several tools), prediction, reasoning_effort, verbosity,
// prompt_cache_key, safety_identifier, the per-message "name", an image
// part's "detail", json_schema's "strict" (a schema is always enforced),
// and any member not named here.
//
// Differences the translation cannot hide: system messages in the middle
// of a conversation move to the front; empty messages are dropped; a
// conversation must start with a user message (Bedrock answers 400
// otherwise); tool call ids are passed as is (Bedrock accepts
// [a-zA-Z0-9_-]{1,64}, which OpenAI's ids are).
//
// # Non-streamed replies
//
//	Converse                          OpenAI chat.completion
//	(none)                            id: the caller's, or NewID
//	output.message.content[].text     choices[0].message.content (concatenated; null if only tool calls)
//	output.message.content[].toolUse  choices[0].message.tool_calls[{id: toolUseId,type:"function",function{name,arguments: input as JSON text}}]
//	other blocks                      dropped (reasoningContent, citations, guardContent)
//	stopReason                        choices[0].finish_reason (below)
//	usage                             usage (below); absent → no usage member
//
//	stopReason                                     finish_reason
//	end_turn, stop_sequence, other                 stop
//	max_tokens, model_context_window_exceeded      length
//	tool_use                                       tool_calls
//	guardrail_intervened, content_filtered         content_filter
//
//	usage                                                       OpenAI usage
//	inputTokens + cacheReadInputTokens + cacheWriteInputTokens  prompt_tokens
//	cacheReadInputTokens (when > 0)                             prompt_tokens_details.cached_tokens
//	outputTokens                                                completion_tokens
//	sum of the two                                              total_tokens
//
// # Streams
//
// A ConverseStream reply is application/vnd.amazon.eventstream: binary
// messages, each with a :message-type header ("event", "exception" or
// "error"), an :event-type or :exception-type, and a JSON payload.
//
//	ConverseStream message                   OpenAI events emitted
//	messageStart                             first chunk: delta {"role":"assistant","content":""}
//	contentBlockDelta {"text"}               delta {"content":text}
//	contentBlockStart {"toolUse"}            delta {"tool_calls":[{"index":k,"id":toolUseId,"type":"function","function":{"name","arguments":""}}]}
//	contentBlockDelta {"toolUse":{"input"}}  delta {"tool_calls":[{"index":k,"function":{"arguments":fragment}}]}
//	contentBlockStop of a toolUse block      arguments "{}" if no fragment came (a tool without parameters)
//	messageStop                              delta {}, finish_reason mapped as above
//	metadata (after messageStop)             usage chunk (with includeUsage), data: [DONE]
//	reasoningContent deltas, unknown events  nothing
//	exception / error message                data: {"error":{...}} (as TranslateError), then the stream ends
//
// k counts toolUse blocks from 0, whatever their content block index. With
// includeUsage every chunk carries "usage":null and the chunk before
// [DONE] has "choices":[] and the metadata event's usage; it is left out
// when the upstream reported none. A stream that ends after messageStop
// without metadata is complete ([DONE] is emitted); one that ends before
// messageStop is an error (io.ErrUnexpectedEOF), as are broken framing (a
// CRC mismatch: ErrInvalidMessage) and a message over the size limit
// (ErrMessageTooLarge).
//
// # Errors
//
// Bedrock names an error's type in the X-Amzn-Errortype header
// ("ThrottlingException:http://..."), in the body's "__type" for some
// services, and in a stream's :exception-type header ("throttlingException");
// the body is {"message":...}. TranslateError maps the type, or the status
// when no type is known:
//
//	Bedrock exception (status)           OpenAI status, type, code
//	ValidationException (400)            400 invalid_request_error
//	ServiceQuotaExceededException (400)  429 rate_limit_error rate_limit_exceeded
//	AccessDeniedException (403)          403 permission_error permission_denied
//	UnrecognizedClient, InvalidSignature,
//	ExpiredToken (403)                   401 invalid_request_error invalid_api_key
//	ResourceNotFoundException (404)      404 not_found_error not_found
//	ModelTimeoutException (408)          504 upstream_error upstream_timeout
//	ModelErrorException,
//	ModelStreamErrorException (424)      502 upstream_error model_error
//	ThrottlingException (429)            429 rate_limit_error rate_limit_exceeded
//	ModelNotReadyException (429)         503 server_error overloaded
//	InternalServerException (500)        500 server_error
//	ServiceUnavailableException (503)    503 server_error overloaded
//	unknown type, 5xx status             status server_error
//	unknown type, 4xx status             status invalid_request_error
//	unknown type in a stream             500 server_error
//	neither                              502 upstream_error upstream_bad_response
//
// # Performance
//
// The stream path decodes each message in place in the Decoder's reused
// buffer (both CRCs computed, no copy), parses the payload with a reused
// fastjson parser and appends the chunk to a reused buffer: a text or
// tool-argument delta costs no allocation once buffers have grown (see
// TestStreamReaderAllocs), like package anthropic's StreamReader.
// AppendRequest and AppendResponse run once per request with pooled
// parsers and buffers.
package bedrock

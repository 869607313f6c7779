// Package gemini translates between the OpenAI chat.completions surface
// the gateway serves and Google's generateContent API, which the Gemini
// API (generativelanguage.googleapis.com, an API key) and Vertex AI
// (aiplatform.googleapis.com, OAuth) share: POST
// .../models/{model}:generateContent and
// :streamGenerateContent?alt=sse.
//
//   - AppendRequest: OpenAI request JSON → GenerateContentRequest JSON.
//   - AppendResponse: GenerateContentResponse → OpenAI chat.completion.
//   - StreamTranslator (and StreamReader, an io.Reader around it): the SSE
//     stream of GenerateContentResponse events → OpenAI
//     chat.completion.chunk events.
//   - TranslateError: Google error reply → *openai.Error.
//
// Why these choices (names for tool results, the schema rewrite, the
// placeholder thought signature, the stream's end):
// docs/adr/0013-google-generatecontent.md.
//
// The package does no I/O of its own and depends only on openai (errors),
// sse (event splitting, in StreamReader) and fastjson. The model and the
// choice between the two methods are the caller's: they are in the URL,
// not in the body.
//
// # Requests
//
//	OpenAI                                   Gemini
//	model, stream                            (the URL: models/{model}:generateContent | :streamGenerateContent?alt=sse)
//	messages[role=system|developer]          systemInstruction.parts[{text}], one per message, hoisted from wherever they stand
//	messages[role=user] content string       contents[{role:"user",parts:[{text}]}]
//	  part {"type":"text"}                   {text} (empty text dropped)
//	  part {"type":"image_url"} data: URL    {inlineData:{mimeType,data}} (image/* only)
//	  part {"type":"image_url"} http(s)/gs:// {fileData:{mimeType,fileUri}}, mimeType from the path's extension
//	                                         (.png .jpg .jpeg .webp .heic .heif .gif)
//	  part {"type":"input_audio"}            {inlineData:{mimeType:"audio/wav"|"audio/mp3",data}}
//	  part {"type":"file"} file_data         {inlineData:{mimeType,data}} from the data URL
//	messages[role=assistant] content         contents[{role:"model",parts:[{text}]}] ("refusal" parts too)
//	  tool_calls[{id,function{name,arguments}}]  {functionCall:{name,args:<arguments parsed>}}; the first of a
//	                                         turn carries thoughtSignature "skip_thought_signature_validator"
//	messages[role=tool]                      user turn {functionResponse:{name,response}}: name is the function of
//	                                         the assistant tool call whose id is tool_call_id (Gemini matches
//	                                         results to calls by name); response is the content when it is a JSON
//	                                         object, else {"output": content}; a run of tool messages is put in
//	                                         the order of the calls it answers
//	consecutive turns of one role            merged into one turn (tool results and a following user message too)
//	max_completion_tokens | max_tokens       generationConfig.maxOutputTokens (max_completion_tokens wins)
//	n (1)                                    generationConfig.candidateCount 1
//	temperature, top_p, top_k                generationConfig.temperature, topP, topK
//	presence_penalty, frequency_penalty      generationConfig.presencePenalty, frequencyPenalty
//	seed                                     generationConfig.seed
//	stop (string | array)                    generationConfig.stopSequences (empty strings dropped)
//	response_format {"type":"json_object"}   generationConfig.responseMimeType "application/json"
//	response_format {"type":"json_schema"}   responseMimeType "application/json" and responseSchema (below)
//	tools[{type:function,function}]          tools[{functionDeclarations:[{name,description,parameters}]}]
//	                                         (parameters as a Gemini schema; left out when the function has none,
//	                                         or an object schema without properties, which Gemini rejects)
//	tool_choice "auto" | "none" | "required" toolConfig.functionCallingConfig.mode AUTO | NONE | ANY
//	tool_choice {"type":"function",...}      mode ANY, allowedFunctionNames [name]
//
// Schemas (function parameters, response_format's json_schema.schema) are
// written in Gemini's OpenAPI subset: type names upper-cased, a type array
// of one type and "null" as that type with nullable true; properties,
// items and anyOf recursively; enum, required, propertyOrdering (arrays of
// strings), description, title, format, pattern, nullable, minItems,
// maxItems, minLength, maxLength, minProperties, maxProperties, minimum,
// maximum, default and example copied. $schema, $id, $comment, examples
// and additionalProperties false (what Gemini does anyway) are dropped.
// Any other keyword ($ref, $defs, oneOf, allOf, not, const,
// additionalProperties other than false, exclusiveMinimum, ...), a type
// array of two types, or an enum of non-strings is refused, naming the
// keyword's path (tools[0].function.parameters.properties.a.$ref).
//
// Refused with a 400 invalid_request_error naming the parameter, because
// dropping them would change what the client gets: n other than 1,
// logprobs true, top_logprobs, non-empty logit_bias, functions and
// function_call (deprecated; use tools), audio, modalities other than
// ["text"], web_search_options, tools of a type other than "function",
// tool_choice "required" or naming a function without tools, content
// parts other than text, image_url, input_audio and file, a file by
// file_id, an image URL whose media type cannot be told, images in
// assistant, system or tool messages, role "function", a tool message
// whose tool_call_id no earlier assistant tool call has, unparseable or
// non-object tool call arguments, schemas as above, and members of the
// wrong type or out of range (temperature outside [0, 2], top_p outside
// [0, 1], penalties outside [-2, 2], top_k or max tokens below 1, a seed
// beyond 32 bits).
//
// Ignored (accepted, not sent): parallel_tool_calls (Gemini has no such
// switch; the model may return several calls either way), user, store,
// metadata, service_tier, stream_options (Gemini always reports usage;
// the translator emits the usage chunk as asked), prediction,
// reasoning_effort, verbosity, prompt_cache_key, safety_identifier, the
// per-message "name", an image part's "detail", a function's "strict",
// json_schema's name and strict, and any member not named here.
//
// Differences the translation cannot hide: system messages in the middle
// of a conversation move to the front; empty messages are dropped; tool
// call ids are not sent (Gemini pairs results with calls by function
// name and order, so the results are sent in the order of their calls);
// the thought signature of a function call the model made is not kept by
// OpenAI clients, so the documented placeholder is sent instead.
//
// # Non-streamed replies
//
//	Gemini                                      OpenAI chat.completion
//	responseId, modelVersion                    id, model (when the caller passes none; no responseId:
//	                                            "chatcmpl-" and 24 random letters/digits)
//	candidates[0].content.parts[{text}]         choices[0].message.content (concatenated; null if only function calls)
//	  parts with "thought": true                dropped (thinking summaries)
//	  parts[{functionCall:{id?,name,args}}]     message.tool_calls[{id,type:"function",function{name,arguments: args as JSON text}}];
//	                                            id is Gemini's when it sends one, else "call_" and 24 random letters/digits
//	candidates[0].finishReason                  choices[0].finish_reason (below)
//	promptFeedback.blockReason, no candidates   empty content, finish_reason "content_filter"
//	usageMetadata                               usage (below); absent → no usage member
//
//	finishReason                                           finish_reason
//	STOP (and any other) with function calls               tool_calls
//	STOP, MALFORMED_FUNCTION_CALL, OTHER, LANGUAGE, ...    stop
//	MAX_TOKENS                                             length
//	SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT,     content_filter
//	SPII, IMAGE_SAFETY, IMAGE_PROHIBITED_CONTENT,
//	IMAGE_RECITATION
//
//	usageMetadata                                          OpenAI usage
//	promptTokenCount + toolUsePromptTokenCount             prompt_tokens
//	cachedContentTokenCount (when > 0)                     prompt_tokens_details.cached_tokens
//	candidatesTokenCount + thoughtsTokenCount              completion_tokens (thinking is billed as output)
//	thoughtsTokenCount (when > 0)                          completion_tokens_details.reasoning_tokens
//	sum of the two                                         total_tokens
//
// # Streams
//
// Each SSE event of streamGenerateContent?alt=sse is a whole
// GenerateContentResponse carrying the next parts; a function call arrives
// whole, in one part; the event with the finishReason usually carries the
// final usage, and the body ends after it.
//
//	Gemini event                             OpenAI events emitted
//	the first                                first chunk: delta {"role":"assistant","content":""}
//	a text part                              delta {"content":text}
//	a functionCall part                      delta {"tool_calls":[{"index":k,"id","type":"function","function":{"name","arguments":<args>}}]}
//	finishReason                             delta {}, finish_reason mapped as above
//	promptFeedback.blockReason, no candidate delta {}, finish_reason "content_filter"
//	usageMetadata                            kept (the latest wins)
//	{"error":{...}}                          data: {"error":{...}} (as TranslateError), then the stream ends
//	the body's end after a finish            usage chunk (with includeUsage), data: [DONE]
//
// k counts function calls from 0. With includeUsage every chunk carries
// "usage":null and the chunk before [DONE] has "choices":[] and the
// usage; it is left out when the upstream reported none. Parts after the
// finish are ignored, usage after it is kept.
//
// StreamReader wraps the translator as an io.Reader over the upstream
// body: it ends with io.ErrUnexpectedEOF when the body ends before any
// finishReason (Gemini has no terminal event of its own: the finish is
// what says the reply is whole), passes the source's own errors through,
// and after an error event reads the body to its end so the connection
// can be reused.
//
// # Errors
//
//	Google error.status (HTTP status)        OpenAI status, type, code
//	INVALID_ARGUMENT, OUT_OF_RANGE (400)     400 invalid_request_error
//	  with ErrorInfo reason API_KEY_INVALID  400 invalid_request_error invalid_api_key
//	FAILED_PRECONDITION (400)                400 invalid_request_error failed_precondition
//	UNAUTHENTICATED (401)                    401 invalid_request_error invalid_api_key
//	PERMISSION_DENIED (403)                  403 permission_error permission_denied
//	NOT_FOUND (404)                          404 not_found_error not_found
//	ALREADY_EXISTS, ABORTED (409)            409 invalid_request_error, server_error
//	RESOURCE_EXHAUSTED (429)                 429 rate_limit_error rate_limit_exceeded
//	CANCELLED (499)                          502 upstream_error upstream_cancelled
//	INTERNAL, UNKNOWN, DATA_LOSS (500)       500 server_error
//	UNIMPLEMENTED (501)                      501 invalid_request_error not_implemented
//	UNAVAILABLE (503)                        503 server_error unavailable
//	DEADLINE_EXCEEDED (504)                  504 upstream_error upstream_timeout
//	no status name, 5xx | 4xx                status, server_error | invalid_request_error (known statuses as above)
//	neither                                  502 upstream_error upstream_bad_response
//
// The HTTP status is kept; in a stream (status 0) the body's error.code
// stands in for it. The message is Google's. Google says when to retry in
// a google.rpc.RetryInfo detail ("retryDelay":"37s"), not a Retry-After
// header: RetryDelay reads it, rounded up to whole seconds, for the
// client's Retry-After.
//
// # Performance
//
// The stream path is built like package anthropic's: a StreamTranslator
// parses each event with a reused fastjson parser and appends the chunks
// to a caller-owned buffer, so an event costs no allocation once buffers
// have grown, function calls included (the generated ids come from
// math/rand/v2's allocation-free source); see TestStreamTranslatorAllocs
// and the benchmarks. AppendRequest and AppendResponse run once per
// request and use pooled parsers and buffers: neither allocates for a
// plain chat request once the pool is warm (TestAppendRequestAllocs);
// tool turns, tools and refusals make a few small allocations.
package gemini

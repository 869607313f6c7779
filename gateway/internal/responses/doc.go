// Package responses serves OpenAI's Responses API (POST /v1/responses) on
// the gateway: it reads a Responses request's facts, translates the
// request into a chat.completions request for upstreams without the API,
// translates the chat reply and stream back into a Response object and
// the Responses event stream, and reads a native Responses stream (an
// upstream that has the API, passed through untranslated) as the OpenAI
// chat chunks a translation would give, for guards and accounting.
//
//   - RequestParser: model, stream, max_output_tokens and prompt size, in
//     an openai.Request.
//   - AppendChatRequest: Responses request JSON → chat.completions JSON.
//   - AppendResponse: chat.completion → Response object.
//   - Translator (and StreamReader, an io.Reader around it):
//     chat.completion.chunk events → Responses events.
//   - View: a Responses event read as a chat chunk; AppendChatView: a
//     Response object read as a chat.completion.
//   - Output (its Append* methods, AppendTerminal), AppendWithText,
//     AppendWithSeq, AppendErrorEvent: what the gateway writes itself when
//     a guard changes a Responses reply (see proxy/stream/responses.go and
//     docs/adr/0011-responses-api.md).
//
// The package does no I/O and depends only on openai, sse and fastjson.
//
// # Requests
//
//	Responses                                  chat.completions
//	model                                      model
//	instructions                               messages[0] {"role":"system"}
//	input (string)                             {"role":"user","content":input}
//	input[] message item, role user|system|developer   a message of that role; content string, or parts:
//	  input_text | output_text | text part     {"type":"text","text"}
//	  input_image {image_url, detail}          {"type":"image_url","image_url":{"url","detail"}} (user only)
//	input[] message item, role assistant       {"role":"assistant","content":its text (output_text and refusal parts joined)}
//	input[] function_call {call_id,name,arguments}   tool_calls[] of the assistant message before it (or a new one)
//	input[] function_call_output {call_id,output}    {"role":"tool","tool_call_id","content":output (text parts joined)}
//	input[] reasoning                          dropped (no chat equivalent; the model reasons afresh)
//	max_output_tokens                          max_tokens
//	temperature, top_p, parallel_tool_calls, user   as they are
//	stream                                     stream, stream_options {"include_usage":true}
//	reasoning.effort                           reasoning_effort
//	text.format {"type":"text"}                (nothing)
//	text.format {"type":"json_object"}         response_format {"type":"json_object"}
//	text.format {"type":"json_schema",name,schema,strict,description}   response_format {"type":"json_schema","json_schema":{...}}
//	tools[{type:function,name,description,parameters,strict}]   tools[{type:function,function:{...}}]
//	tool_choice "auto"|"none"|"required"       the same
//	tool_choice {"type":"function","name"}     {"type":"function","function":{"name"}}
//
// Refused with a 400 invalid_request_error naming the parameter, because
// the upstream cannot do what they ask: previous_response_id and
// conversation (nothing is stored upstream; send the conversation in
// input), store true, background true, prompt (stored templates),
// top_logprobs, max_tool_calls, n, built-in tools (any tools[].type but
// "function": web_search, file_search, code_interpreter, computer_use,
// image_generation, mcp, custom…) and tool_choice naming one, input items
// other than message, function_call, function_call_output and reasoning
// (item_reference, built-in tool calls and their outputs), content parts
// other than text and images by URL (input_file, input_audio, an image by
// file_id, images outside user messages), text.format types other than
// text, json_object and json_schema, a missing input, and members of the
// wrong type. What the chat request then cannot carry to the provider is
// refused by the provider's translation, naming the chat parameter (for
// Anthropic: response_format).
//
// Ignored (accepted, not sent): store false, include, metadata,
// service_tier, truncation, text.verbosity, reasoning.summary,
// prompt_cache_key, safety_identifier, stream_options, an item's id and
// status, and any member not named here.
//
// # Replies
//
//	chat.completion                         Response
//	id                                      "resp_" + id without its prefix (or the id given)
//	message.content                         output[] message item, one output_text part
//	message.tool_calls[]                    output[] function_call items {call_id,name,arguments,status:"completed"}
//	finish_reason stop | tool_calls         status "completed"
//	finish_reason length                    status "incomplete", incomplete_details.reason "max_output_tokens"
//	finish_reason content_filter            status "incomplete", incomplete_details.reason "content_filter"
//	usage.prompt_tokens                     usage.input_tokens
//	usage.prompt_tokens_details.cached_tokens      usage.input_tokens_details.cached_tokens
//	usage.completion_tokens                 usage.output_tokens
//	usage.completion_tokens_details.reasoning_tokens   usage.output_tokens_details.reasoning_tokens
//
// AppendChatView reads the other way (output_text parts of message items
// joined, function_call items as tool calls, status and incomplete reason
// as finish_reason, tool_calls when the output holds a function call).
//
// # Streams
//
//	chat chunk                              Responses events
//	the first chunk                         response.created, response.in_progress (status in_progress, output [])
//	delta.content                           (a message item opened: output_item.added, content_part.added) output_text.delta
//	delta.tool_calls[] with an id           (the open item closed) output_item.added {type:function_call,call_id,name}
//	  arguments fragment                    function_call_arguments.delta
//	finish_reason, usage                    kept for the end
//	[DONE]                                  the open item closed (output_text.done, content_part.done,
//	                                        output_item.done / function_call_arguments.done, output_item.done),
//	                                        then response.completed (or response.incomplete) with the whole output and usage
//	{"error":...}                           an "error" event; the stream ends
//
// Every event carries sequence_number, from 0. A source that ends before
// [DONE] is an error (io.ErrUnexpectedEOF).
//
// # Reading a stream
//
// View reads the events of a Responses stream (an upstream's, or the
// translation's) as chat chunks: response.created is the role chunk,
// output_text.delta a text delta, output_item.added of a function call a
// tool-call delta with its id and name (tool-call index k counts function
// call items from 0), function_call_arguments.delta an arguments
// fragment, and response.completed / response.incomplete the end ([DONE]
// with the finish reason above and the usage: input_tokens as prompt
// tokens, output_tokens as completion tokens; cached and reasoning tokens
// are inside those counts). response.failed and error are error chunks.
// The other events carry nothing a guard reads.
package responses

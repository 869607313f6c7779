// Talks to a route whose upstream is Anthropic's Messages API (the mock's)
// with the official OpenAI Node SDK, through the gateway's translation, and
// prints what it got as JSON: a streamed and a non-streamed chat
// completion, and a tool call both ways.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.GATEWAY_URL + "/v1", apiKey: "sk-test", maxRetries: 0 });
const model = process.env.MODEL || "claude-mock";
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Say something." }];
const tools = [{ type: "function", function: { name: "mock_tool", parameters: { type: "object", properties: { q: { type: "integer" } } } } }];

// Streamed text, with usage.
const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } });
let text = "", chunks = 0, finish = null, usage = null;
for await (const chunk of stream) {
  chunks++;
  const c = chunk.choices[0];
  if (c?.delta?.content) text += c.delta.content;
  if (c?.finish_reason) finish = c.finish_reason;
  if (chunk.usage) usage = chunk.usage;
}

// Non-streamed.
const once = await client.chat.completions.create({ model, messages, max_tokens: 100 });

// A tool call, streamed: the SDK's runner-free helper accumulates deltas.
const toolHeaders = { "X-Mock-Tool-Call-At": process.env.TOOL_AT, "X-Mock-Tool-Call-Args": process.env.TOOL_ARGS };
const toolStream = client.chat.completions.stream({ model, messages, tools }, { headers: toolHeaders });
const streamedTool = await toolStream.finalChatCompletion();

// The same, not streamed, then the result sent back.
const toolOnce = await client.chat.completions.create({ model, messages, tools }, { headers: toolHeaders });
const call = toolOnce.choices[0].message.tool_calls?.[0];
const followUp = await client.chat.completions.create({
  model,
  messages: [...messages, toolOnce.choices[0].message, { role: "tool", tool_call_id: call?.id, content: "42" }],
  tools,
});

const summary = (c) => ({
  content: c.choices[0].message.content,
  finish_reason: c.choices[0].finish_reason,
  tool_calls: (c.choices[0].message.tool_calls || []).map((t) => ({ id: t.id, name: t.function.name, arguments: t.function.arguments })),
  usage: c.usage,
});
console.log(JSON.stringify({
  stream: { text, chunks, finish_reason: finish, usage },
  once: summary(once),
  streamed_tool: summary(streamedTool),
  tool: summary(toolOnce),
  follow_up: summary(followUp),
}));

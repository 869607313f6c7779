// Talks to the gateway's POST /v1/messages with the official Anthropic Node
// SDK (it sends its key as x-api-key) and prints what it got as JSON: a
// message, a streamed message, a streamed tool call and an error.
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: process.env.GATEWAY_URL, apiKey: process.env.GATEWAY_KEY, maxRetries: 0 });
const model = process.env.MODEL || "claude-mock";
const params = { model, max_tokens: 256, system: "Be brief.", messages: [{ role: "user", content: "Say something." }] };

const once = await client.messages.create(params);

const stream = client.messages.stream(params);
let deltas = 0;
stream.on("text", () => deltas++);
const streamed = await stream.finalMessage();

const toolStream = client.messages.stream(
  { ...params, tools: [{ name: "mock_tool", input_schema: { type: "object" } }] },
  { headers: { "X-Mock-Tool-Call-At": process.env.TOOL_AT, "X-Mock-Tool-Call-Args": process.env.TOOL_ARGS } },
);
const tool = await toolStream.finalMessage();

let error = null;
try {
  await client.messages.create({ ...params, model: process.env.OPENAI_MODEL });
} catch (e) {
  error = { status: e.status, type: e.error?.error?.type, message: e.error?.error?.message };
}

const summary = (m) => ({ id: m.id, content: m.content, stop_reason: m.stop_reason, usage: m.usage });
console.log(JSON.stringify({ once: summary(once), streamed: summary(streamed), deltas, tool: summary(tool), error }));

// Streams one chat completion through the gateway with the official OpenAI
// Node SDK and prints the result as JSON: {text, chunks, finish_reason}.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.GATEWAY_URL + "/v1", apiKey: "sk-test", maxRetries: 0 });
const stream = await client.chat.completions.create({
  model: process.env.MODEL || "mock-1",
  messages: [{ role: "user", content: "Say something." }],
  stream: true,
});
let text = "", chunks = 0, finish = null;
for await (const chunk of stream) {
  chunks++;
  const c = chunk.choices[0];
  if (c?.delta?.content) text += c.delta.content;
  if (c?.finish_reason) finish = c.finish_reason;
}
const models = await client.models.list();
console.log(JSON.stringify({ text, chunks, finish_reason: finish, models: models.data.map((m) => m.id) }));

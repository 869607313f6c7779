// Streams one Responses API reply through the gateway with the official
// OpenAI Node SDK's responses.stream helper and prints what the SDK made of
// it as JSON: {deltas, final_text, types, last, status, reason, seq_ok}.
// TEXT is the mock's reply text (X-Mock-Text).
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.GATEWAY_URL + "/v1", apiKey: "sk-test", maxRetries: 0 });
const stream = client.responses.stream(
  { model: process.env.MODEL || "mock-1", instructions: "Be brief.", input: "Draw a cat.", max_output_tokens: 500 },
  { headers: { "X-Mock-Text": encodeURIComponent(process.env.TEXT), "X-Mock-Chunk-Size": "5" } },
);
let deltas = "", seq = -1, seqOK = true, last = null;
const types = [];
for await (const ev of stream) {
  if (ev.sequence_number !== seq + 1) seqOK = false;
  seq = ev.sequence_number;
  if (ev.type === "response.output_text.delta") deltas += ev.delta;
  types.push(ev.type);
  last = ev;
}
const final = await stream.finalResponse();
const finalText = final.output.flatMap((o) => o.content ?? []).filter((c) => c.type === "output_text").map((c) => c.text).join("");
console.log(JSON.stringify({
  deltas, final_text: finalText, types, last: last.type,
  status: last.response?.status, reason: last.response?.incomplete_details?.reason ?? "", seq_ok: seqOK,
}));

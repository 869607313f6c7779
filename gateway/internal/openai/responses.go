package openai

// Responses is POST /v1/responses, OpenAI's Responses API. Its bodies are
// not read by this package (package responses reads them); the value
// lets an upstream adapter say whether it serves the API natively
// (provider.Adapter.Serves), so the proxy passes the request as it is
// rather than translating it into a chat request.
const Responses Endpoint = 0x10

// Package stream is the body of a streamed reply: it reads the upstream's
// server-sent events, runs the chunk phase of the request's plugins over
// them, and hands the client what it is to receive, event by event — an
// OpenAI stream as the upstream sent it or as a plugin changed it, an
// Anthropic upstream's stream translated for a chat request, or the
// Messages API's own events passed through (native.go). It also re-encodes
// the replies (streamed or whole) a plugin changed (reencode.go).
//
// A stream sees its request through Config: the plugins' view of it, the
// Counters it fills, and the Exchange it hands its end to at Close.
package stream

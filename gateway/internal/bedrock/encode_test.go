package bedrock

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Test messages are framed by the AWS SDK's own encoder, so the decoder is
// checked against the reference implementation, not against itself.

func encodeMessage(tb testing.TB, headers eventstream.Headers, payload []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: headers, Payload: payload}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// eventMessage frames a ConverseStream event as Bedrock sends it.
func eventMessage(tb testing.TB, eventType, payload string) []byte {
	return encodeMessage(tb, eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue(eventType)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, []byte(payload))
}

// exceptionMessage frames a mid-stream exception as Bedrock sends it.
func exceptionMessage(tb testing.TB, exceptionType, payload string) []byte {
	return encodeMessage(tb, eventstream.Headers{
		{Name: ":exception-type", Value: eventstream.StringValue(exceptionType)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
	}, []byte(payload))
}

// stream concatenates framed messages.
func stream(msgs ...[]byte) []byte { return bytes.Join(msgs, nil) }

package bedrock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

func TestParseMessageHeaders(t *testing.T) {
	// Every header type, so that skipping the ones Message does not keep
	// is exercised too.
	raw := encodeMessage(t, eventstream.Headers{
		{Name: "t", Value: eventstream.BoolValue(true)},
		{Name: "f", Value: eventstream.BoolValue(false)},
		{Name: "i8", Value: eventstream.Int8Value(-3)},
		{Name: "i16", Value: eventstream.Int16Value(300)},
		{Name: "i32", Value: eventstream.Int32Value(70000)},
		{Name: "i64", Value: eventstream.Int64Value(1 << 40)},
		{Name: "bytes", Value: eventstream.BytesValue([]byte{0, 1, 2})},
		{Name: "ts", Value: eventstream.TimestampValue(time.Unix(1700000000, 0))},
		{Name: "uuid", Value: eventstream.UUIDValue{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{Name: ":message-type", Value: eventstream.StringValue("error")},
		{Name: ":event-type", Value: eventstream.StringValue("ev")},
		{Name: ":exception-type", Value: eventstream.StringValue("ex")},
		{Name: ":error-code", Value: eventstream.StringValue("code")},
		{Name: ":error-message", Value: eventstream.StringValue("msg")},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
	}, []byte(`{"a":1}`))
	var m Message
	n, err := ParseMessage(append(raw, "next"...), &m)
	if err != nil || n != len(raw) {
		t.Fatalf("ParseMessage = %d, %v; want %d, nil", n, err, len(raw))
	}
	got := [][]byte{m.MessageType, m.EventType, m.ExceptionType, m.ErrorCode, m.ErrorMessage, m.ContentType, m.Payload}
	want := []string{"error", "ev", "ex", "code", "msg", "application/json", `{"a":1}`}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("field %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestParseMessageErrors(t *testing.T) {
	good := eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	corrupt := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	withPrelude := func(total, headers uint32) []byte {
		b := make([]byte, 16)
		binary.BigEndian.PutUint32(b[0:], total)
		binary.BigEndian.PutUint32(b[4:], headers)
		binary.BigEndian.PutUint32(b[8:], crc32IEEE(b[:8]))
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.ErrUnexpectedEOF},
		{"short prelude", good[:11], io.ErrUnexpectedEOF},
		{"truncated", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"length flipped", corrupt(2), ErrInvalidMessage},
		{"prelude CRC flipped", corrupt(9), ErrInvalidMessage},
		{"header byte flipped", corrupt(14), ErrInvalidMessage},
		{"payload byte flipped", corrupt(len(good) - 6), ErrInvalidMessage},
		{"message CRC flipped", corrupt(len(good) - 1), ErrInvalidMessage},
		{"total below minimum", withPrelude(15, 0), ErrInvalidMessage},
		{"headers beyond total", withPrelude(16, 1), ErrInvalidMessage},
		{"huge", withPrelude(1<<31+1, 0), ErrMessageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			n, err := ParseMessage(tc.in, &m)
			if !errors.Is(err, tc.want) || n != 0 {
				t.Fatalf("ParseMessage = %d, %v; want 0, %v", n, err, tc.want)
			}
		})
	}
}

func TestParseMessageBadHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers []byte
	}{
		{"empty name", []byte{0, 7, 0, 0}},
		{"name past end", []byte{5, 'a', 'b'}},
		{"no type", []byte{1, 'a'}},
		{"unknown type", []byte{1, 'a', 10}},
		{"fixed value truncated", []byte{1, 'a', 4, 0, 0}},
		{"string length truncated", []byte{1, 'a', 7, 0}},
		{"string truncated", []byte{1, 'a', 7, 0, 3, 'x'}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := frame(tc.headers, []byte("{}"))
			var m Message
			if _, err := ParseMessage(raw, &m); !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("err = %v, want ErrInvalidMessage", err)
			}
		})
	}
}

// frame builds a message with valid lengths and CRCs around any header
// bytes, including malformed ones the SDK's encoder cannot produce.
func frame(headers, payload []byte) []byte {
	total := 16 + len(headers) + len(payload)
	b := make([]byte, 12, total)
	binary.BigEndian.PutUint32(b[0:], uint32(total))
	binary.BigEndian.PutUint32(b[4:], uint32(len(headers)))
	binary.BigEndian.PutUint32(b[8:], crc32IEEE(b[:8]))
	b = append(b, headers...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32IEEE(b))
}

func TestDecoderSplitReads(t *testing.T) {
	var msgs [][]byte
	var want []string
	for i := range 50 {
		p := bytes.Repeat([]byte{'a' + byte(i%26)}, i*97) // some messages outgrow the first buffer
		msgs = append(msgs, eventMessage(t, "contentBlockDelta", string(p)))
		want = append(want, string(p))
	}
	src := stream(msgs...)
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(src) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(src)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(src)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(src)) },
	}
	for name, rd := range readers {
		t.Run(name, func(t *testing.T) {
			d := NewDecoder(rd(), 0)
			var m Message
			for i, w := range want {
				if err := d.Next(&m); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if string(m.Payload) != w || string(m.EventType) != "contentBlockDelta" {
					t.Fatalf("message %d: payload %d bytes, event %q", i, len(m.Payload), m.EventType)
				}
			}
			if err := d.Next(&m); err != io.EOF {
				t.Fatalf("after the last message: %v, want io.EOF", err)
			}
		})
	}
}

func TestDecoderEnds(t *testing.T) {
	one := eventMessage(t, "messageStop", `{"stopReason":"end_turn"}`)
	boom := errors.New("connection reset")
	tests := []struct {
		name string
		src  io.Reader
		want error
	}{
		{"clean", bytes.NewReader(one), io.EOF},
		{"mid message", bytes.NewReader(stream(one, one[:20])), io.ErrUnexpectedEOF},
		{"source error", io.MultiReader(bytes.NewReader(one), iotest.ErrReader(boom)), boom},
		{"too large", bytes.NewReader(stream(one, eventMessage(t, "x", string(make([]byte, 300))))), ErrMessageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.src, 200)
			var m Message
			if err := d.Next(&m); err != nil || string(m.EventType) != "messageStop" {
				t.Fatalf("first message: %v %q", err, m.EventType)
			}
			err := d.Next(&m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if again := d.Next(&m); again != err {
				t.Fatalf("error not sticky: %v then %v", err, again)
			}
		})
	}
}

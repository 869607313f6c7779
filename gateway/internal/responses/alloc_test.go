package responses

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// The stream hot path: a text or arguments delta costs no allocation
// once buffers have grown, translated (Translator.Append) or read
// (View.Parse), as in package anthropic (its TestStreamTranslatorAllocs).
func TestStreamAllocs(t *testing.T) {
	const (
		textChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello, \"world\" \u2014 a typical token or two.\n"},"finish_reason":null}]}`
		argsChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": \"San Fra"}}]},"finish_reason":null}]}`
		textEvent = `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello, \"world\" \u2014 a typical token or two.\n","logprobs":[],"sequence_number":7}`
		argsEvent = `{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"{\"location\": \"San Fra","sequence_number":9}`
	)
	t.Run("translate a text delta", func(t *testing.T) {
		var tr Translator
		tr.Reset([]byte("m"), []byte("resp_1"), 1)
		out, _ := tr.Append(nil, []byte(textChunk))
		// Each delta grows the item's text: bounded here by restarting the
		// item (as a new stream would) outside the measured call.
		n := testing.AllocsPerRun(200, func() {
			tr.out.Items[0].Text = tr.out.Items[0].Text[:0]
			out, _ = tr.Append(out[:0], []byte(textChunk))
		})
		if n != 0 {
			t.Fatalf("%v allocations per text delta", n)
		}
	})
	t.Run("translate an arguments delta", func(t *testing.T) {
		var tr Translator
		tr.Reset([]byte("m"), []byte("resp_1"), 1)
		out, _ := tr.Append(nil, []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":""}}]}}]}`))
		out, _ = tr.Append(out, []byte(argsChunk))
		n := testing.AllocsPerRun(200, func() {
			tr.out.Items[0].Text = tr.out.Items[0].Text[:0]
			out, _ = tr.Append(out[:0], []byte(argsChunk))
		})
		if n != 0 {
			t.Fatalf("%v allocations per arguments delta", n)
		}
	})
	for name, ev := range map[string]string{"text": textEvent, "arguments": argsEvent} {
		t.Run("view a "+name+" delta", func(t *testing.T) {
			var v View
			var c openai.Chunk
			v.Parse([]byte(`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":""}}`), &c)
			v.Parse([]byte(ev), &c)
			n := testing.AllocsPerRun(200, func() { v.Parse([]byte(ev), &c) })
			if n != 0 {
				t.Fatalf("%v allocations per event", n)
			}
		})
	}
	t.Run("renumber an event", func(t *testing.T) {
		raw := []byte("event: response.output_text.delta\ndata: " + textEvent + "\n\n")
		out := make([]byte, 0, 512)
		n := testing.AllocsPerRun(200, func() { out, _ = AppendWithSeq(out[:0], raw, 12) })
		if n != 0 {
			t.Fatalf("%v allocations per renumbered event", n)
		}
	})
}

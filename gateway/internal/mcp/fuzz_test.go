package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzRead checks Read against encoding/json: whatever it accepts is a
// JSON object with jsonrpc "2.0", and its kind, id and method agree with
// encoding/json's reading of the body.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"search"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u00e9"}}`,
	} {
		f.Add([]byte(s))
	}
	var r Reader
	f.Fuzz(func(t *testing.T, body []byte) {
		m, e := r.Read(body)
		if e != nil {
			if e.Code != CodeParseError && e.Code != CodeInvalidRequest && e.Code != CodeInvalidParams {
				t.Fatalf("code %d", e.Code)
			}
			return
		}
		// encoding/json's reading, as the Go SDK's server reads it: a
		// struct, so names match in any case and the last one counts.
		var v map[string]json.RawMessage
		var sdk struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			// fastjson accepts some inputs encoding/json refuses
			// (invalid UTF-8 in strings); nothing to compare then.
			return
		}
		var ver string
		if json.Unmarshal(v["jsonrpc"], &ver) != nil || ver != "2.0" {
			t.Fatalf("accepted jsonrpc %s", v["jsonrpc"])
		}
		if json.Unmarshal(body, &sdk) == nil && m.Kind == Request && string(m.Method) == "tools/call" &&
			(sdk.Method != "tools/call" || sdk.Params.Name != string(m.Tool)) {
			t.Fatalf("the gateway reads tools/call %q, encoding/json %s %q", m.Tool, sdk.Method, sdk.Params.Name)
		}
		_, hasID := v["id"]
		_, hasMethod := v["method"]
		switch m.Kind {
		case Request:
			if !hasID || !hasMethod {
				t.Fatalf("request without id or method: %s", body)
			}
		case Notification:
			if hasID || !hasMethod {
				t.Fatalf("notification with an id or without a method: %s", body)
			}
		case Response:
			if !hasID || hasMethod {
				t.Fatalf("response without an id or with a method: %s", body)
			}
		default:
			t.Fatalf("kind %d", m.Kind)
		}
		if hasMethod {
			var method string
			if json.Unmarshal(v["method"], &method) != nil || method != string(m.Method) {
				t.Fatalf("method %q, encoding/json %s", m.Method, v["method"])
			}
		}
		if hasID && !json.Valid(m.ID) {
			t.Fatalf("id %q is not JSON", m.ID)
		}
		if string(m.Method) == "tools/call" && m.Kind == Request && !validTool(m.Tool) {
			t.Fatalf("tool %q", m.Tool)
		}
	})
}

// FuzzFilterEvent checks that filtering an event keeps it one event, and
// keeps only allowed tools in valid JSON.
func FuzzFilterEvent(f *testing.F) {
	f.Add([]byte("event: message\ndata: "+toolsReply+"\n\n"), []byte("4"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"tools\":[{\"name\":\"x\"},1]}}\r\n\r\n"), []byte(`"a"`))
	f.Add([]byte("id: 1\ndata:\ndata: {}\n\n"), []byte("1"))
	var ft ToolFilter
	allow := func(tool []byte) bool { return bytes.HasPrefix(tool, []byte("s")) }
	f.Fuzz(func(t *testing.T, in, id []byte) {
		ev, _, ok := CutEvent(in)
		if !ok {
			return
		}
		var data0 []byte
		for r := ev; len(r) > 0; {
			var l []byte
			l, r = cutLine(r)
			if d, ok := dataField(l); ok {
				if data0 != nil {
					data0 = append(data0, '\n')
				}
				data0 = append(append(data0, d...), 0)[:len(data0)+len(d)]
			}
		}
		out, changed := ft.FilterEvent(nil, ev, id, allow)
		if !changed {
			if len(out) != 0 {
				t.Fatalf("unchanged but wrote %q", out)
			}
			return
		}
		got, rest, ok := CutEvent(out)
		if !ok || len(rest) != 0 || !bytes.Equal(got, out) {
			t.Fatalf("%q filtered to %q: not one event", ev, out)
		}
		// The filtered message's line breaks (JSON whitespace, or raw in
		// a string fastjson read) each start a data line, so the client
		// reads the message back whole.
		data := EventData(nil, out)
		var m struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if !json.Valid(data0) {
			return // what a server sent that is not JSON (fastjson reads some) is relayed no better
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		for _, tl := range m.Result.Tools {
			var named struct {
				Name string `json:"name"`
			}
			json.Unmarshal(tl, &named)
			if !allow([]byte(named.Name)) {
				t.Fatalf("tool %s kept", tl)
			}
		}
	})
}

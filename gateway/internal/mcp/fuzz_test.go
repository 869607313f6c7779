package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
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
// keeps only allowed tools in valid JSON: the response to the request id
// (FilterEvent), and any response (FilterStreamEvent, which must filter
// whatever FilterEvent does).
func FuzzFilterEvent(f *testing.F) {
	f.Add([]byte("event: message\ndata: "+toolsReply+"\n\n"), []byte("4"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"tools\":[{\"name\":\"x\"},1]}}\r\n\r\n"), []byte(`"a"`))
	f.Add([]byte("id: 1\ndata:\ndata: {}\n\n"), []byte("1"))
	f.Add([]byte("event: message\ndata: "+toolsReply+"\n\n"), []byte("5")) // another id: only the stream's filter
	var ft ToolFilter
	allow := func(tool []byte) bool { return bytes.HasPrefix(tool, []byte("s")) }
	f.Fuzz(func(t *testing.T, in, id []byte) {
		ev, _, ok := CutEvent(in)
		if !ok {
			return
		}
		out, changed := ft.FilterEvent(nil, ev, id, allow)
		stream, streamChanged := ft.FilterStreamEvent(nil, ev, allow)
		if changed && (!streamChanged || !bytes.Equal(out, stream)) {
			t.Fatalf("%q: the response to %s filtered to %q, on a stream to %q", ev, id, out, stream)
		}
		checkFiltered(t, ev, out, changed, allow)
		checkFiltered(t, ev, stream, streamChanged, allow)
	})
}

// checkFiltered checks a filtered event out of ev.
func checkFiltered(t *testing.T, ev, out []byte, changed bool, allow func([]byte) bool) {
	t.Helper()
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
	// The filtered message's line breaks (JSON whitespace, or raw in a
	// string fastjson read) each start a data line, so the client reads
	// the message back whole.
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
}

// FuzzEndpointToken checks that a token the gateway reads is one it
// signed for that server, and that what a signed token carries is a
// request target that stays on the server's origin: appended to it, the
// URL's host is the origin's. tok is any bytes (read only if the fuzzer
// found a MAC); target is signed, then read.
func FuzzEndpointToken(f *testing.F) {
	for _, s := range []string{"/sse?sessionid=ABC", "/", "//evil/x", "/@evil", "/a\r\nHost: evil", "/%2e%2e/admin", "x"} {
		f.Add(testKey.AppendToken(nil, "docs", s), s)
	}
	f.Add([]byte("L3g="), "/x")
	f.Add([]byte("!"), "")
	check := func(t *testing.T, tok []byte, target string) {
		if !validTarget(target) {
			t.Fatalf("%q read as %q", tok, target)
		}
		if u, err := url.Parse("http://h:9" + target); err == nil && u.Host != "h:9" {
			t.Fatalf("%q reads as %q, whose URL is on %q", tok, target, u.Host)
		}
	}
	f.Fuzz(func(t *testing.T, tok []byte, target string) {
		if got, err := testKey.ParseToken(tok, "docs"); err == nil {
			check(t, tok, got)
			if !bytes.Equal(testKey.AppendToken(nil, "docs", got), tok) {
				t.Fatalf("%q read as %q, which the key signs otherwise", tok, got)
			}
		} else if !errors.Is(err, ErrEndpoint) || got != "" {
			t.Fatalf("%q: %q, %v", tok, got, err)
		}
		signed := testKey.AppendToken(nil, "docs", target)
		got, err := testKey.ParseToken(signed, "docs")
		switch {
		case err == nil && got != target:
			t.Fatalf("%q signed as %q reads as %q", target, signed, got)
		case err == nil:
			check(t, signed, got)
		case validTarget(target) && len(target) <= MaxEndpointTarget:
			t.Fatalf("%q signed as %q does not read back: %v", target, signed, err)
		}
		if _, err := testKey.ParseToken(signed, "other"); err == nil {
			t.Fatalf("%q signed for docs reads for another server", target)
		}
	})
}

// FuzzRewriteEndpointEvent reads events as an SSE client does (CR, LF and
// CRLF line ends; the last event field; data lines joined) and checks
// that whatever a client would take for an endpoint is either refused or
// on the server's origin and rewritten to the gateway's message URL, and
// that the rewritten event is, to the client, the endpoint event whose
// token carries the server's target.
func FuzzRewriteEndpointEvent(f *testing.F) {
	for _, s := range []string{
		"event: endpoint\ndata: /sse?sessionid=ABC\n\n",
		"event: endpoint\r\nid: 1\r\ndata: http://h:9/m\r\n\r\n",
		"event: endpoint\ndata: http://evil/m\n\n",
		"event: message\rdata: http://evil/\revent: endpoint\n\n",
		"event: endpoint\ndata\n\n",
		"event:endpoint\ndata:?s=1\ndata:\n\n",
		"data: {}\n\n",
	} {
		f.Add([]byte(s))
	}
	base, _ := url.Parse("http://h:9/sse?x=1")
	const msgURL = "/mcp/docs/message?endpoint="
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, _, ok := CutEvent(in)
		if !ok {
			return
		}
		out, target, err := RewriteEndpointEvent(nil, ev, base, msgURL, testKey, "docs")
		if err != nil {
			if !errors.Is(err, ErrEndpoint) || len(out) != 0 || target != "" {
				t.Fatalf("%q: %q, %q, %v", ev, out, target, err)
			}
			return
		}
		name, data, dispatched := clientEvent(ev)
		if target == "" {
			if len(out) != 0 {
				t.Fatalf("%q is no endpoint event, yet wrote %q", ev, out)
			}
			if dispatched && name == "endpoint" {
				t.Fatalf("a client reads %q as the endpoint %q", ev, data)
			}
			return
		}
		if !dispatched || name != "endpoint" {
			t.Fatalf("%q rewritten, yet a client reads it as %q", ev, name)
		}
		u, err := base.Parse(strings.TrimSpace(data))
		if err != nil || !sameOrigin(base, u) {
			t.Fatalf("%q: the endpoint %q (%v) is not on the server's origin", ev, data, err)
		}
		if got, rest, ok := CutEvent(out); !ok || len(rest) != 0 || !bytes.Equal(got, out) {
			t.Fatalf("%q rewritten to %q: not one event", ev, out)
		}
		name, data, dispatched = clientEvent(out)
		tok, ok := strings.CutPrefix(data, msgURL)
		if !dispatched || name != "endpoint" || !ok {
			t.Fatalf("%q rewritten to %q: a client reads %q %q", ev, out, name, data)
		}
		if back, err := testKey.ParseToken([]byte(tok), "docs"); back != target || err != nil {
			t.Fatalf("%q: the token reads %q, %v; want %q", out, back, err, target)
		}
	})
}

// clientEvent reads the first event of b as the SSE spec has a client
// read it: its type ("message" when unnamed), its data, and whether it is
// dispatched (an event without data is not).
func clientEvent(b []byte) (name, data string, dispatched bool) {
	var sb strings.Builder
	hasData := false
	name = ""
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return "", "", false // no line end: the event never ends
		}
		line := string(b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
		if line == "" {
			break
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			if hasData {
				sb.WriteByte('\n')
			}
			sb.WriteString(value)
			hasData = true
		}
	}
	if name == "" {
		name = "message"
	}
	return name, sb.String(), hasData
}

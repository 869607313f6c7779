package main

import (
	"bytes"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// Tool calls in the reply: a URL the model put in the arguments of one of
// its own tool calls, earlier in the same reply, may appear in the reply's
// text. The arguments of a call arrive in fragments over several events
// (a URL may be cut anywhere), so the state keeps each call's arguments so
// far, and the evidence is recomputed from them — with the request body's —
// the next time a marker needs it.
//
// st.calls is an encoded list of calls: for each, a 4-byte little-endian
// index, a 4-byte length and the arguments text (JSON-decoded from the
// event, as the host renders it), in the order the calls first appeared.

// callDeltas is reused by every callback of the instance.
var callDeltas []sdk.ToolCallDelta

// addToolCalls appends an event's tool-call deltas, as chunk_tool_calls
// renders them, to the calls of the reply. It returns false when b is
// malformed. An event that adds arguments makes the evidence stale.
func (st *reqState) addToolCalls(b []byte) bool {
	var ok bool
	callDeltas, ok = sdk.AppendToolCallDeltas(callDeltas[:0], b)
	if !ok {
		return false
	}
	for _, d := range callDeltas {
		if len(d.Arguments) == 0 || st.flags&flagCallsFull != 0 {
			continue
		}
		if len(st.calls)+8+len(d.Arguments) > maxEvidenceBytes {
			// Past the bound no fragment is kept any more, of any call, so
			// no kept text joins fragments that were not adjacent.
			st.flags |= flagCallsFull
			continue
		}
		st.appendArguments(uint32(d.Index), d.Arguments)
		st.flags &^= flagEvidence
		st.ev = st.ev[:0]
	}
	return true
}

// callsScratch backs the rebuilt list when a call other than the last one
// grows (parallel tool calls whose fragments interleave).
var callsScratch []byte

// appendArguments appends a fragment to the arguments of call index.
func (st *reqState) appendArguments(index uint32, frag []byte) {
	c := st.calls
	for at := 0; at+8 <= len(c); {
		n := int(le32(c[at+4:]))
		end := at + 8 + n
		if le32(c[at:]) != index {
			at = end
			continue
		}
		if end == len(c) { // the last call, the common case
			putLE32(c[at+4:], uint32(n+len(frag)))
			st.calls = append(c, frag...)
			return
		}
		s := append(callsScratch[:0], c[:end]...)
		putLE32(s[at+4:], uint32(n+len(frag)))
		s = append(append(s, frag...), c[end:]...)
		st.calls, callsScratch = s, c[:0]
		return
	}
	st.calls = appendLE32(appendLE32(c, index), uint32(len(frag)))
	st.calls = append(st.calls, frag...)
}

// callEvidence adds the URLs around markers in the arguments of the
// reply's tool calls to dst.
func (g *guard) callEvidence(calls []byte, dst evidence) evidence {
	c := collector{ac: g.ac, out: dst}
	for len(calls) >= 8 {
		n := int(le32(calls[4:]))
		c.arguments(calls[8 : 8+n])
		calls = calls[8+n:]
	}
	return c.out
}

// arguments reads a call's arguments so far. Once they are a whole JSON
// document (as arguments are when complete) its decoded strings are read;
// until then the text is read as it is, except for a run of URL bytes at
// its very end, which the next fragment may continue: a URL cut there is
// not evidence yet.
func (c *collector) arguments(t []byte) {
	if j := bytes.TrimLeft(t, " \t\r\n"); len(j) > 0 && (j[0] == '{' || j[0] == '[') {
		n := len(c.out)
		var s jsonscan.Scanner
		s.Reset(t)
		err := c.strings(&s, 1)
		if err == nil {
			err = s.End()
		}
		if err == nil {
			return
		}
		c.out = c.out[:n]
	}
	k := len(t)
	for k > 0 && isURLByte[t[k-1]] {
		k--
	}
	c.text(t[:k], maxNested)
}

func putLE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

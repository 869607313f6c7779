package sse

import "bytes"

// AppendData appends the data of the event raw (as returned by Reader.Next)
// to dst and returns the extended slice.
//
// Per the SSE specification, the values of all "data" fields are joined
// with "\n"; a single space after "data:" is removed; a line "data" without
// a colon contributes an empty value; lines may end in "\n", "\r\n" or
// "\r"; comment lines (starting with ':') and other fields ("event", "id",
// "retry", unknown names) are ignored. Empty lines are skipped, so raw is
// treated as a single event even if it holds several blank lines.
//
// ok is false when the event has no data field; dst is then returned
// unchanged. AppendData does not allocate unless dst must grow.
func AppendData(dst, raw []byte) (out []byte, ok bool) {
	for len(raw) > 0 {
		n := lineEnd(raw)
		line := raw[:n]
		switch {
		case n == len(raw):
			raw = raw[n:]
		case raw[n] == '\r' && n+1 < len(raw) && raw[n+1] == '\n':
			raw = raw[n+2:]
		default:
			raw = raw[n+1:]
		}
		if len(line) < 4 || line[0] != 'd' || string(line[:4]) != "data" {
			continue
		}
		value := line[4:]
		if len(value) > 0 {
			if value[0] != ':' {
				continue // a different field, e.g. "database: ..."
			}
			value = value[1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if ok {
			dst = append(dst, '\n')
		}
		dst = append(dst, value...)
		ok = true
	}
	return dst, ok
}

// lineEnd returns the index of the first CR or LF in b, or len(b). It
// searches scanWindow bytes at a time so that bare-CR line endings do not
// make every line search the rest of the event for a LF.
func lineEnd(b []byte) int {
	for off := 0; off < len(b); off += scanWindow {
		seg := b[off:]
		if len(seg) > scanWindow {
			seg = seg[:scanWindow]
		}
		lf := bytes.IndexByte(seg, '\n')
		if lf >= 0 {
			seg = seg[:lf]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			return off + cr
		}
		if lf >= 0 {
			return off + lf
		}
	}
	return len(b)
}

// doneMarker is the data OpenAI-compatible servers send as the last event.
const doneMarker = "[DONE]"

// IsDone reports whether data (as produced by AppendData) is exactly
// "[DONE]", the OpenAI end-of-stream marker.
func IsDone(data []byte) bool {
	return string(data) == doneMarker
}

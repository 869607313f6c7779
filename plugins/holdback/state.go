package main

import "errors"

// reqState is what the guard remembers of one streamed reply between
// callbacks. It lives in the host (state_get/state_set): instances are
// checked out per callback, so nothing about a request stays in globals.
type reqState struct {
	flags uint8
	ac    uint16 // the automaton's state after the text seen so far
	// marker is the index of the marker that started a pending URL.
	marker uint16
	// held is the text not yet released to the client (holdback mode): a
	// suffix of the reply's text.
	held []byte
	// run is the run of URL bytes that ends the text seen so far (at most
	// its last maxURL bytes: see flagCut); with flagPending, the URL so far,
	// from its start.
	run []byte
	// ev is the request's tool evidence, once flagEvidence is set: from the
	// request body and from calls.
	ev evidence
	// calls are the arguments so far of the reply's own tool calls (see
	// toolcalls.go).
	calls []byte
}

const (
	// flagPending: a marker was found in a URL that may have evidence; the
	// text from the marker on is held until the URL ends and is decided.
	flagPending = 1 << iota
	// flagCut: run lost its start (a run longer than maxURL).
	flagCut
	// flagEvidence: ev holds the evidence read from the request body and
	// calls.
	flagEvidence
	// flagCallsFull: calls reached maxEvidenceBytes; later fragments are
	// not kept.
	flagCallsFull
)

// The state's encoding: version 1 is a header of stateHeader bytes and
// held, run and ev; version 2, written only when the reply had tool calls
// with arguments, has a fourth length and calls after them. A state
// without calls is encoded as before they existed.
const (
	stateVersion      = 1
	stateHeader       = 18
	stateVersionCalls = 2
	stateHeaderCalls  = 22
)

var errBadState = errors.New("holdback: the request state is corrupt")

// decodeState reads b, as encode wrote it, into st, copying what it keeps
// into st's own buffers (b belongs to the SDK). An empty b is the state of
// a reply that has not started.
func decodeState(st *reqState, b []byte) error {
	held, run, ev, calls := st.held[:0], st.run[:0], st.ev[:0], st.calls[:0]
	*st = reqState{held: held, run: run, ev: ev, calls: calls}
	if len(b) == 0 {
		return nil
	}
	header := 0
	switch {
	case len(b) >= stateHeader && b[0] == stateVersion:
		header = stateHeader
	case len(b) >= stateHeaderCalls && b[0] == stateVersionCalls:
		header = stateHeaderCalls
	default:
		return errBadState
	}
	st.flags = b[1]
	st.ac = uint16(b[2]) | uint16(b[3])<<8
	st.marker = uint16(b[4]) | uint16(b[5])<<8
	nh, nr, ne, nc := int64(le32(b[6:])), int64(le32(b[10:])), int64(le32(b[14:])), int64(0)
	if header == stateHeaderCalls {
		nc = int64(le32(b[18:]))
	}
	rest := b[header:]
	if nh+nr+ne+nc != int64(len(rest)) {
		return errBadState
	}
	st.held = append(st.held, rest[:nh]...)
	st.run = append(st.run, rest[nh:nh+nr]...)
	st.ev = append(st.ev, rest[nh+nr:nh+nr+ne]...)
	st.calls = append(st.calls, rest[nh+nr+ne:]...)
	return nil
}

// encode appends the state to dst; nothing for the state of a reply that
// has nothing held, pending or remembered (the common case between words).
func (st *reqState) encode(dst []byte) []byte {
	if st.flags == 0 && st.ac == 0 && len(st.held) == 0 && len(st.run) == 0 && len(st.ev) == 0 && len(st.calls) == 0 {
		return dst
	}
	version := byte(stateVersion)
	if len(st.calls) > 0 {
		version = stateVersionCalls
	}
	dst = append(dst, version, st.flags, byte(st.ac), byte(st.ac>>8), byte(st.marker), byte(st.marker>>8))
	dst = appendLE32(dst, uint32(len(st.held)))
	dst = appendLE32(dst, uint32(len(st.run)))
	dst = appendLE32(dst, uint32(len(st.ev)))
	if len(st.calls) > 0 {
		dst = appendLE32(dst, uint32(len(st.calls)))
	}
	dst = append(dst, st.held...)
	dst = append(dst, st.run...)
	dst = append(dst, st.ev...)
	return append(dst, st.calls...)
}

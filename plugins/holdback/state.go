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
	// ev is the request's tool evidence, once flagEvidence is set.
	ev evidence
}

const (
	// flagPending: a marker was found in a URL that may have evidence; the
	// text from the marker on is held until the URL ends and is decided.
	flagPending = 1 << iota
	// flagCut: run lost its start (a run longer than maxURL).
	flagCut
	// flagEvidence: ev holds the evidence read from the request body.
	flagEvidence
)

const (
	stateVersion = 1
	stateHeader  = 18
)

var errBadState = errors.New("holdback: the request state is corrupt")

// decodeState reads b, as encode wrote it, into st, copying what it keeps
// into st's own buffers (b belongs to the SDK). An empty b is the state of
// a reply that has not started.
func decodeState(st *reqState, b []byte) error {
	held, run, ev := st.held[:0], st.run[:0], st.ev[:0]
	*st = reqState{held: held, run: run, ev: ev}
	if len(b) == 0 {
		return nil
	}
	if len(b) < stateHeader || b[0] != stateVersion {
		return errBadState
	}
	st.flags = b[1]
	st.ac = uint16(b[2]) | uint16(b[3])<<8
	st.marker = uint16(b[4]) | uint16(b[5])<<8
	nh, nr, ne := int(le32(b[6:])), int(le32(b[10:])), int(le32(b[14:]))
	rest := b[stateHeader:]
	if nh < 0 || nr < 0 || ne < 0 || nh+nr+ne != len(rest) {
		return errBadState
	}
	st.held = append(st.held, rest[:nh]...)
	st.run = append(st.run, rest[nh:nh+nr]...)
	st.ev = append(st.ev, rest[nh+nr:]...)
	return nil
}

// encode appends the state to dst; nothing for the state of a reply that
// has nothing held, pending or remembered (the common case between words).
func (st *reqState) encode(dst []byte) []byte {
	if st.flags == 0 && st.ac == 0 && len(st.held) == 0 && len(st.run) == 0 && len(st.ev) == 0 {
		return dst
	}
	dst = append(dst, stateVersion, st.flags, byte(st.ac), byte(st.ac>>8), byte(st.marker), byte(st.marker>>8))
	dst = appendLE32(dst, uint32(len(st.held)))
	dst = appendLE32(dst, uint32(len(st.run)))
	dst = appendLE32(dst, uint32(len(st.ev)))
	dst = append(dst, st.held...)
	dst = append(dst, st.run...)
	return append(dst, st.ev...)
}

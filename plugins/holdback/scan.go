package main

// scan is one callback's work on a reply: it runs the automaton over the
// event's text, decides what may be released and whether the reply must
// stop. It is plain Go, tested natively; main.go maps its outcome to
// verdicts.
//
// In holdback mode (keep) the text not yet released is w: the text held
// from before this event followed by this event's text. Of w, the last h
// bytes stay held. Outside a pending URL, h is the depth of the automaton's
// state — the longest suffix of the reply that is a proper prefix of a
// marker — so everything before it goes out at once. (After a boundary
// event h may be smaller: see boundary.)
//
// When a marker completes, the URL around it decides. The part of the URL
// before the marker has already been released (it contained no marker),
// so it is remembered in st.run. If the request carries no tool evidence
// for that URL, the reply stops at once, with the text before the marker.
// If some evidence URL starts like it, the text from the marker on is held
// (pending) until the URL ends: at the first byte that cannot be part of a
// URL, at a boundary event, or at the end of the reply. The whole URL must
// then equal an evidence URL, or the reply stops. While pending, each
// event also checks that some evidence URL still starts with the URL so
// far, so a URL that can no longer match stops without waiting for its end.
type scan struct {
	g    *guard
	st   *reqState
	keep bool          // holdback mode; otherwise only the decisions count
	body func() []byte // the request body, read if evidence is needed

	w    []byte // keep: the unreleased text
	base int    // where this event's text starts in w
	h    int    // the bytes at the end of w still held

	stop    bool
	marker  int    // stop: the index of the marker found
	pre     []byte // stop, keep: the unreleased text before the marker, sent with the correction
	passed  int    // URLs passed on evidence
	bodyErr error  // the body could not be read for evidence
}

// wBuf backs w when text is held from before; reused by every callback
// of the instance (one callback runs at a time).
var wBuf []byte

// begin starts the callback's scan for an event with text (nil for none).
func (x *scan) begin(text []byte) {
	st := x.st
	x.base, x.h = len(st.held), len(st.held)
	switch {
	case !x.keep || len(st.held) == 0:
		x.w = text
	default:
		wBuf = append(append(wBuf[:0], st.held...), text...)
		x.w = wBuf
	}
}

// text runs the event's text through the automaton. It returns false when
// the reply must stop (x.stop is set).
func (x *scan) text(text []byte) bool {
	st, a := x.st, x.g.ac
	s, h, base := st.ac, x.h, x.base
	pending := st.flags&flagPending != 0
	for i := 0; i < len(text); i++ {
		b := text[i]
		s = a.step(s, b)
		if pending {
			if isURLByte[b] {
				h++
				st.run = append(st.run, b)
				if len(st.run) > maxURL {
					return x.halt(int(st.marker), base+i+1-h)
				}
				continue
			}
			// The URL ended before b.
			if !x.decide() {
				return x.halt(int(st.marker), base+i-h)
			}
			pending, h = false, 0
		}
		if h++; int(a.depth[s]) < h {
			h = int(a.depth[s])
		}
		if m := int(a.match[s]); m > 0 {
			id := int(a.matchID[s])
			if !x.open(text, i, m, id) {
				return x.halt(id, max(base+i+1-m, 0))
			}
			pending, h = true, min(m, base+i+1)
		}
	}
	st.ac, x.h = s, h
	if pending {
		if !x.evidence().hasPrefix(trimURL(st.run)) {
			return x.halt(int(st.marker), len(x.w)-h)
		}
		return true
	}
	// Remember the run of URL bytes that ends the text.
	k := len(text)
	for k > 0 && isURLByte[text[k-1]] {
		k--
	}
	if k > 0 {
		st.run = append(st.run[:0], text[k:]...)
		st.flags &^= flagCut
	} else {
		st.run = append(st.run, text...)
	}
	if n := len(st.run); n > maxURL {
		st.run = st.run[:copy(st.run, st.run[n-maxURL:])]
		st.flags |= flagCut
	}
	return true
}

// open handles a marker of length m that ends at text[i] outside a pending
// URL: it starts a pending URL and returns true, or returns false when no
// evidence can match the URL.
func (x *scan) open(text []byte, i, m, id int) bool {
	st := x.st
	k := i + 1
	for k > 0 && isURLByte[text[k-1]] {
		k--
	}
	cut := false
	if k == 0 { // the run began before this event
		st.run = append(st.run, text[:i+1]...)
		cut = st.flags&flagCut != 0
	} else {
		st.run = append(st.run[:0], text[k:i+1]...)
	}
	at, schemed := urlStart(st.run, len(st.run))
	if cut && !schemed {
		return false // the URL began further back than the guard keeps
	}
	st.run = st.run[:copy(st.run, st.run[at:])]
	if len(st.run) > maxURL || !x.evidence().hasPrefix(trimURL(st.run)) {
		return false
	}
	st.flags = st.flags&^flagCut | flagPending
	st.marker = uint16(id)
	return true
}

// decide reports whether the pending URL, which has ended, is one a tool
// produced, and ends the pending state.
func (x *scan) decide() bool {
	st := x.st
	if !x.evidence().has(trimURL(st.run)) {
		return false
	}
	x.passed++
	st.flags &^= flagPending
	st.run = st.run[:0]
	return true
}

// evidence returns the request's tool evidence, reading the body the first
// time it is needed in the reply, and again after tool calls of the reply
// added arguments (addToolCalls), whose URLs are evidence too.
func (x *scan) evidence() evidence {
	st := x.st
	if st.flags&flagEvidence == 0 {
		var err error
		if st.ev, err = x.g.collectEvidence(x.body(), st.ev[:0]); err != nil {
			st.ev, x.bodyErr = st.ev[:0], err
		}
		st.ev = x.g.callEvidence(st.calls, st.ev)
		st.flags |= flagEvidence
	}
	return st.ev
}

// halt records that the reply stops because of marker id; w[:pre] is the
// unreleased text before it. It returns false for text's convenience.
func (x *scan) halt(id, pre int) bool {
	x.stop, x.marker = true, id
	if x.keep {
		x.pre = x.w[:max(pre, 0)]
	}
	return false
}

// boundary handles an event before which every text must be out: a tool
// call, the finish, the end of the stream. A pending URL ends here and is
// decided; all held text is released (into this event), even a tail that
// could still grow into a marker: the automaton keeps its state, so a
// marker that continues after the event is still caught at its last byte,
// and only a prefix of it can have been sent. The run of URL bytes ends.
func (x *scan) boundary() bool {
	st := x.st
	if st.flags&flagPending != 0 && !x.decide() {
		return x.halt(int(st.marker), len(x.w)-x.h)
	}
	x.h = 0
	st.run = st.run[:0]
	st.flags &^= flagCut | flagPending
	return true
}

// release ends a holdback scan that did not stop: it returns the text to
// release now and keeps the rest held in the state.
func (x *scan) release() []byte {
	n := len(x.w) - x.h
	x.st.held = append(x.st.held[:0], x.w[n:]...)
	return x.w[:n]
}

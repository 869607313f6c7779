package main

import "bytes"

// restorer puts a request's originals back in place of their placeholders
// in reply text. Placeholders all start with the template's first byte,
// so text between occurrences of that byte is copied as is.
type restorer struct {
	first byte
	ph    [][]byte // the rendered placeholders
	orig  [][]byte // their originals
	buf   []byte
	ends  []int
}

// reset loads the entries of a request.
func (r *restorer) reset(t template, entries []entry) {
	r.first = t.prefix[0]
	r.ph, r.orig, r.buf = r.ph[:0], r.orig[:0], r.buf[:0]
	// Render every placeholder into one buffer, then slice it (appending
	// would move the buffer under slices taken earlier).
	r.ends = r.ends[:0]
	for _, e := range entries {
		r.buf = t.appendTo(r.buf, e.kind, e.n)
		r.ends = append(r.ends, len(r.buf))
	}
	start := 0
	for i, e := range entries {
		end := r.ends[i]
		r.ph = append(r.ph, r.buf[start:end:end])
		r.orig = append(r.orig, e.original)
		start = end
	}
}

// restore appends text to dst with every placeholder replaced by its
// original. Unless final, a tail of text that could still grow into a
// placeholder is not appended: held is its length, to be put in front of
// the next event's text. A placeholder the request did not issue (the
// model made one up) is left as it is.
func (r *restorer) restore(dst, text []byte, final bool) (out []byte, held int) {
	i := 0
	for {
		k := bytes.IndexByte(text[i:], r.first)
		if k < 0 {
			return append(dst, text[i:]...), 0
		}
		p := i + k
		dst = append(dst, text[i:p]...)
		rest := text[p:]
		best, pending := -1, false
		for j, ph := range r.ph {
			switch {
			case len(rest) >= len(ph):
				if bytes.Equal(rest[:len(ph)], ph) && (best < 0 || len(ph) > len(r.ph[best])) {
					best = j
				}
			case !final && bytes.HasPrefix(ph, rest):
				pending = true
			}
		}
		switch {
		case pending:
			return dst, len(rest)
		case best >= 0:
			dst = append(dst, r.orig[best]...)
			i = p + len(r.ph[best])
		default:
			dst = append(dst, text[p])
			i = p + 1
		}
	}
}

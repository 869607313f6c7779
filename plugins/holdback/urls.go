package main

// What counts as "the URL around a marker". The same rules cut URLs out of
// the reply and out of the tool evidence in the request, so a URL a tool
// produced and the same URL repeated by the model compare equal byte for
// byte (see README.md, "Evidence").

// urlChars are the bytes a URL run is made of: ASCII letters and digits and
// -._~:/?#@$&+=% — RFC 3986's unreserved and most reserved characters, less
// the ones prose and Markdown put right around links: ( ) [ ] ' * ! , ;
// and quotes. A storage URL with a signed query string
// (https://host/path/x.png?se=...&sig=abc%3D) is one run.
const urlPunct = "-._~:/?#@$&+=%"

var isURLByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for i := 0; i < len(urlPunct); i++ {
		t[urlPunct[i]] = true
	}
	return t
}()

// trailingPunct are trimmed from the end of a URL run: a sentence that ends
// with a link ("see https://host/x.png.") does not make the dot part of it.
func isTrailingPunct(c byte) bool { return c == '.' || c == ':' || c == '?' }

// trimURL drops trailing punctuation from a URL run.
func trimURL(u []byte) []byte {
	for len(u) > 0 && isTrailingPunct(u[len(u)-1]) {
		u = u[:len(u)-1]
	}
	return u
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// urlStart returns where the URL begins in run, a run of URL bytes whose
// marker ends at markerEnd (exclusive): at the run's start, unless the part
// up to the marker's end contains "://" after a scheme, in which case at
// that scheme (the last such): "url=https://host/…" → "https://host/…".
// schemed reports the second case, in which the start does not depend on
// how far the run reaches back.
func urlStart(run []byte, markerEnd int) (start int, schemed bool) {
	for k := markerEnd - 3; k >= 0; k-- {
		if run[k] == ':' && run[k+1] == '/' && run[k+2] == '/' {
			s := k
			for s > 0 && isSchemeByte(run[s-1]) {
				s--
			}
			if s < k {
				return s, true
			}
		}
	}
	return 0, false
}

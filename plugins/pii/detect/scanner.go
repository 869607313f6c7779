package detect

import "bytes"

// Span is one finding: text[Start:End] holds data of Kind.
type Span struct {
	Start, End int
	Kind       Kind
}

// Options choose what a [Scanner] reports.
type Options struct {
	// Kinds are the kinds to report; 0 means [All].
	Kinds Set
	// PrivateIPs also reports addresses that identify no one outside their
	// network: private (10/8, 172.16/12, 192.168/16, fc00::/7), loopback,
	// link-local, CGNAT (100.64/10) and unspecified addresses. Off by
	// default: "connect to 192.168.1.1" is configuration, not personal data.
	PrivateIPs bool
}

// Scanner finds spans in text. Its zero value reports every kind. A
// Scanner holds no state between calls and may be shared.
type Scanner struct {
	kinds      Set
	privateIPs bool
}

// New returns a Scanner for o.
func New(o Options) *Scanner {
	k := o.Kinds & All
	if o.Kinds == 0 {
		k = All
	}
	return &Scanner{kinds: k, privateIPs: o.PrivateIPs}
}

// Kinds is the set of kinds s reports.
func (s *Scanner) Kinds() Set {
	if s.kinds == 0 {
		return All
	}
	return s.kinds
}

// Append appends the spans found in text to dst, in order and without
// overlaps, and returns it. It allocates nothing once dst has room.
func (s *Scanner) Append(dst []Span, text []byte) []Span {
	kinds := s.Kinds()
	// emailSkip: the local-part run that ends here has no '@' after it,
	// so no word start before it begins an address. nextAt: the next '@'
	// at or after i (len(text) when none); an address starts at most
	// maxLocal bytes before it.
	emailSkip, nextAt := 0, -1
	for i := 0; i < len(text); {
		if i > 0 && isAlnum(text[i-1]) {
			// Inside a word nothing starts but a PEM block, which may be
			// glued to the text before it.
			if text[i] == '-' && kinds.Has(Secret) {
				if end := matchPEM(text, i); end > 0 {
					dst = append(dst, Span{Start: i, End: end, Kind: Secret})
					i = end
					continue
				}
			}
			i++
			continue
		}
		if nextAt < i {
			nextAt = len(text)
			if k := bytes.IndexByte(text[i:], '@'); k >= 0 {
				nextAt = i + k
			}
		}
		end, kind := 0, Kind(0)
		if kinds.Has(Email) && i >= emailSkip && nextAt-i <= maxLocal && nextAt < len(text) {
			end, emailSkip = matchEmail(text, i)
			if end > 0 {
				kind = Email
			}
		}
		if kind == 0 {
			end, kind = s.matchAt(text, i, kinds)
		}
		if kind != 0 {
			dst = append(dst, Span{Start: i, End: end, Kind: kind})
			i = end
			continue
		}
		// Nothing starts here: no match starts inside this word either.
		if !isAlnum(text[i]) {
			i++
			continue
		}
		for i < len(text) && isAlnum(text[i]) {
			i++
		}
	}
	return dst
}

// matchAt tries the detectors other than e-mail at a word start i, in an
// order where a more specific shape goes before a looser one (a card's
// Luhn before a phone's grouping). It returns the match's end and kind, or
// a zero kind.
func (s *Scanner) matchAt(text []byte, i int, kinds Set) (int, Kind) {
	c := text[i]
	if kinds.Has(Secret) {
		if end := matchSecret(text, i); end > 0 {
			return end, Secret
		}
	}
	if kinds.Has(IPv6) && (isHex(c) || c == ':') && colonWithin(text, i, 5) {
		if end := s.matchIPv6(text, i); end > 0 {
			return end, IPv6
		}
	}
	switch {
	case isUpper(c):
		if kinds.Has(IBAN) {
			if end := matchIBAN(text, i); end > 0 {
				return end, IBAN
			}
		}
		if kinds.Has(ITCF) {
			if end := matchCodiceFiscale(text, i); end > 0 {
				return end, ITCF
			}
		}
		if kinds.Has(UKNINO) {
			if end := matchNINO(text, i); end > 0 {
				return end, UKNINO
			}
		}
		if kinds.Has(ESDNI) {
			if end := matchNIE(text, i); end > 0 {
				return end, ESDNI
			}
		}
	case isDigit(c) || c == '+' || c == '(':
		if afterIdentifier(text, i) {
			return 0, 0
		}
		return s.matchNumeric(text, i, kinds)
	}
	return 0, 0
}

// matchNumeric tries the detectors of numbers at i.
func (s *Scanner) matchNumeric(text []byte, i int, kinds Set) (int, Kind) {
	if isDigit(text[i]) {
		if kinds.Has(IPv4) {
			if end := s.matchIPv4(text, i); end > 0 {
				return end, IPv4
			}
		}
		var r numberRun
		r.read(text, i)
		if kinds.Has(Card) {
			if end := matchCard(text, &r); end > 0 {
				return end, Card
			}
		}
		if kinds.Has(USSSN) {
			if end := matchSSN(text, &r); end > 0 {
				return end, USSSN
			}
		}
		if kinds.Has(BRCPF) {
			if end := matchCPF(text, &r); end > 0 {
				return end, BRCPF
			}
		}
		if kinds.Has(ESDNI) {
			if end := matchDNI(text, &r); end > 0 {
				return end, ESDNI
			}
		}
	}
	if kinds.Has(Phone) {
		if end := matchPhone(text, i); end > 0 {
			return end, Phone
		}
	}
	return 0, 0
}

// colonWithin reports whether one of the n bytes from i is a colon: an
// IPv6 address has one after at most four hex digits.
func colonWithin(text []byte, i, n int) bool {
	for j := i; j < len(text) && j < i+n; j++ {
		if text[j] == ':' {
			return true
		}
	}
	return false
}

// afterIdentifier reports whether a number at i continues an identifier:
// "ORD-2024-000123", "build/4111…", "v1.2.3.4", "#415-555-0100". Such
// numbers are order ids, paths and versions, not personal data.
func afterIdentifier(text []byte, i int) bool {
	if i == 0 {
		return false
	}
	switch text[i-1] {
	case '#', '_', '/', '\\', '=', '&', '%':
		return true
	case '-', '.', ':':
		return i >= 2 && isAlnum(text[i-2])
	}
	return false
}

// byteClasses classifies ASCII bytes with one table lookup: the scanner
// asks these questions several times for every byte of a prompt.
var byteClasses = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case '0' <= c && c <= '9':
			t[c] = clDigit | clHex
		case 'A' <= c && c <= 'Z':
			t[c] = clUpper
		case 'a' <= c && c <= 'z':
			t[c] = clLower
		}
		if ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F') {
			t[c] |= clHex
		}
	}
	return t
}()

const (
	clDigit = 1 << iota
	clUpper
	clLower
	clHex
)

func isDigit(c byte) bool { return byteClasses[c]&clDigit != 0 }
func isUpper(c byte) bool { return byteClasses[c]&clUpper != 0 }
func isLower(c byte) bool { return byteClasses[c]&clLower != 0 }
func isAlpha(c byte) bool { return byteClasses[c]&(clUpper|clLower) != 0 }
func isAlnum(c byte) bool { return byteClasses[c]&(clDigit|clUpper|clLower) != 0 }
func isHex(c byte) bool   { return byteClasses[c]&clHex != 0 }

// boundaryAt reports whether a match may end at j: the text ends, or the
// next byte is not a letter or digit.
func boundaryAt(text []byte, j int) bool { return j >= len(text) || !isAlnum(text[j]) }

// numberEnd reports whether a number may end at j: a boundary, and not a
// decimal point or version dot followed by more digits ("10.0.0.1.5",
// "4111…1111.5").
func numberEnd(text []byte, j int) bool {
	if !boundaryAt(text, j) {
		return false
	}
	if j+1 < len(text) && (text[j] == '.' || text[j] == ',' || text[j] == ':' || text[j] == '/') && isDigit(text[j+1]) {
		return false
	}
	return true
}

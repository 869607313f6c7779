package detect

import "net/netip"

// matchIPv4 finds a dotted-quad IPv4 address at i: four decimal octets up
// to 255 without leading zeros, not part of a longer dotted run
// ("10.0.0.1.5", "1.2.3.4.5" are versions or OIDs) and, unless private
// addresses are wanted, not private, loopback, link-local, CGNAT,
// multicast, broadcast or unspecified.
func (s *Scanner) matchIPv4(text []byte, i int) int {
	var oct [4]int
	j := i
	for k := 0; k < 4; k++ {
		if k > 0 {
			if j >= len(text) || text[j] != '.' {
				return 0
			}
			j++
		}
		start := j
		v := 0
		for j < len(text) && isDigit(text[j]) && j-start < 4 {
			v = v*10 + int(text[j]-'0')
			j++
		}
		n := j - start
		if n == 0 || n > 3 || v > 255 || (n > 1 && text[start] == '0') {
			return 0
		}
		oct[k] = v
	}
	// A port may follow ("1.1.1.1:443"); another dotted part may not.
	if !boundaryAt(text, j) || (j+1 < len(text) && (text[j] == '.' || text[j] == ',') && isAlnum(text[j+1])) {
		return 0
	}
	if !s.privateIPs && !publicIPv4(oct) {
		return 0
	}
	return j
}

// publicIPv4 reports whether an address can identify someone beyond its
// own network.
func publicIPv4(o [4]int) bool {
	switch {
	case o[0] == 0, o[0] == 10, o[0] == 127, o[0] >= 224:
		return false
	case o[0] == 172 && o[1] >= 16 && o[1] <= 31:
		return false
	case o[0] == 192 && o[1] == 168, o[0] == 169 && o[1] == 254:
		return false
	case o[0] == 100 && o[1] >= 64 && o[1] <= 127:
		return false
	}
	return true
}

// matchIPv6 finds an IPv6 address at i: a run of hex digits and colons
// (with a dotted IPv4 tail) that net/netip parses, with at least two
// colons, not inside a longer run of colons, in 2000::/3 (the global
// unicast space; "b::c" parses too) or, when private addresses are
// wanted, loopback, link-local or unique-local. Times ("12:30:45") do not
// parse.
func (s *Scanner) matchIPv6(text []byte, i int) int {
	const maxLen = 45 // "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"
	if i > 0 && text[i-1] == ':' && text[i] != ':' {
		return 0
	}
	j, colons := i, 0
	for j < len(text) && j-i <= maxLen && (isHex(text[j]) || text[j] == ':' || text[j] == '.') {
		if text[j] == ':' {
			colons++
		}
		j++
	}
	if j-i > maxLen || colons < 2 {
		return 0
	}
	// A sentence may end right after the address.
	for j > i && (text[j-1] == '.' || (text[j-1] == ':' && (j-2 < i || text[j-2] != ':'))) {
		j--
	}
	if !boundaryAt(text, j) || (j < len(text) && text[j] == '%') {
		return 0
	}
	a, err := netip.ParseAddr(string(text[i:j]))
	if err != nil || !a.Is6() {
		return 0
	}
	public := a.As16()[0]&0xe0 == 0x20 // 2000::/3, where global unicast is allocated
	local := a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsPrivate()
	if !public && !(s.privateIPs && local) {
		return 0
	}
	return j
}

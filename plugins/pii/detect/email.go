package detect

// Limits of an address (RFC 5321): a local part of at most 64 bytes, a
// domain of at most 253.
const (
	maxLocal  = 64
	maxDomain = 253
)

func isLocalByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

// matchEmail finds an e-mail address at the word start i: an ASCII local
// part (letters, digits and . _ % + -, not starting or ending with a dot)
// of at most 64 bytes, '@', and a domain of at least two labels of letters,
// digits and '-' whose last is two or more letters. It returns the
// address's end (0 for none) and the end of the local-part run it read,
// before which no other word start can begin an address if this one did
// not.
func matchEmail(text []byte, i int) (end, skip int) {
	j := i
	for j < len(text) && isLocalByte(text[j]) && j-i <= maxLocal {
		j++
	}
	skip = j
	if j == i || j-i > maxLocal || j >= len(text) || text[j] != '@' || text[i] == '.' || text[j-1] == '.' {
		if j-i > maxLocal || (j > i && text[i] == '.') {
			skip = i + 1 // a later start may still fit, or not start with a dot
		}
		return 0, skip
	}
	d := j + 1
	k, lastStart, dots := d, d, 0
	for k < len(text) && k-d <= maxDomain {
		c := text[k]
		if isAlnum(c) || c == '-' {
			k++
			continue
		}
		if c == '.' && k > lastStart && k+1 < len(text) && isAlnum(text[k+1]) {
			dots++
			k++
			lastStart = k
			continue
		}
		break
	}
	if k == lastStart || dots == 0 || k-d > maxDomain {
		return 0, skip
	}
	tld := text[lastStart:k]
	if len(tld) < 2 {
		return 0, skip
	}
	for _, c := range tld {
		if !isAlpha(c) {
			return 0, skip
		}
	}
	if text[d] == '-' || text[k-1] == '-' {
		return 0, skip
	}
	return k, skip
}

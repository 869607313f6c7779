package detect

// numberRun is a run of digit groups read from a word start: "4111 1111
// 1111 1111", "123-45-6789", "123.456.789-09". Groups are separated by one
// space, '-' or '.' followed by a digit. The number detectors choose among
// the run's group boundaries where their number could end, so a card
// followed by "12/25" is still found, while a run longer than any of them
// as a whole ("4111 1111 1111 1111 1111 1111") is not cut into one.
type numberRun struct {
	start   int
	digits  [maxRunDigits]byte
	nd      int
	ends    [maxRunGroups]int  // ends[g]: the text offset after group g
	counts  [maxRunGroups]int  // counts[g]: digits in groups 0..g
	seps    [maxRunGroups]byte // seps[g]: the separator before group g+1
	ngroups int
	more    bool // the run goes on past maxRunDigits or maxRunGroups
}

const (
	maxRunDigits = 24
	maxRunGroups = 8
)

// read reads the run starting at i, a digit.
func (r *numberRun) read(text []byte, i int) {
	r.start, r.nd, r.ngroups, r.more = i, 0, 0, false
	j := i
	for {
		for j < len(text) && isDigit(text[j]) {
			if r.nd == maxRunDigits {
				r.more = true
				return
			}
			r.digits[r.nd] = text[j]
			r.nd++
			j++
		}
		r.ends[r.ngroups], r.counts[r.ngroups] = j, r.nd
		r.ngroups++
		if j+1 >= len(text) || !isDigit(text[j+1]) || (text[j] != ' ' && text[j] != '-' && text[j] != '.') {
			return
		}
		r.seps[r.ngroups-1] = text[j]
		if r.ngroups == maxRunGroups {
			r.more = true
			return
		}
		j++
	}
}

// groupLen is the number of digits in group g.
func (r *numberRun) groupLen(g int) int {
	if g == 0 {
		return r.counts[0]
	}
	return r.counts[g] - r.counts[g-1]
}

// lastGroup reports whether the run ends after group g: a number that
// ends there is not the head of a longer number.
func (r *numberRun) lastGroup(g int) bool { return g == r.ngroups-1 && !r.more }

// endsAt reports whether a number may end after group g: the run ends
// there, or the next group is a separate word (after a space) while the
// number's own groups were joined by something else or were one group.
func (r *numberRun) endsAt(text []byte, g int) bool {
	if r.lastGroup(g) {
		return numberEnd(text, r.ends[g])
	}
	return r.seps[g] == ' ' && (g == 0 || r.seps[g-1] != ' ')
}

// matchCard finds a payment card: 13–19 digits, ungrouped or in groups of
// 4 (Amex 4-6-5) joined by one kind of separator, space or '-', passing
// the Luhn check, with a known issuer prefix.
func matchCard(text []byte, r *numberRun) int {
	for g := r.ngroups - 1; g >= 0; g-- {
		n := r.counts[g]
		if n < 13 || n > 19 {
			continue
		}
		if g > 0 && !r.cardGroups(g) {
			continue
		}
		if !r.lastGroup(g) && !(r.seps[g] == ' ' && g+1 < r.ngroups && r.groupLen(g+1) != 4) {
			// "4111 1111 1111 1111 12/25" ends at the fourth group; a
			// fifth group of four would make it a longer number.
			continue
		}
		if r.lastGroup(g) && !numberEnd(text, r.ends[g]) {
			continue
		}
		if luhn(r.digits[:n]) && knownIIN(r.digits[:n]) {
			return r.ends[g]
		}
	}
	return 0
}

// cardGroups checks the grouping of a card ending after group g.
func (r *numberRun) cardGroups(g int) bool {
	sep := r.seps[0]
	if sep != ' ' && sep != '-' {
		return false
	}
	for k := 0; k < g; k++ {
		if r.seps[k] != sep {
			return false
		}
	}
	if r.groupLen(0) != 4 {
		return false
	}
	for k := 1; k <= g; k++ {
		if n := r.groupLen(k); n < 3 || n > 6 {
			return false
		}
	}
	return true
}

// luhn reports whether the digits pass the Luhn check.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// prefixNum is the number of the first n digits of d.
func prefixNum(d []byte, n int) int {
	v := 0
	for i := 0; i < n && i < len(d); i++ {
		v = v*10 + int(d[i]-'0')
	}
	return v
}

// knownIIN reports whether the card number's issuer prefix and length
// belong to a scheme that issues cards: Visa, Mastercard, American
// Express, Discover, Diners Club, JCB, UnionPay, Maestro.
func knownIIN(d []byte) bool {
	n := len(d)
	p1, p2, p3, p4 := prefixNum(d, 1), prefixNum(d, 2), prefixNum(d, 3), prefixNum(d, 4)
	switch {
	case p1 == 4: // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011, p3 >= 644 && p3 <= 649, p2 == 65: // Discover
		return n >= 16
	case p3 >= 300 && p3 <= 305, p2 == 36, p2 == 38, p2 == 39: // Diners Club
		return n >= 14
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16
	case p2 == 62: // UnionPay
		return n >= 16
	case p2 == 50, p2 >= 56 && p2 <= 69: // Maestro
		return n >= 13
	}
	return false
}

// matchSSN finds a US social security number, AAA-GG-SSSS (or with
// spaces), with the Social Security Administration's rules: the area is
// not 000, 666 or 900–999, the group not 00, the serial not 0000, and not
// the numbers printed in advertisements (078-05-1120, 219-09-9999).
func matchSSN(text []byte, r *numberRun) int {
	if r.ngroups < 3 || r.groupLen(0) != 3 || r.groupLen(1) != 2 || r.groupLen(2) != 4 {
		return 0
	}
	if r.seps[0] != r.seps[1] || r.seps[0] == '.' || !r.endsAt(text, 2) {
		return 0
	}
	d := r.digits[:9]
	area, group, serial := prefixNum(d, 3), prefixNum(d[3:], 2), prefixNum(d[5:], 4)
	if area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0 {
		return 0
	}
	if s := string(d); s == "078051120" || s == "219099999" {
		return 0
	}
	return r.ends[2]
}

// matchCPF finds a Brazilian CPF written as 000.000.000-00, with its two
// check digits; eleven equal digits are not a CPF.
func matchCPF(text []byte, r *numberRun) int {
	if r.ngroups < 4 || r.groupLen(0) != 3 || r.groupLen(1) != 3 || r.groupLen(2) != 3 || r.groupLen(3) != 2 {
		return 0
	}
	if r.seps[0] != '.' || r.seps[1] != '.' || r.seps[2] != '-' || !r.endsAt(text, 3) {
		return 0
	}
	d := r.digits[:11]
	same := true
	for _, c := range d[1:] {
		same = same && c == d[0]
	}
	if same {
		return 0
	}
	check := func(n int) bool {
		sum := 0
		for i := 0; i < n; i++ {
			sum += int(d[i]-'0') * (n + 1 - i)
		}
		v := sum * 10 % 11
		if v == 10 {
			v = 0
		}
		return v == int(d[n]-'0')
	}
	if check(9) && check(10) {
		return r.ends[3]
	}
	return 0
}

// dniLetters is the check letter of a DNI number, by the number mod 23.
const dniLetters = "TRWAGMYFPDXBNJZSQVHLCKE"

// matchDNI finds a Spanish DNI: eight digits and the check letter, joined
// or with one '-' or space.
func matchDNI(text []byte, r *numberRun) int {
	if r.groupLen(0) != 8 {
		return 0
	}
	j := r.ends[0]
	if j < len(text) && (text[j] == '-' || text[j] == ' ') {
		j++
	}
	if j >= len(text) || !isUpper(text[j]) || !boundaryAt(text, j+1) {
		return 0
	}
	if dniLetters[prefixNum(r.digits[:8], 8)%23] != text[j] {
		return 0
	}
	return j + 1
}

package detect

// phoneRun is a phone-number-like run: an optional '+', then groups of
// digits, a group possibly in parentheses, joined by at most one space,
// '-' or '.' ("+44 (0)20 7946 0958", "(415) 555-0100", "01 23 45 67 89").
type phoneRun struct {
	plus    bool
	first   byte // the first digit
	digits  [maxPhoneDigits]byte
	ends    [maxPhoneGroups]int  // text offset after group g (after its ')')
	counts  [maxPhoneGroups]int  // digits in groups 0..g
	seps    [maxPhoneGroups]byte // separator after group g (0: none, the next group opened a parenthesis)
	paren   [maxPhoneGroups]bool
	ngroups int
	more    bool
}

const (
	maxPhoneGroups = 8
	maxPhoneDigits = 15 // E.164
)

// read reads the run at i ('+', '(' or a digit); false if none starts
// there.
func (p *phoneRun) read(text []byte, i int) bool {
	*p = phoneRun{}
	j := i
	if text[j] == '+' {
		p.plus = true
		j++
	}
	nd := 0
	for {
		open := j < len(text) && text[j] == '('
		if open {
			if p.ngroups > 1 || (p.ngroups == 1 && !p.plus && nd != 1) {
				break // only "(area)" first, or after "+cc" or "1"
			}
			j++
		}
		start := j
		for j < len(text) && isDigit(text[j]) {
			if nd == maxPhoneDigits {
				p.more = true
				return p.ngroups > 0
			}
			if nd == 0 {
				p.first = text[j]
			}
			p.digits[nd] = text[j]
			nd++
			j++
		}
		if j == start || (open && (j >= len(text) || text[j] != ')')) {
			if open || p.ngroups == 0 {
				p.more = p.ngroups > 0 // a dangling part: not a clean end
				return p.ngroups > 0
			}
			break
		}
		if open {
			j++
		}
		g := p.ngroups
		p.ends[g], p.counts[g], p.paren[g] = j, nd, open
		p.ngroups++
		// The next group: after one separator, or straight after ')' .
		if j < len(text) && (text[j] == ' ' || text[j] == '-' || text[j] == '.') && j+1 < len(text) &&
			(isDigit(text[j+1]) || text[j+1] == '(') {
			p.seps[g] = text[j]
			j++
		} else if !(open && j < len(text) && isDigit(text[j])) && !(j < len(text) && text[j] == '(') {
			break
		}
		if p.ngroups == maxPhoneGroups {
			p.more = true
			break
		}
	}
	return p.ngroups > 0
}

func (p *phoneRun) groupLen(g int) int {
	if g == 0 {
		return p.counts[0]
	}
	return p.counts[g] - p.counts[g-1]
}

// matchPhone finds a phone number at i: international with '+' (8–15
// digits), North American ((NXX) NXX-XXXX and its variants, with an
// optional leading 1), or a national number with a trunk 0 (9–12 digits in
// at least two groups joined by one kind of separator: "020 7946 0958",
// "01 23 45 67 89"), or international after 00 ("0049 30 1234567"). A number must be grouped or start with '+': a bare
// run of digits is an id, an amount or a timestamp as often as a phone.
// Dates ("2024-01-15", "01.02.2024") are not phone numbers.
func matchPhone(text []byte, i int) int {
	var p phoneRun
	if !p.read(text, i) || p.first == 0 {
		return 0
	}
	for g := p.ngroups - 1; g >= 0; g-- {
		last := g == p.ngroups-1 && !p.more
		if last && !numberEnd(text, p.ends[g]) {
			continue
		}
		if !last && p.seps[g] != ' ' {
			continue // it would cut a group joined to the next
		}
		if p.shapeOK(g) {
			return p.ends[g]
		}
	}
	return 0
}

// shapeOK checks the number made of groups 0..g.
func (p *phoneRun) shapeOK(g int) bool {
	n := p.counts[g]
	switch {
	case p.plus:
		// E.164: a country code from 1 and at most 15 digits; a grouped
		// number's last group has at least two digits.
		return p.first != '0' && n >= 8 && n <= 15 && (g == 0 || p.groupLen(g) >= 2)
	case g == 0:
		return false // bare digits
	case p.first == '0' && p.digits[1] == '0':
		// The international prefix 00 in place of '+' ("0049 30 1234567").
		// The group after the country code does not start with a trunk 0
		// (Italy's numbers keep theirs).
		g0 := p.groupLen(0)
		if g0 < 3 || g0 > 5 || n-2 < 8 || n-2 > 15 || p.groupLen(g) < 2 || p.digits[2] == '0' {
			return false
		}
		return p.digits[g0] != '0' || string(p.digits[2:g0]) == "39"
	case p.dateLike(g):
		return false
	case p.nanp(g):
		return true
	case g == 2 && p.groupLen(0) == 3 && p.groupLen(1) == 2 && p.groupLen(2) == 4:
		return false // AAA-GG-SSSS is a social security number's shape
	case p.first == '0':
		// A trunk 0, not the international prefix 00.
		return p.digits[1] != '0' && n >= 9 && n <= 12 && p.sameSeps(g) && p.groupLen(0) >= 2 && p.groupLen(0) <= 5 && p.minGroup(g, 2)
	}
	return false
}

// nanp checks a North American number: [1] NXX NXX XXXX, N from 2.
func (p *phoneRun) nanp(g int) bool {
	k := 0
	if p.groupLen(0) == 1 && p.first == '1' && !p.paren[0] {
		k = 1
	}
	if g-k != 2 || p.groupLen(k) != 3 || p.groupLen(k+1) != 3 || p.groupLen(k+2) != 4 {
		return false
	}
	if p.paren[k+1] || p.paren[k+2] {
		return false
	}
	c0 := p.counts[k] - 3 // the area code's first digit
	if p.digits[c0] < '2' || p.digits[c0+3] < '2' {
		return false
	}
	// Without parentheses the area code and exchange are joined alike
	// ("415-555-0100", "415.555.0100"), not "415 555-0100"'s mix, which
	// is allowed only after "(415)".
	if !p.paren[k] && p.seps[k] != p.seps[k+1] {
		return false
	}
	return true
}

func (p *phoneRun) sameSeps(g int) bool {
	for k := 1; k < g; k++ {
		if p.seps[k] != p.seps[0] || p.seps[k] == 0 {
			return false
		}
	}
	return p.seps[0] != 0 || p.paren[0]
}

func (p *phoneRun) minGroup(g, min int) bool {
	for k := 1; k <= g; k++ {
		if p.groupLen(k) < min {
			return false
		}
	}
	return true
}

// dateLike reports whether the first three groups read as a date:
// DD.MM.YYYY, YYYY-MM-DD and their variants.
func (p *phoneRun) dateLike(g int) bool {
	if g < 2 {
		return false
	}
	a, b, c := p.groupLen(0), p.groupLen(1), p.groupLen(2)
	return (a <= 2 && b <= 2 && c == 4) || (a == 4 && b <= 2 && c <= 2)
}

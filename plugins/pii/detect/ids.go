package detect

// ibanLengths is the length of an IBAN per country (SWIFT's IBAN
// registry), by the country's two letters.
var ibanLengths = map[[2]byte]uint8{
	{'A', 'D'}: 24, {'A', 'E'}: 23, {'A', 'L'}: 28, {'A', 'T'}: 20, {'A', 'Z'}: 28, {'B', 'A'}: 20,
	{'B', 'E'}: 16, {'B', 'G'}: 22, {'B', 'H'}: 22, {'B', 'I'}: 27, {'B', 'R'}: 29, {'B', 'Y'}: 28,
	{'C', 'H'}: 21, {'C', 'R'}: 22, {'C', 'Y'}: 28, {'C', 'Z'}: 24, {'D', 'E'}: 22, {'D', 'J'}: 27,
	{'D', 'K'}: 18, {'D', 'O'}: 28, {'E', 'E'}: 20, {'E', 'G'}: 29, {'E', 'S'}: 24, {'F', 'I'}: 18,
	{'F', 'K'}: 18, {'F', 'O'}: 18, {'F', 'R'}: 27, {'G', 'B'}: 22, {'G', 'E'}: 22, {'G', 'I'}: 23,
	{'G', 'L'}: 18, {'G', 'R'}: 27, {'G', 'T'}: 28, {'H', 'R'}: 21, {'H', 'U'}: 28, {'I', 'E'}: 22,
	{'I', 'L'}: 23, {'I', 'Q'}: 23, {'I', 'S'}: 26, {'I', 'T'}: 27, {'J', 'O'}: 30, {'K', 'W'}: 30,
	{'K', 'Z'}: 20, {'L', 'B'}: 28, {'L', 'C'}: 32, {'L', 'I'}: 21, {'L', 'T'}: 20, {'L', 'U'}: 20,
	{'L', 'V'}: 21, {'L', 'Y'}: 25, {'M', 'C'}: 27, {'M', 'D'}: 24, {'M', 'E'}: 22, {'M', 'K'}: 19,
	{'M', 'N'}: 20, {'M', 'R'}: 27, {'M', 'T'}: 31, {'M', 'U'}: 30, {'N', 'I'}: 28, {'N', 'L'}: 18,
	{'N', 'O'}: 15, {'O', 'M'}: 23, {'P', 'K'}: 24, {'P', 'L'}: 28, {'P', 'S'}: 29, {'P', 'T'}: 25,
	{'Q', 'A'}: 29, {'R', 'O'}: 24, {'R', 'S'}: 22, {'R', 'U'}: 33, {'S', 'A'}: 24, {'S', 'C'}: 31,
	{'S', 'D'}: 18, {'S', 'E'}: 24, {'S', 'I'}: 19, {'S', 'K'}: 24, {'S', 'M'}: 27, {'S', 'O'}: 23,
	{'S', 'T'}: 25, {'S', 'V'}: 28, {'T', 'L'}: 23, {'T', 'N'}: 24, {'T', 'R'}: 26, {'U', 'A'}: 29,
	{'V', 'A'}: 22, {'V', 'G'}: 24, {'X', 'K'}: 20,
}

// matchIBAN finds an IBAN at i: a country's two letters, two check digits
// and the account, upper case, as one word or in groups of four joined by
// single spaces, exactly as long as the country's IBANs, with the ISO 7064
// mod 97 check.
func matchIBAN(text []byte, i int) int {
	if i+4 > len(text) || !isUpper(text[i+1]) || !isDigit(text[i+2]) || !isDigit(text[i+3]) {
		return 0
	}
	want := int(ibanLengths[[2]byte{text[i], text[i+1]}])
	if want == 0 {
		return 0
	}
	// Collect the characters, allowing a single space after every fourth.
	var buf [34]byte
	n, j := 0, i
	for j < len(text) && n < want {
		c := text[j]
		if c == ' ' && n%4 == 0 && n > 0 && j+1 < len(text) && (isUpper(text[j+1]) || isDigit(text[j+1])) {
			j++
			continue
		}
		if !isUpper(c) && !isDigit(c) {
			break
		}
		buf[n] = c
		n++
		j++
	}
	if n != want || !boundaryAt(text, j) {
		return 0
	}
	if !mod97(buf[:n]) {
		return 0
	}
	return j
}

// mod97 is the IBAN check: the account, then the country and check
// digits, letters as 10–35, is 1 mod 97.
func mod97(s []byte) bool {
	rem := 0
	add := func(c byte) {
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	for _, c := range s[4:] {
		add(c)
	}
	for _, c := range s[:4] {
		add(c)
	}
	return rem == 1
}

// matchNINO finds a UK national insurance number: two prefix letters, six
// digits and a suffix A–D, joined or in pairs ("AB 12 34 56 C"). The
// prefix follows HMRC's rules: neither letter is D, F, I, Q, U or V, the
// second is not O, and BG, GB, KN, NK, NT, TN and ZZ are not issued.
func matchNINO(text []byte, i int) int {
	if i+9 > len(text) || !isUpper(text[i+1]) {
		return 0
	}
	a, b := text[i], text[i+1]
	if bad := "DFIQUV"; indexByte(bad, a) >= 0 || indexByte(bad, b) >= 0 || b == 'O' {
		return 0
	}
	switch string(text[i : i+2]) {
	case "BG", "GB", "KN", "NK", "NT", "TN", "ZZ":
		return 0
	}
	j := i + 2
	spaced := j < len(text) && text[j] == ' '
	for k := 0; k < 3; k++ {
		if spaced {
			if j >= len(text) || text[j] != ' ' {
				return 0
			}
			j++
		}
		if j+2 > len(text) || !isDigit(text[j]) || !isDigit(text[j+1]) {
			return 0
		}
		j += 2
	}
	if spaced && j < len(text) && text[j] == ' ' {
		j++
	}
	if j >= len(text) || text[j] < 'A' || text[j] > 'D' || !boundaryAt(text, j+1) {
		return 0
	}
	return j + 1
}

// matchNIE finds a Spanish NIE: X, Y or Z, seven digits and the check
// letter (X, Y, Z count as 0, 1, 2 in front of the digits), joined or with
// one '-' or space before the letter.
func matchNIE(text []byte, i int) int {
	c := text[i]
	if c != 'X' && c != 'Y' && c != 'Z' {
		return 0
	}
	j := i + 1
	if j < len(text) && text[j] == '-' {
		j++
	}
	v := int(c - 'X')
	for k := 0; k < 7; k++ {
		if j >= len(text) || !isDigit(text[j]) {
			return 0
		}
		v = v*10 + int(text[j]-'0')
		j++
	}
	if j < len(text) && (text[j] == '-' || text[j] == ' ') {
		j++
	}
	if j >= len(text) || dniLetters[v%23] != text[j] || !boundaryAt(text, j+1) {
		return 0
	}
	return j + 1
}

// The codice fiscale's check: a character's value at an odd position
// (1st, 3rd, …), by digit or letter; at an even position a digit counts as
// itself and a letter as its place in the alphabet.
var cfOdd = [36]uint8{
	1, 0, 5, 7, 9, 13, 15, 17, 19, 21, // 0-9
	1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23, // A-Z
}

// matchCodiceFiscale finds an Italian codice fiscale: six letters, two
// digits, the month's letter, two digits, a letter, three digits and the
// check letter (the standard form; the variants issued for homonyms,
// with letters for digits, are not recognised).
func matchCodiceFiscale(text []byte, i int) int {
	const shape = "LLLLLLDDMDDLDDDL"
	if i+len(shape) > len(text) || !boundaryAt(text, i+len(shape)) {
		return 0
	}
	sum := 0
	for k := 0; k < len(shape)-1; k++ {
		c := text[i+k]
		switch shape[k] {
		case 'L':
			if !isUpper(c) {
				return 0
			}
		case 'D':
			if !isDigit(c) {
				return 0
			}
		case 'M':
			if indexByte("ABCDEHLMPRST", c) < 0 {
				return 0
			}
		}
		v := int(c - '0')
		if isUpper(c) {
			v = int(c-'A') + 10
		}
		if k%2 == 0 {
			sum += int(cfOdd[v])
		} else if v >= 10 {
			sum += v - 10
		} else {
			sum += v
		}
	}
	if text[i+len(shape)-1] != byte('A'+sum%26) {
		return 0
	}
	return i + len(shape)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

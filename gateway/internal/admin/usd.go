package admin

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// microsPerUSD is how many micros make one US dollar.
const microsPerUSD = 1_000_000

// usd is an amount of US dollars held exactly in micros. In JSON it is a
// decimal string ("12.5") or a number (12.5) with at most six fractional
// digits; it is never parsed through a float, so "0.1" is exactly 100000
// micros. It is written as a decimal string without trailing zeros.
type usd int64

// UnmarshalJSON accepts a JSON string or number holding a non-negative
// decimal.
func (u *usd) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if strings.HasPrefix(s, `"`) {
		var err error
		if s, err = strconv.Unquote(s); err != nil {
			return fmt.Errorf("USD amount %s: not a string", b)
		}
	}
	m, err := parseUSD(s)
	if err != nil {
		return err
	}
	*u = usd(m)
	return nil
}

// MarshalJSON writes the amount as a decimal string.
func (u usd) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, formatUSD(int64(u))), nil
}

// parseUSD converts a non-negative decimal ("12", "12.5", "0.000001") to
// micros exactly. Exponents, signs, more than six fractional digits and
// amounts past int64 micros are errors.
func parseUSD(s string) (int64, error) {
	bad := func(why string) error { return fmt.Errorf("USD amount %q: %s", s, why) }
	whole, frac, hasDot := strings.Cut(s, ".")
	switch {
	case s == "":
		return 0, bad("empty")
	case whole == "" || (hasDot && frac == ""):
		return 0, bad("want digits on both sides of the point")
	case !allDigits(whole) || !allDigits(frac):
		return 0, bad("want a non-negative decimal such as \"12.50\"")
	case len(frac) > 6:
		return 0, bad("more than 6 fractional digits (the unit is one micro-dollar)")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/microsPerUSD-1 {
		return 0, bad("too large")
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*microsPerUSD + f, nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// formatUSD writes micros m as dollars: "50", "1.5", "0.000001".
func formatUSD(m int64) string {
	sign := ""
	if m < 0 { // never stored, but do not print garbage if it were
		if m == math.MinInt64 {
			return "-9223372036854.775808"
		}
		sign, m = "-", -m
	}
	s := sign + strconv.FormatInt(m/microsPerUSD, 10)
	if frac := m % microsPerUSD; frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return s
}

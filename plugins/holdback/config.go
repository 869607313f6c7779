package main

import (
	"errors"
	"strconv"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// mode is how a streamed reply is checked.
type mode uint8

const (
	// modeHoldback forwards text at once and holds back only a tail that
	// could still become a marker.
	modeHoldback mode = iota
	// modeBuffer holds the whole reply and decides at its end; it exists
	// to compare against (its time to first token is the reply's time).
	modeBuffer
)

// guard is a parsed, checked configuration. It is the same for every
// request and never changes after on_configure.
type guard struct {
	markers         []string
	caseInsensitive bool
	mode            mode
	correction      string
	ac              *automaton
}

const (
	defaultCorrection = "[This reply was cut off: it contained a storage link that no tool in this conversation produced.]"
	maxCorrection     = 4096
)

const configKeys = "(keys: markers, case_insensitive, mode, correction)"

// parseConfig reads and checks the plugin's config. Errors name the bad
// entry, as the operator sees them when the plugin fails to load.
func parseConfig(raw []byte) (*guard, error) {
	g := &guard{correction: defaultCorrection}
	var s jsonscan.Scanner
	s.Reset(raw)
	if s.Peek() != '{' {
		return nil, errors.New("the config must be a JSON object " + configKeys)
	}
	seenMarkers := false
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "markers":
			seenMarkers = true
			return parseMarkers(&s, g)
		case "case_insensitive":
			switch s.Peek() {
			case 't':
				g.caseInsensitive = true
				return s.Literal("true")
			case 'f':
				g.caseInsensitive = false
				return s.Literal("false")
			}
			return errors.New(`"case_insensitive" must be true or false`)
		case "mode":
			if s.Peek() != '"' {
				return errors.New(`"mode" must be "holdback" or "buffer"`)
			}
			b, err := s.Str()
			if err != nil {
				return err
			}
			switch string(b) {
			case "holdback":
				g.mode = modeHoldback
			case "buffer":
				g.mode = modeBuffer
			default:
				return errors.New(`"mode" is ` + strconv.Quote(string(b)) + `; it must be "holdback" or "buffer"`)
			}
			return nil
		case "correction":
			if s.Peek() != '"' {
				return errors.New(`"correction" must be a string`)
			}
			b, err := s.Str()
			if err != nil {
				return err
			}
			if len(b) > maxCorrection {
				return errors.New(`"correction" is ` + strconv.Itoa(len(b)) + ` bytes long; at most 4096 are allowed`)
			}
			g.correction = string(b)
			return nil
		}
		return errors.New("unknown key " + strconv.Quote(string(key)) + " " + configKeys)
	})
	if err == nil {
		err = s.End()
	}
	if err != nil {
		return nil, err
	}
	if !seenMarkers || len(g.markers) == 0 {
		return nil, errors.New(`"markers" must list at least one marker, such as "oaidalleapiprodscus.blob.core.windows.net"`)
	}
	g.ac = newAutomaton(g.markers, g.caseInsensitive)
	return g, nil
}

func parseMarkers(s *jsonscan.Scanner, g *guard) error {
	if s.Peek() != '[' {
		return errors.New(`"markers" must be a list of strings`)
	}
	g.markers = g.markers[:0]
	total := 0
	return s.Array(func(i int) error {
		entry := "markers[" + strconv.Itoa(i) + "]"
		if s.Peek() != '"' {
			return errors.New(entry + " must be a string")
		}
		b, err := s.Str()
		if err != nil {
			return err
		}
		m := string(b)
		switch {
		case m == "":
			return errors.New(entry + " is empty")
		case len(m) > maxMarkerBytes:
			return errors.New(entry + " is " + strconv.Itoa(len(m)) + " bytes long; at most 512 are allowed")
		case i >= maxMarkers:
			return errors.New(`"markers" lists more than 256 markers`)
		}
		for j := 0; j < len(m); j++ {
			if !isURLByte[m[j]] {
				what := "the non-ASCII byte 0x" + strconv.FormatUint(uint64(m[j]), 16)
				if m[j] < 0x80 {
					what = strconv.QuoteRune(rune(m[j]))
				}
				return errors.New(entry + " " + strconv.Quote(m) + " contains " + what + " at byte " + strconv.Itoa(j) +
					", which cannot be part of a URL: markers are matched inside URLs and may contain only ASCII letters, digits and " + urlPunct)
			}
		}
		if total += len(m); total > maxTotalBytes {
			return errors.New(`"markers" add up to more than 8192 bytes`)
		}
		g.markers = append(g.markers, m)
		return nil
	})
}

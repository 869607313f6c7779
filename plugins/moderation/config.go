package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// config is the parsed, checked configuration: the same for every request,
// never changed after on_configure.
type config struct {
	endpoint string
	model    string
	// thresholds are the categories that count and the score at which
	// each flags; empty: the classifier's own per-category verdicts.
	thresholds []threshold
	// checkRequest checks the last user message; checkReply a reply that
	// is not streamed; checkStream a streamed one, held until its end.
	checkRequest, checkReply, checkStream bool
	cacheTTL                              time.Duration // 0: no cache
	headers                               [][2]string
	// callHeaders are the classifier call's headers: Content-Type, then
	// headers; built once, not per call.
	callHeaders [][2]string
	correction  string
}

type threshold struct {
	category string
	score    float64
}

const (
	defaultModel      = "omni-moderation-latest"
	defaultCacheTTL   = 10 * time.Minute
	maxCacheTTL       = time.Hour
	defaultCorrection = "[This reply was withheld: content moderation flagged it.]"
	maxCorrection     = 4096
	configKeys        = "(keys: endpoint, model, categories, check, cache_ttl, headers, correction)"
)

// parseConfig reads and checks the plugin's config. Errors name the bad
// entry, as the operator sees them when the plugin fails to load.
func parseConfig(raw []byte) (*config, error) {
	c := &config{model: defaultModel, checkRequest: true, cacheTTL: defaultCacheTTL, correction: defaultCorrection}
	var s jsonscan.Scanner
	s.Reset(raw)
	if s.Peek() != '{' {
		return nil, errors.New("the config must be a JSON object " + configKeys)
	}
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "endpoint":
			return str(&s, "endpoint", &c.endpoint)
		case "model":
			return str(&s, "model", &c.model)
		case "categories":
			return parseThresholds(&s, c)
		case "check":
			return parseCheck(&s, c)
		case "cache_ttl":
			var v string
			if err := str(&s, "cache_ttl", &v); err != nil {
				return err
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > maxCacheTTL || (d > 0 && d < time.Millisecond) {
				return errors.New(`"cache_ttl" is ` + strconv.Quote(v) + `; it must be a duration from "0s" (no cache) to "1h"`)
			}
			c.cacheTTL = d
			return nil
		case "headers":
			return parseHeaders(&s, c)
		case "correction":
			if err := str(&s, "correction", &c.correction); err != nil {
				return err
			}
			if len(c.correction) > maxCorrection {
				return errors.New(`"correction" is longer than 4096 bytes`)
			}
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
	switch {
	case c.endpoint == "":
		return nil, errors.New(`"endpoint" is required: the classifier's URL, e.g. "https://api.openai.com/v1/moderations" (the policy's callout.allow must grant it)`)
	case !strings.HasPrefix(c.endpoint, "http://") && !strings.HasPrefix(c.endpoint, "https://"):
		return nil, errors.New(`"endpoint" must be an http or https URL`)
	case strings.ContainsAny(c.endpoint, " \r\n\x00"):
		return nil, errors.New(`"endpoint" must not contain spaces or control characters`)
	case c.model == "":
		return nil, errors.New(`"model" must not be empty`)
	case !c.checkRequest && !c.checkReply && !c.checkStream:
		return nil, errors.New(`"check" turns every check off: enable request, reply or stream`)
	}
	c.callHeaders = append([][2]string{{"Content-Type", "application/json"}}, c.headers...)
	return c, nil
}

func str(s *jsonscan.Scanner, name string, dst *string) error {
	if s.Peek() != '"' {
		return errors.New(strconv.Quote(name) + " must be a string")
	}
	b, err := s.Str()
	if err != nil {
		return err
	}
	*dst = string(b)
	return nil
}

func boolean(s *jsonscan.Scanner, name string, dst *bool) error {
	switch s.Peek() {
	case 't':
		*dst = true
		return s.Literal("true")
	case 'f':
		*dst = false
		return s.Literal("false")
	}
	return errors.New(strconv.Quote(name) + " must be true or false")
}

// parseThresholds reads "categories": {"violence": 0.7, ...}.
func parseThresholds(s *jsonscan.Scanner, c *config) error {
	if s.Peek() != '{' {
		return errors.New(`"categories" must be an object of category → threshold, e.g. {"violence": 0.7}`)
	}
	return s.Object(func(key []byte) error {
		name := string(key)
		num, err := s.Number()
		if err != nil {
			return errors.New(`"categories.` + name + `" must be a number between 0 and 1`)
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || f <= 0 || f > 1 {
			return errors.New(`"categories.` + name + `" is ` + string(num) + `; a threshold is above 0 and at most 1`)
		}
		for _, t := range c.thresholds {
			if t.category == name {
				return errors.New(`"categories.` + name + `" is given twice`)
			}
		}
		c.thresholds = append(c.thresholds, threshold{category: name, score: f})
		return nil
	})
}

// parseCheck reads "check": {"request": true, "reply": false, "stream": false}.
func parseCheck(s *jsonscan.Scanner, c *config) error {
	if s.Peek() != '{' {
		return errors.New(`"check" must be an object (keys: request, reply, stream)`)
	}
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "request":
			return boolean(s, "check.request", &c.checkRequest)
		case "reply":
			return boolean(s, "check.reply", &c.checkReply)
		case "stream":
			return boolean(s, "check.stream", &c.checkStream)
		}
		return errors.New("unknown key check." + string(key) + " (keys: request, reply, stream)")
	})
}

// parseHeaders reads "headers": {"Name": "value"}: headers sent to the
// classifier that are not secrets (those belong in the policy's
// callout.headers_env).
func parseHeaders(s *jsonscan.Scanner, c *config) error {
	if s.Peek() != '{' {
		return errors.New(`"headers" must be an object of header name → value`)
	}
	return s.Object(func(key []byte) error {
		name := string(key)
		var v string
		if err := str(s, "headers."+name, &v); err != nil {
			return err
		}
		if !token(name) || strings.ContainsAny(v, "\r\n\x00") {
			return errors.New(`"headers.` + name + `": invalid header name, or a value with CR, LF or NUL`)
		}
		c.headers = append(c.headers, [2]string{name, v})
		return nil
	})
}

func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

package mockllm

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Per-request override headers. Each overrides the Config field of the same
// name for one request; a malformed value gets a 400 OpenAI-style error whose
// message names the header.
const (
	HeaderTTFT         = "X-Mock-TTFT"          // Go duration, >= 0
	HeaderTokens       = "X-Mock-Tokens"        // integer, >= 0
	HeaderInterToken   = "X-Mock-Inter-Token"   // Go duration, >= 0
	HeaderText         = "X-Mock-Text"          // url.QueryUnescape-encoded text; present but empty means an empty reply
	HeaderChunkSize    = "X-Mock-Chunk-Size"    // integer, >= 1
	HeaderFailStatus   = "X-Mock-Fail-Status"   // 0 (no failure) or 200..599
	HeaderFailDelay    = "X-Mock-Fail-Delay"    // Go duration, >= 0
	HeaderCutAfter     = "X-Mock-Cut-After"     // integer, >= 0 (0: no cut)
	HeaderGarbageAfter = "X-Mock-Garbage-After" // integer, >= 0 (0: none), see Config.GarbageAfter
	HeaderUsage        = "X-Mock-Usage"         // strconv.ParseBool syntax
	HeaderSplit        = "X-Mock-Split"         // comma-separated byte offsets into the text ("" for none), see Config.Split
	HeaderToolCallAt   = "X-Mock-Tool-Call-At"  // integer, 0 (none) to the text's length, see Config.ToolCallAt
	// HeaderTokensPerByte is strconv.ParseBool syntax, see
	// Config.TokensPerByte.
	HeaderTokensPerByte = "X-Mock-Tokens-Per-Byte"
	// HeaderToolCallArgs is comma-separated fragments, each
	// url.QueryUnescape-encoded (a comma inside one is %2C), see
	// Config.ToolCallArgs.
	HeaderToolCallArgs = "X-Mock-Tool-Call-Args"
	// HeaderMCPStream is strconv.ParseBool syntax, see Config.MCPStream.
	HeaderMCPStream = "X-Mock-MCP-Stream"
	// HeaderMCPProgress is an integer >= 0, see Config.MCPProgress.
	HeaderMCPProgress = "X-Mock-MCP-Progress"
)

// canonical returns the canonical form of a header name, as net/http stores
// keys in http.Header.
var canonical = http.CanonicalHeaderKey

// Canonical header keys, computed once so lookups do not re-canonicalize.
var (
	keyTTFT         = canonical(HeaderTTFT)
	keyTokens       = canonical(HeaderTokens)
	keyInterToken   = canonical(HeaderInterToken)
	keyText         = canonical(HeaderText)
	keyChunkSize    = canonical(HeaderChunkSize)
	keyFailStatus   = canonical(HeaderFailStatus)
	keyFailDelay    = canonical(HeaderFailDelay)
	keyCutAfter     = canonical(HeaderCutAfter)
	keyGarbageAfter = canonical(HeaderGarbageAfter)
	keyUsage        = canonical(HeaderUsage)
	keySplit        = canonical(HeaderSplit)
	keyToolCallAt   = canonical(HeaderToolCallAt)

	keyToolCallArgs  = canonical(HeaderToolCallArgs)
	keyTokensPerByte = canonical(HeaderTokensPerByte)
	keyMCPStream     = canonical(HeaderMCPStream)
	keyMCPProgress   = canonical(HeaderMCPProgress)
)

// params is the effective behaviour of one request.
type params struct {
	ttft       time.Duration
	tokens     int
	interToken time.Duration
	usage      bool
	kinds      UsageKinds
	text       string
	textSet    bool
	chunkSize  int
	split      []int // offsets where Text's pieces end, checked against it
	toolCallAt int
	failStatus int
	failDelay  time.Duration
	cutAfter   int
	garbage    int // GarbageAfter
	wait       *waiter

	tokensPerByte bool // usage counts a token per byte (Config.TokensPerByte)

	// toolCallArgs are the fragments of the tool call's arguments.
	toolCallArgs []string

	mcpStream   bool // tools/call answered as SSE (Config.MCPStream)
	mcpProgress int  // progress notifications before its result
}

// params merges the server Config with the request's override headers.
func (s *Server) params(h http.Header) (*params, error) {
	c := &s.cfg
	p := &params{
		ttft:          c.TTFT,
		tokens:        c.Tokens,
		interToken:    c.InterToken,
		usage:         c.Usage,
		kinds:         c.UsageKinds,
		tokensPerByte: c.TokensPerByte,
		text:          c.Text,
		textSet:       c.Text != "",
		chunkSize:     c.ChunkSize,
		split:         c.Split,
		toolCallAt:    c.ToolCallAt,
		failStatus:    c.FailStatus,
		failDelay:     c.FailDelay,
		cutAfter:      c.CutAfter,
		garbage:       c.GarbageAfter,

		toolCallArgs: c.ToolCallArgs,
		mcpStream:    c.MCPStream,
		mcpProgress:  c.MCPProgress,
	}
	if len(h) == 0 {
		return p, p.checkText("Config.Split", "Config.ToolCallAt")
	}
	var err error
	if p.ttft, err = durationHeader(h, keyTTFT, HeaderTTFT, p.ttft); err != nil {
		return nil, err
	}
	if p.interToken, err = durationHeader(h, keyInterToken, HeaderInterToken, p.interToken); err != nil {
		return nil, err
	}
	if p.failDelay, err = durationHeader(h, keyFailDelay, HeaderFailDelay, p.failDelay); err != nil {
		return nil, err
	}
	if p.tokens, err = intHeader(h, keyTokens, HeaderTokens, p.tokens, 0, 1<<30); err != nil {
		return nil, err
	}
	if p.chunkSize, err = intHeader(h, keyChunkSize, HeaderChunkSize, p.chunkSize, 1, 1<<30); err != nil {
		return nil, err
	}
	if p.cutAfter, err = intHeader(h, keyCutAfter, HeaderCutAfter, p.cutAfter, 0, 1<<30); err != nil {
		return nil, err
	}
	if p.garbage, err = intHeader(h, keyGarbageAfter, HeaderGarbageAfter, p.garbage, 0, 1<<30); err != nil {
		return nil, err
	}
	if p.failStatus, err = intHeader(h, keyFailStatus, HeaderFailStatus, p.failStatus, 0, 599); err != nil {
		return nil, err
	}
	if p.failStatus != 0 && p.failStatus < 200 {
		return nil, headerError(HeaderFailStatus, "must be 0 or between 200 and 599")
	}
	if v, ok := h[keyTokensPerByte]; ok && len(v) > 0 {
		b, perr := strconv.ParseBool(v[0])
		if perr != nil {
			return nil, headerError(HeaderTokensPerByte, "must be true or false")
		}
		p.tokensPerByte = b
	}
	if v, ok := h[keyMCPStream]; ok && len(v) > 0 {
		b, perr := strconv.ParseBool(v[0])
		if perr != nil {
			return nil, headerError(HeaderMCPStream, "must be true or false")
		}
		p.mcpStream = b
	}
	if p.mcpProgress, err = intHeader(h, keyMCPProgress, HeaderMCPProgress, p.mcpProgress, 0, 1<<20); err != nil {
		return nil, err
	}
	if v, ok := h[keyUsage]; ok && len(v) > 0 {
		b, perr := strconv.ParseBool(v[0])
		if perr != nil {
			return nil, headerError(HeaderUsage, "must be true or false")
		}
		p.usage = b
	}
	if v, ok := h[keyUsageKinds]; ok && len(v) > 0 {
		k, perr := ParseUsageKinds(v[0])
		if perr != nil {
			return nil, headerError(HeaderUsageKinds, perr.Error())
		}
		p.kinds = k
	}
	if v, ok := h[keyText]; ok && len(v) > 0 {
		t, perr := url.QueryUnescape(v[0])
		if perr != nil {
			return nil, headerError(HeaderText, "is not valid percent-encoding")
		}
		p.text, p.textSet = t, true
	}
	splitName, toolName := "Config.Split", "Config.ToolCallAt"
	if v, ok := h[keySplit]; ok && len(v) > 0 {
		splitName, p.split = HeaderSplit+" header", nil
		for _, f := range strings.Split(v[0], ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, perr := strconv.Atoi(f)
			if perr != nil {
				return nil, headerError(HeaderSplit, "must be comma-separated byte offsets")
			}
			p.split = append(p.split, n)
		}
	}
	if _, ok := h[keyToolCallAt]; ok {
		toolName = HeaderToolCallAt + " header"
		if p.toolCallAt, err = intHeader(h, keyToolCallAt, HeaderToolCallAt, 0, 0, 1<<30); err != nil {
			return nil, err
		}
	}
	if v, ok := h[keyToolCallArgs]; ok && len(v) > 0 {
		p.toolCallArgs = nil
		for _, f := range strings.Split(v[0], ",") {
			a, perr := url.QueryUnescape(f)
			if perr != nil {
				return nil, headerError(HeaderToolCallArgs, "is not comma-separated percent-encoded fragments")
			}
			p.toolCallArgs = append(p.toolCallArgs, a)
		}
	}
	return p, p.checkText(splitName, toolName)
}

// checkText checks the split offsets and the tool call's offset against
// the reply text; the names say where they came from.
func (p *params) checkText(splitName, toolName string) error {
	if len(p.split) > 0 && !p.textSet {
		return errors.New("invalid " + splitName + ": offsets need a text reply (X-Mock-Text or Config.Text)")
	}
	prev := 0
	for _, n := range p.split {
		if n <= prev || n >= len(p.text) || !utf8.RuneStart(p.text[n]) {
			return errors.New("invalid " + splitName + ": offset " + itoa(n) +
				" is not inside the text (" + itoa(len(p.text)) + " bytes), after the previous offset and on a rune boundary")
		}
		prev = n
	}
	if p.toolCallAt != 0 && (!p.textSet || p.toolCallAt > len(p.text) || p.toolCallAt < len(p.text) && !utf8.RuneStart(p.text[p.toolCallAt])) {
		return errors.New("invalid " + toolName + ": " + itoa(p.toolCallAt) + " is not a rune boundary of the text (" + itoa(len(p.text)) + " bytes)")
	}
	return nil
}

func headerError(name, what string) error {
	return errors.New("invalid " + name + " header: value " + what)
}

func durationHeader(h http.Header, key, name string, def time.Duration) (time.Duration, error) {
	v, ok := h[key]
	if !ok || len(v) == 0 {
		return def, nil
	}
	d, err := time.ParseDuration(v[0])
	if err != nil || d < 0 {
		return 0, headerError(name, "must be a non-negative Go duration such as 150ms")
	}
	return d, nil
}

func intHeader(h http.Header, key, name string, def, lo, hi int) (int, error) {
	v, ok := h[key]
	if !ok || len(v) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < lo || n > hi {
		return 0, headerError(name, "must be an integer between "+itoa(lo)+" and "+itoa(hi))
	}
	return n, nil
}

// itoa formats n in decimal.
func itoa(n int) string { return strconv.Itoa(n) }

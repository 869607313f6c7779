package gemini

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// errorMapping is how one google.rpc status becomes an OpenAI error.
type errorMapping struct {
	status     string // google.rpc.Code name, as in error.status
	httpStatus int    // the HTTP status Google sends with it
	openaiType string
	code       string
}

// errorMappings is the table in the package documentation. The HTTP
// status is kept (CANCELLED's 499, not HTTP's, becomes 502); types follow
// the gateway's own errors and codes OpenAI's.
var errorMappings = []errorMapping{
	{"INVALID_ARGUMENT", 400, openai.TypeInvalidRequest, ""},
	{"FAILED_PRECONDITION", 400, openai.TypeInvalidRequest, "failed_precondition"},
	{"OUT_OF_RANGE", 400, openai.TypeInvalidRequest, ""},
	{"UNAUTHENTICATED", 401, openai.TypeInvalidRequest, "invalid_api_key"},
	{"PERMISSION_DENIED", 403, "permission_error", "permission_denied"},
	{"NOT_FOUND", 404, "not_found_error", "not_found"},
	{"ALREADY_EXISTS", 409, openai.TypeInvalidRequest, ""},
	{"ABORTED", 409, openai.TypeServer, ""},
	{"RESOURCE_EXHAUSTED", 429, "rate_limit_error", "rate_limit_exceeded"},
	{"CANCELLED", 499, openai.TypeUpstream, "upstream_cancelled"},
	{"INTERNAL", 500, openai.TypeServer, ""},
	{"UNKNOWN", 500, openai.TypeServer, ""},
	{"DATA_LOSS", 500, openai.TypeServer, ""},
	{"UNIMPLEMENTED", 501, openai.TypeInvalidRequest, "not_implemented"},
	{"UNAVAILABLE", 503, openai.TypeServer, "unavailable"},
	{"DEADLINE_EXCEEDED", 504, openai.TypeUpstream, "upstream_timeout"},
}

var errorParsers = sync.Pool{New: func() any { return new(fastjson.Parser) }}

// TranslateError turns a Google API error reply — status and body
// {"error":{"code":...,"message":...,"status":...,"details":[...]}}, or
// an array holding one — into the OpenAI error the gateway answers with
// (see the table in the package documentation). The status name decides
// the type and code; the HTTP status is kept. Status 0 means unknown (an
// error inside a stream): the body's code stands in for it. A body that is
// not a Google error (a load balancer's HTML page) is mapped by the
// status alone. It never returns nil.
func TranslateError(status int, body []byte) *openai.Error {
	p := errorParsers.Get().(*fastjson.Parser)
	defer errorParsers.Put(p)
	var name, msg, reason []byte
	var code int
	if root, err := p.ParseBytes(body); err == nil {
		if root.Type() == fastjson.TypeArray {
			root = root.Get("0")
		}
		e := root.Get("error")
		name, _ = stringOf(e.Get("status"))
		msg, _ = stringOf(e.Get("message"))
		code = int(intOf(e.Get("code")))
		for _, d := range e.GetArray("details") {
			if r, ok := stringOf(d.Get("reason")); ok {
				reason = r
			}
		}
	}
	if status == 0 {
		status = code
	}
	return errorFor(status, name, msg, reason)
}

// errorFor maps a status name (may be empty), HTTP status (0: unknown)
// and ErrorInfo reason to an OpenAI error. Its strings are copies.
func errorFor(status int, name, msg, reason []byte) *openai.Error {
	e := &openai.Error{Message: string(msg), Status: status}
	var m *errorMapping
	for i := range errorMappings {
		if errorMappings[i].status == string(name) {
			m = &errorMappings[i]
			break
		}
	}
	if m == nil && len(name) == 0 {
		for i := range errorMappings {
			if errorMappings[i].httpStatus == status {
				m = &errorMappings[i]
				break
			}
		}
	}
	switch {
	case m != nil:
		e.Type, e.Code = m.openaiType, m.code
		if e.Status < 400 || e.Status > 599 {
			e.Status = m.httpStatus
		}
	case status >= 500 && status <= 599:
		e.Type = openai.TypeServer
	case status >= 400 && status <= 499:
		e.Type = openai.TypeInvalidRequest
	default: // no usable status and no known name
		e.Status, e.Type, e.Code = http.StatusBadGateway, openai.TypeUpstream, "upstream_bad_response"
	}
	if e.Status == 499 {
		e.Status = http.StatusBadGateway // not an HTTP status clients know
	}
	if string(reason) == "API_KEY_INVALID" {
		e.Code = "invalid_api_key" // Google answers a bad key with 400 INVALID_ARGUMENT
	}
	if e.Message == "" {
		if status > 0 {
			e.Message = "The Gemini upstream answered HTTP " + strconv.Itoa(status)
		} else {
			e.Message = "The Gemini upstream reported an error"
		}
		if len(name) > 0 {
			e.Message += " (" + string(name) + ")"
		}
		e.Message += "."
	}
	return e
}

// retryInfoType is the @type of a google.rpc.RetryInfo error detail.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// maxRetryDelay bounds the delay RetryDelay reports, in seconds (a day).
const maxRetryDelay = 86400

// RetryDelay reads the retryDelay of the google.rpc.RetryInfo detail in a
// Google API error reply ({"error":{...,"details":[{"@type":
// "type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}, or an
// array holding one): a Duration's JSON, "37s", "1.5s", rounded up to whole
// seconds and at most a day. ok is false when the reply has none, or the
// delay is not a positive Duration.
func RetryDelay(body []byte) (seconds int, ok bool) {
	p := errorParsers.Get().(*fastjson.Parser)
	defer errorParsers.Put(p)
	root, err := p.ParseBytes(body)
	if err != nil {
		return 0, false
	}
	if root.Type() == fastjson.TypeArray {
		root = root.Get("0")
	}
	for _, d := range root.GetArray("error", "details") {
		if t, _ := stringOf(d.Get("@type")); string(t) != retryInfoType {
			continue
		}
		v, _ := stringOf(d.Get("retryDelay"))
		return parseDelay(v)
	}
	return 0, false
}

// parseDelay reads a Duration's JSON form, seconds with up to nine
// fractional digits and the suffix "s", rounded up to whole seconds.
func parseDelay(v []byte) (int, bool) {
	whole, frac, ok := strings.Cut(strings.TrimSuffix(string(v), "s"), ".")
	if len(v) < 2 || v[len(v)-1] != 's' || whole == "" || (ok && (frac == "" || len(frac) > 9)) {
		return 0, false
	}
	n, err := strconv.ParseUint(whole, 10, 32)
	if err != nil || strings.HasPrefix(whole, "+") {
		return 0, false
	}
	if strings.Trim(frac, "0123456789") != "" {
		return 0, false
	}
	if strings.Trim(frac, "0") != "" {
		n++ // a fraction rounds up
	}
	if n == 0 {
		return 0, false
	}
	return int(min(n, maxRetryDelay)), true
}

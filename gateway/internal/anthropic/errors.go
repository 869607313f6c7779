package anthropic

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// StatusOverloaded is the status Anthropic answers with when its API is
// overloaded (not a standard HTTP status).
const StatusOverloaded = 529

// errorMapping is how one Anthropic error type becomes an OpenAI error.
type errorMapping struct {
	anthropicType string
	status        int // Anthropic's status for the type
	openaiStatus  int
	openaiType    string
	code          string
}

// errorMappings is the table in the package documentation. Statuses are
// kept except 529, which OpenAI clients know as 503; types follow the
// gateway's own errors (see proxy.defaultErrorType) and codes OpenAI's.
var errorMappings = []errorMapping{
	{"invalid_request_error", 400, 400, openai.TypeInvalidRequest, ""},
	{"authentication_error", 401, 401, openai.TypeInvalidRequest, "invalid_api_key"},
	{"billing_error", 402, 402, openai.TypeInsufficientQuota, "insufficient_quota"},
	{"permission_error", 403, 403, "permission_error", "permission_denied"},
	{"not_found_error", 404, 404, "not_found_error", "not_found"},
	{"request_too_large", 413, 413, openai.TypeInvalidRequest, "request_too_large"},
	{"rate_limit_error", 429, 429, "rate_limit_error", "rate_limit_exceeded"},
	{"api_error", 500, 500, openai.TypeServer, ""},
	{"timeout_error", 504, 504, openai.TypeUpstream, "upstream_timeout"},
	{"overloaded_error", StatusOverloaded, 503, openai.TypeServer, "overloaded"},
}

var errorParsers = sync.Pool{New: func() any { return new(fastjson.Parser) }}

// TranslateError turns an Anthropic error reply — status and body
// {"type":"error","error":{"type":...,"message":...}} — into the OpenAI
// error the gateway answers with (see the table in the package
// documentation). The error type decides the mapping; the status is used
// when the type is missing or unknown (a body that is not an Anthropic
// error, such as a load balancer's HTML page). Status 0 means unknown (a
// stream's error event). The message is Anthropic's, or a sentence naming
// the status when there is none. It never returns nil.
func TranslateError(status int, body []byte) *openai.Error {
	p := errorParsers.Get().(*fastjson.Parser)
	defer errorParsers.Put(p)
	var typ, msg []byte
	if root, err := p.ParseBytes(body); err == nil {
		typ, _ = stringOf(root.Get("error", "type"))
		msg, _ = stringOf(root.Get("error", "message"))
	}
	return errorFor(status, typ, msg)
}

// errorFor maps an Anthropic error type (may be empty) and status (0:
// unknown) to an OpenAI error. Its strings are copies.
func errorFor(status int, typ, msg []byte) *openai.Error {
	e := &openai.Error{Message: string(msg)}
	m := mappingFor(status, typ)
	if m != nil {
		e.Status, e.Type, e.Code = m.openaiStatus, m.openaiType, m.code
	} else {
		switch {
		case status == StatusOverloaded:
			e.Status, e.Type, e.Code = 503, openai.TypeServer, "overloaded"
		case status >= 500 && status <= 599:
			e.Status, e.Type = status, openai.TypeServer
		case status >= 400 && status <= 499:
			e.Status, e.Type = status, openai.TypeInvalidRequest
		default: // no usable status (none, not an error, not HTTP's) and no known type
			e.Status, e.Type, e.Code = http.StatusBadGateway, openai.TypeUpstream, "upstream_bad_response"
		}
	}
	if e.Message == "" {
		if status > 0 {
			e.Message = "The Anthropic upstream answered HTTP " + strconv.Itoa(status)
		} else {
			e.Message = "The Anthropic upstream reported an error"
		}
		if len(typ) > 0 {
			e.Message += " (" + string(typ) + ")"
		}
		e.Message += "."
	}
	return e
}

func mappingFor(status int, typ []byte) *errorMapping {
	if len(typ) > 0 {
		for i := range errorMappings {
			if errorMappings[i].anthropicType == string(typ) {
				return &errorMappings[i]
			}
		}
		if status == 0 {
			// An unknown type in a stream: a server-side failure.
			return &errorMapping{openaiStatus: 500, openaiType: openai.TypeServer}
		}
	}
	for i := range errorMappings {
		if errorMappings[i].status == status {
			return &errorMappings[i]
		}
	}
	return nil
}

// ErrorType is the Messages API error type for an error the gateway itself
// answers with on the native endpoint, chosen by HTTP status (the table
// above read backwards): 401 authentication_error, 402 billing_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503 and 529 overloaded_error, 504 timeout_error, other
// 5xx api_error, anything else invalid_request_error.
func ErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, StatusOverloaded:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AppendError appends e as a Messages API error body,
// {"type":"error","error":{"type":...,"message":...}}, with the type
// ErrorType gives for e.Status. OpenAI's code and param have no place in
// it; the message keeps what they said.
func AppendError(dst []byte, e *openai.Error) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = openai.AppendJSONString(dst, ErrorType(e.Status))
	dst = append(dst, `,"message":`...)
	dst = openai.AppendJSONString(dst, e.Message)
	return append(dst, "}}"...)
}

// AppendErrorEvent appends e as a Messages API stream error event:
// "event: error" and AppendError's body as its data.
func AppendErrorEvent(dst []byte, e *openai.Error) []byte {
	dst = append(dst, "event: error\ndata: "...)
	dst = AppendError(dst, e)
	return append(dst, "\n\n"...)
}

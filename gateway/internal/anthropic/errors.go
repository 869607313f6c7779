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
		case status >= 500:
			e.Status, e.Type = status, openai.TypeServer
		case status >= 400:
			e.Status, e.Type = status, openai.TypeInvalidRequest
		default: // no usable status and no known type: not an error the upstream meant
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

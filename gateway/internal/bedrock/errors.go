package bedrock

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// errorMapping is how one Bedrock exception becomes an OpenAI error.
type errorMapping struct {
	exception    string // lower case, without "Exception"
	status       int    // Bedrock's status for it
	openaiStatus int
	openaiType   string
	code         string
}

// errorMappings is the table in the package documentation. Types and codes
// follow the Anthropic translation's (and so the gateway's own errors).
var errorMappings = []errorMapping{
	{"validation", 400, 400, openai.TypeInvalidRequest, ""},
	{"servicequotaexceeded", 400, 429, "rate_limit_error", "rate_limit_exceeded"},
	{"accessdenied", 403, 403, "permission_error", "permission_denied"},
	{"unrecognizedclient", 403, 401, openai.TypeInvalidRequest, "invalid_api_key"},
	{"invalidsignature", 403, 401, openai.TypeInvalidRequest, "invalid_api_key"},
	{"expiredtoken", 403, 401, openai.TypeInvalidRequest, "invalid_api_key"},
	{"resourcenotfound", 404, 404, "not_found_error", "not_found"},
	{"modeltimeout", 408, 504, openai.TypeUpstream, "upstream_timeout"},
	{"modelerror", 424, 502, openai.TypeUpstream, "model_error"},
	{"modelstreamerror", 424, 502, openai.TypeUpstream, "model_error"},
	{"throttling", 429, 429, "rate_limit_error", "rate_limit_exceeded"},
	{"modelnotready", 429, 503, openai.TypeServer, "overloaded"},
	{"internalserver", 500, 500, openai.TypeServer, ""},
	{"serviceunavailable", 503, 503, openai.TypeServer, "overloaded"},
}

var errorParsers = sync.Pool{New: func() any { return new(fastjson.Parser) }}

// TranslateError turns a Bedrock error reply into the OpenAI error the
// gateway answers with (see the table in the package documentation).
// errorType is the X-Amzn-Errortype header's value, or a stream
// exception's :exception-type ("ValidationException",
// "throttlingException", "ValidationException:http://..."); when it is
// empty the body's "__type" or "code" is used, then the status. body is
// Bedrock's {"message":...} ("Message" also read). Status 0 means unknown
// (a stream exception). It never returns nil.
func TranslateError(status int, errorType, body []byte) *openai.Error {
	p := errorParsers.Get().(*fastjson.Parser)
	defer errorParsers.Put(p)
	var msg []byte
	if root, err := p.ParseBytes(body); err == nil {
		if msg, _ = stringOf(root.Get("message")); msg == nil {
			msg, _ = stringOf(root.Get("Message"))
		}
		if len(errorType) == 0 {
			if errorType, _ = stringOf(root.Get("__type")); errorType == nil {
				errorType, _ = stringOf(root.Get("code"))
			}
		}
	}
	return errorFor(status, exceptionName(errorType), msg)
}

// exceptionName reduces an error type as AWS writes it
// ("com.amazon.bedrock#ValidationException:http://...") to its lower-case
// name without "exception" ("validation").
func exceptionName(t []byte) string {
	if i := bytes.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	if i := bytes.IndexByte(t, ':'); i >= 0 {
		t = t[:i]
	}
	s := strings.ToLower(strings.TrimSpace(string(t)))
	return strings.TrimSuffix(s, "exception")
}

// errorFor maps an exception name (may be empty) and status (0: unknown)
// to an OpenAI error.
func errorFor(status int, exception string, msg []byte) *openai.Error {
	e := &openai.Error{Message: string(msg)}
	if m := mappingFor(status, exception); m != nil {
		e.Status, e.Type, e.Code = m.openaiStatus, m.openaiType, m.code
	} else {
		switch {
		case status >= 500 && status <= 599:
			e.Status, e.Type = status, openai.TypeServer
		case status >= 400 && status <= 499:
			e.Status, e.Type = status, openai.TypeInvalidRequest
		case status == 0 && exception != "":
			e.Status, e.Type = http.StatusInternalServerError, openai.TypeServer // an unknown stream exception
		default:
			e.Status, e.Type, e.Code = http.StatusBadGateway, openai.TypeUpstream, "upstream_bad_response"
		}
	}
	if e.Message == "" {
		if status > 0 {
			e.Message = "The Bedrock upstream answered HTTP " + strconv.Itoa(status)
		} else {
			e.Message = "The Bedrock upstream reported an error"
		}
		if exception != "" {
			e.Message += " (" + exception + ")"
		}
		e.Message += "."
	}
	return e
}

func mappingFor(status int, exception string) *errorMapping {
	if exception != "" {
		for i := range errorMappings {
			if errorMappings[i].exception == exception {
				return &errorMappings[i]
			}
		}
	}
	for i := range errorMappings {
		// A status alone picks the first, most common, exception with it.
		if errorMappings[i].status == status {
			return &errorMappings[i]
		}
	}
	return nil
}

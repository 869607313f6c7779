package stream

import (
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Cancelled ends a request cancelled through the cancel API: the client's
// reply (409) or the stream's final event.
func Cancelled() *openai.Error {
	return &openai.Error{Status: 409, Type: "invalid_request_error", Code: "request_cancelled",
		Message: "The request was cancelled (POST /v1/requests/{id}/cancel); the reply ends here."}
}

// PluginFailed is the client's error for a plugin failure under
// fail_closed; outcome ends the message (", so the request was not served.").
func PluginFailed(err error, outcome string) *openai.Error {
	msg := "The gateway's policy plugin failed" + outcome
	var fail *wasmhost.FailureError
	if errors.As(err, &fail) {
		msg = fmt.Sprintf("The gateway's policy plugin %q failed%s", fail.Plugin, outcome)
	}
	return &openai.Error{Status: 500, Type: "server_error", Code: "plugin_failed", Message: msg}
}

// Command dispatchplugin asks a classifier over HTTP about the last user
// message of each request, for the tests of plugintest's dispatched calls.
// It posts the message's text to the configured url and answers on the
// response: "flagged" rejects with a 400, any other 200 passes with the
// answer in X-Classified, and a failed call or another status answers FAIL
// (the policy's on_error decides).
//
// Config: {"url": "https://classifier.test/v1/classify"}
package main

import (
	"encoding/json"
	"time"

	"github.com/tollgate/tollgate/sdk"
)

func main() {}

var url string

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		var c struct{ URL string }
		if err := json.Unmarshal(cfg, &c); err != nil {
			return err
		}
		url = c.URL
		return nil
	})
	sdk.OnRequest(onRequest)
	sdk.OnCallResponse(onCallResponse)
}

func onRequest(r *sdk.Request) sdk.Verdict {
	text := ""
	for _, p := range r.Messages(nil) {
		if string(p.Role) == "user" {
			text = string(p.Text)
		}
	}
	if text == "" {
		return sdk.Continue
	}
	_, err := sdk.DispatchHTTP(sdk.HTTPRequest{Method: "POST", URL: url,
		Header: [][2]string{{"Content-Type", "text/plain"}}, Body: []byte(text),
		CacheKey: text, CacheTTL: time.Minute})
	if err != nil {
		sdk.Log(sdk.LevelWarn, "dispatch: "+err.Error())
		return sdk.Fail
	}
	return sdk.Pause
}

func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
	if err := c.Err(); err != nil {
		sdk.Log(sdk.LevelWarn, "classifier: "+err.Error())
		return sdk.Fail
	}
	if c.Status() != 200 {
		return sdk.Fail
	}
	r := c.Request()
	if string(c.Body()) == "flagged" {
		return r.Reject(400, "invalid_request_error", "content_flagged", "The request was flagged by the classifier.")
	}
	if err := r.SetResponseHeader("X-Classified", string(c.Body())); err != nil {
		return sdk.Fail
	}
	return sdk.Continue
}

// Command rewriteplugin rewrites the texts of a request's messages with
// set_message_text and reports what it then sees, for the tests of request
// rewriting (the host's, the harness's and the gateway's).
//
// Config (every key optional):
//
//	{
//	  "replace": {"secret": "[redacted]"},  // every part whose text holds a key gets it replaced
//	  "set": [{"record": 0, "text": "x"}],   // then these calls, as given
//	  "report": "X-Rewrite",                 // a response header: what the plugin saw after its rewrites
//	  "phase": "request"                     // or "response_headers": rewrite there (refused by the host)
//	}
//
// The report is "status=S,S,... chars=C tokens=T bytes=B bound=N texts=A|B|...":
// the error of each call ("ok", "absent", "invalid", "not_allowed"), then
// request_int's PROMPT_CHARS, PROMPT_TOKENS, BODY_BYTES and
// PROMPT_TOKENS_BOUND (-1 when unknown) and the texts of the parts.
package main

import (
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

type config struct {
	Replace map[string]string `json:"replace"`
	Set     []struct {
		Record int    `json:"record"`
		Text   string `json:"text"`
	} `json:"set"`
	Report string `json:"report"`
	Phase  string `json:"phase"`
}

var cfg config

func main() {}

func init() {
	sdk.OnConfigure(func(b []byte) error { return json.Unmarshal(b, &cfg) })
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		if cfg.Phase == "" || cfg.Phase == "request" {
			report(&r.Exchange, rewrite(r), r.SetResponseHeader)
		}
		return sdk.Continue
	})
	sdk.OnResponseHeaders(func(r *sdk.Response) sdk.Verdict {
		if cfg.Phase == "response_headers" {
			// The Request view's method, called where the host refuses it.
			req := &sdk.Request{Exchange: r.Exchange}
			report(&r.Exchange, rewrite(req), r.SetResponseHeader)
		}
		return sdk.Continue
	})
}

// rewrite applies the config and returns the outcome of each call.
func rewrite(r *sdk.Request) []string {
	var out []string
	keys := make([]string, 0, len(cfg.Replace))
	for k := range cfg.Replace {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, p := range r.Messages(nil) {
		text := string(p.Text)
		for _, k := range keys {
			text = strings.ReplaceAll(text, k, cfg.Replace[k])
		}
		if text != string(p.Text) {
			out = append(out, outcome(r.SetMessageText(p.Record, text)))
		}
	}
	for _, s := range cfg.Set {
		out = append(out, outcome(r.SetMessageText(s.Record, s.Text)))
	}
	return out
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sdk.ErrAbsent):
		return "absent"
	case errors.Is(err, sdk.ErrInvalid):
		return "invalid"
	case errors.Is(err, sdk.ErrNotAllowed):
		return "not_allowed"
	}
	return err.Error()
}

// report sets the report header, when the config names one.
func report(x *sdk.Exchange, outcomes []string, set func(name, value string) error) {
	if cfg.Report == "" {
		return
	}
	bound, ok := x.PromptTokensBound()
	if !ok {
		bound = -1
	}
	var texts []string
	for _, p := range x.Messages(nil) {
		texts = append(texts, string(p.Text))
	}
	v := "status=" + strings.Join(outcomes, ",") +
		" chars=" + strconv.FormatInt(x.PromptChars(), 10) +
		" tokens=" + strconv.FormatInt(x.PromptTokensEstimate(), 10) +
		" bytes=" + strconv.FormatInt(x.BodyBytes(), 10) +
		" bound=" + strconv.FormatInt(bound, 10) +
		" texts=" + strings.Join(texts, "|")
	if err := set(cfg.Report, v); err != nil {
		panic(err)
	}
}
